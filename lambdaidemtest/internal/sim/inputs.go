package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

// Inputs a queue may send that a plain draw never makes: one key in
// several FIFO message groups (Config.SharedGroups), which a FIFO queue
// allows, so that groups running side by side ask for one key at once,
// and a batched claim names it twice; the same key twice at one moment
// (Config.Twice), so one batch holds it twice; bodies close to SQS's
// message size limit (Config.LargeBody), whose dead-letter copies may fit
// only with their error text cut, or not at all.

// MaxMessageSize is the largest message the simulated queues accept: the
// body plus each attribute's name, data type and value, as SQS counts
// them (its default MaximumMessageSize, 256 KiB).
const MaxMessageSize = 256 * 1024

// largeBody is the smallest body the checker counts as near the limit.
const largeBody = MaxMessageSize - 4096

// inputs draws what the producer's messages look like beyond their kind:
// per key, the size its bodies are padded to (0: not padded), and per
// message its group and deduplication ID.
type inputs struct {
	s    *Scenario
	pads []int
	// forms is, per key with Config.KeyForms, how its key is written in
	// its bodies (keyForm), or how a malformed body is malformed.
	forms []int
	// texts caches each key's body per payload variant: a padded body is
	// made once.
	texts map[[2]int]string
	seq   int
}

// newInputs draws the padding of each key's bodies. It draws nothing
// without Config.LargeBody, so scenarios without it stay as they were.
func (s *Scenario) newInputs(keys int) *inputs {
	in := &inputs{s: s, pads: make([]int, keys), forms: make([]int, keys), texts: map[[2]int]string{}}
	r := s.w.rng
	if s.Cfg.KeyForms {
		for i := range in.forms {
			in.forms[i] = r.IntN(len(malformed))
		}
	}
	if s.Cfg.LargeBody <= 0 {
		return in
	}
	for i := range in.pads {
		if r.Float64() < s.Cfg.LargeBody {
			// Up to 3 KiB below the limit, less what an attribute key takes:
			// some copies fit once their error text is cut, some never do.
			in.pads[i] = MaxMessageSize - 64 - r.IntN(3072)
		}
	}
	return in
}

// text is the body of a message of key ki with body b: its JSON, padded
// to the key's size when drawn, cut short when malformed.
func (in *inputs) text(ki int, b body) string {
	id := [2]int{ki, b.V}
	if t, ok := in.texts[id]; ok {
		return t
	}
	raw, _ := json.Marshal(b)
	if n := in.pads[ki]; n > 0 {
		b.Pad = strings.Repeat("x", max(n-len(raw)-len(`,"pad":""`), 0))
		raw, _ = json.Marshal(b)
	}
	text := string(raw)
	if b.Kind == "malformed" {
		form := in.forms[ki]
		if form == len(malformed)-1 && in.s.Cfg.KeyBy != "" && in.s.Cfg.KeyBy != "field" {
			// An object is a value like any other to WithHashJSONFields:
			// malformed only where the key is read from it.
			form = 0
		}
		text = malformed[form](text, b.Key)
	} else if in.forms[ki]%2 == 1 {
		// The key written with its last character escaped: the same key
		// to a JSON reader (WithKeyJSONField, WithHashJSONFields).
		k := b.Key
		text = strings.Replace(text, `"key":"`+k+`"`, `"key":"`+k[:len(k)-1]+fmt.Sprintf(`\u%04x`, k[len(k)-1])+`"`, 1)
	}
	in.texts[id] = text
	return text
}

// malformed are the ways a body of kind "malformed" is not a JSON body
// with a key: cut short (not JSON), the key field given twice, a key that
// is a lone surrogate, data after the object, a key field holding an
// object. The simulator's own key function and WithKeyJSONField refuse
// each as malformed; so does WithHashJSONFields over the key field, but
// for the object, which it hashes as any other value (an object there is
// drawn only where the key is read from the body).
var malformed = []func(text, key string) string{
	func(text, _ string) string { return text[:len(text)-1] },
	func(text, key string) string {
		return strings.Replace(text, `"key":"`+key+`"`, `"key":"`+key+`","key":"`+key+`"`, 1)
	},
	func(text, key string) string { return strings.Replace(text, `"key":"`+key+`"`, `"key":"\ud800"`, 1) },
	func(text, _ string) string { return text + ` {}` },
	func(text, key string) string {
		return strings.Replace(text, `"key":"`+key+`"`, `"key":{"id":"`+key+`"}`, 1)
	},
}

// group is a message's FIFO group and deduplication ID: its key's own
// group, or with Config.SharedGroups sometimes another, with an ID of its
// own (content-based deduplication would drop a second message of the
// key within five minutes, in any group).
func (in *inputs) group(ki int) (group, dedup string) {
	c := in.s.Cfg
	g := ki % c.Groups
	if c.SharedGroups <= 0 {
		return "g" + strconv.Itoa(g), ""
	}
	if in.s.w.rng.Float64() < c.SharedGroups {
		g = in.s.w.rng.IntN(c.Groups)
	}
	in.seq++
	return "g" + strconv.Itoa(g), "m-" + strconv.Itoa(in.seq)
}

// twice sends, with Config.Twice, a second message of the same body at
// the same moment as the first (a producer that sent it twice at once):
// one receive hands both out, so one batch holds the key twice; on a FIFO
// queue with shared groups, in another group than its key's.
func (in *inputs) twice(at time.Duration, text string, attrs map[string]types.MessageAttributeValue, ki int) {
	s := in.s
	if s.Cfg.Twice <= 0 || s.w.rng.Float64() >= s.Cfg.Twice {
		return
	}
	group, _ := in.group(ki)
	if c := s.Cfg; c.SharedGroups > 0 && c.Groups > 1 {
		// Another group than its key's: the two run side by side.
		group = "g" + strconv.Itoa((ki%c.Groups+1+s.w.rng.IntN(c.Groups-1))%c.Groups)
	}
	in.seq++
	dedup := "twice-" + strconv.Itoa(in.seq)
	s.w.At(at, nil, func() {
		s.sent++
		s.src.Send(text, attrs, group, dedup)
	})
}

// keyTwice reports whether a batched claim names one key twice.
func keyTwice(reqs []idemstore.ClaimRequest) bool {
	seen := make(map[string]bool, len(reqs))
	for _, r := range reqs {
		if seen[r.Key] {
			return true
		}
		seen[r.Key] = true
	}
	return false
}

// inputSeen is what the world delivered of the inputs above, for
// Result: the tests hold the generator to reaching each.
type inputSeen struct {
	keyTwice, large, largeCopies, tooLarge int
	groups                                 map[string]map[string]bool // key -> FIFO groups delivered in
}

// onBatch notes what a batch holds: a key twice, bodies near the limit,
// the groups each key was delivered in.
func (s *Scenario) onBatch(batch []*Message) {
	seen := &s.seen
	keys := make(map[string]bool, len(batch))
	twice := false
	for _, m := range batch {
		k := s.keyOfMessage(m)
		twice = twice || keys[k]
		keys[k] = true
		if len(m.Body) >= largeBody {
			seen.large++
		}
		if s.Cfg.FIFO {
			if seen.groups == nil {
				seen.groups = map[string]map[string]bool{}
			}
			if seen.groups[k] == nil {
				seen.groups[k] = map[string]bool{}
			}
			seen.groups[k][m.GroupID] = true
		}
	}
	if twice {
		seen.keyTwice++
	}
}

// largeCopy notes a dead-letter copy of a body near the size limit: sent,
// or refused as too large for the DLQ (which must say so).
func (s *Scenario) largeCopy(dl lambdaidem.DeadLetter, err error) {
	if len(dl.Message.Body) < largeBody {
		return
	}
	switch {
	case err == nil:
		s.seen.largeCopies++
	case errors.Is(err, sqsqueue.ErrTooLarge):
		s.seen.tooLarge++
	}
}

// inputStats copies what the world delivered into res.
func (s *Scenario) inputStats(res *Result) {
	res.KeyTwiceBatches, res.KeyTwiceClaims = s.seen.keyTwice, s.store.KeyTwice
	res.LargeDeliveries, res.LargeCopies, res.TooLarge = s.seen.large, s.seen.largeCopies, s.seen.tooLarge
	for _, g := range s.seen.groups {
		if len(g) > 1 {
			res.SharedKeys++
		}
	}
}

// handlerFaults draws, with Config.Panics, the keys whose handler panics
// on its first run (quick keys that fail nothing else) and the failing
// keys whose failures ask to be retried later (RetryAfter). It draws from
// a stream of its own, so every other draw of a seed stays what it was.
func (s *Scenario) handlerFaults(kinds []body) {
	c := s.Cfg
	if c.Panics <= 0 {
		return
	}
	r := rand.New(rand.NewPCG(s.Seed, 0x9a1c))
	for i, b := range kinds {
		switch {
		case b.Kind != "plain" || b.After != 0:
		case b.Fail > 0:
			if r.Float64() < c.Panics {
				kinds[i].RetryIn = 1 + r.IntN(20)
			}
		case b.Slow == 0 && r.Float64() < c.Panics:
			kinds[i].Panic = true
		}
	}
}

// logger is the decorator's logger: with Config.Logs, a handler that
// reads every line (each attribute's value, errors included) and keeps
// nothing, so the lines are built as production builds them; without,
// slog's discarding handler, which the decorator asks and then skips
// building them.
func (s *Scenario) logger() *slog.Logger {
	if s.Cfg.Logs {
		return slog.New(readHandler{})
	}
	return slog.New(slog.DiscardHandler)
}

// readHandler is a slog.Handler that reads every record and keeps nothing.
type readHandler struct{}

func (readHandler) Enabled(context.Context, slog.Level) bool { return true }

func (readHandler) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		_ = a.Value.Resolve().String()
		return true
	})
	return nil
}

func (h readHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h readHandler) WithGroup(string) slog.Handler      { return h }

// effectKey checks what the handler's context says of its record: its
// key is the lease's (or, without a lease, the message's; InvWhose); its
// effect key is EffectKeyOf the record's namespace, key and generation,
// one per generation whatever the run (a redelivery, a retry, a takeover,
// a redrive), and another for every generation; a run without a lease
// has none (InvKeyed, in every scenario, with a keyed downstream or not).
// The keys are left out of the violations: they derive from the
// generation, which is random, and traces must replay alike.
func (s *Scenario) effectKey(ctx context.Context, k string, lease idemstore.Lease, by string) {
	if got, ok := lambdaidem.KeyFromContext(ctx); !ok || got != k {
		s.violate(InvWhose, "key %s: the context of %s says its key is %q", k, by, got)
	}
	ek, ok := lambdaidem.EffectKey(ctx)
	gen := lease.Fence.Generation
	switch {
	case gen == "" && ok:
		s.violate(InvKeyed, "effect key: %s runs key %s without a lease, but has an effect key", by, k)
	case gen == "":
	case !ok || ek != lambdaidem.EffectKeyOf(lease.Namespace, k, gen):
		s.violate(InvKeyed, "effect key: the run of key %s by %s has no effect key, or not the one of its record's namespace, key and generation", k, by)
	default:
		if s.effectKeys == nil {
			s.effectKeys = map[string]string{}
		}
		if prev, seen := s.effectKeys[ek]; seen && prev != k+"\x00"+gen {
			s.violate(InvKeyed, "effect key: the run of key %s by %s has the effect key of another key or generation", k, by)
		}
		s.effectKeys[ek] = k + "\x00" + gen
	}
}

// binary adds, with Config.KeyForms, a Binary attribute to a message's
// attributes: the decorator copies it for the handler, and the
// dead-letter copy and redrive carry it.
func (in *inputs) binary(attrs map[string]types.MessageAttributeValue) map[string]types.MessageAttributeValue {
	if !in.s.Cfg.KeyForms {
		return attrs
	}
	out := map[string]types.MessageAttributeValue{"sig": {DataType: aws.String("Binary"), BinaryValue: []byte{0, 0xff, 7}}}
	for k, v := range attrs {
		out[k] = v
	}
	return out
}
