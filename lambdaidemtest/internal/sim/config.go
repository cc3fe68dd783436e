package sim

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Config is one scenario's world and decorator options. Generate draws it
// from a seed; Shrink makes it smaller. Its JSON form replays a shrunk
// scenario exactly (with the same seed).
type Config struct {
	Messages  int // distinct sends by the producer (before its duplicates)
	Keys      int // distinct idempotency keys they use
	FIFO      bool
	Groups    int // FIFO message groups
	BatchSize int
	Pollers   int
	// Timeout is the function's timeout; Visibility the queue's.
	Timeout, Visibility time.Duration
	MaxReceive          int // redrive policy (0: none)
	SendOver            time.Duration

	// Decorator options.
	Tx             bool    // effects committed with the completion
	TxRefuse       float64 // chance such an effect's own condition fails
	Cache          time.Duration
	Heartbeat      time.Duration
	Lease          time.Duration
	Grace          time.Duration
	Margin         time.Duration
	AtMostOnce     bool
	FailOnAny      bool
	Isolate        bool
	Backoff        bool
	Visibility2    bool // give the decorator a visibility changer
	Sink           bool // give the decorator a dead-letter sink
	Retention      time.Duration
	ResultRet      time.Duration
	UnfinishedRet  time.Duration
	MaxAttempts    int
	Concurrency    int
	ProducerDup    float64 // chance a send is repeated with a new message ID
	SQSDup         float64 // SQS's own duplicate deliveries
	Conflict       float64 // chance a message reuses a key with another body
	Poison         float64
	FailN          float64 // chance a message fails its first 1..3 runs
	Slow           float64 // chance a message's handler is slow
	Honour         float64 // chance a slow handler honours cancellation
	EffectFirst    float64 // chance a slow handler has its effect before its slow part
	Store          StoreFaults
	Kill           float64 // chance per kill point
	SinkFail       float64 // chance a dead-letter send fails
	Redrive        int     // operator redrive runs
	RedriveDelFail float64 // chance redrive's DLQ delete fails
	// RedriveSendFail is the chance redrive's send back to the source
	// queue fails; MaxRedrives is redrive's limit per record (0: none).
	RedriveSendFail float64
	MaxRedrives     int
	// BadKey is the chance a key's messages cannot be keyed: the key
	// function panics, or (half of them) the body is malformed.
	BadKey float64
	// Forget is how many operator forgets (and as many releases) run.
	// ForceOps is the chance one is forced (a live lease is revoked);
	// AbandonCopy the chance a forget of a DEAD_LETTERED record abandons
	// its dead-letter copy.
	Forget      int
	ForceOps    float64
	AbandonCopy float64
	SlowPoison  bool // slow handlers may end with Poison
	// Request streams through Wrap (or httpidem when HTTP).
	Requests      int
	HTTP          bool
	ClientTimeout time.Duration
	BigInt        bool // results hold integers above 2^53
	LargeResult   bool // results larger than the decorator may store
	// Callers, with HTTP, is how many callers send requests (one of them
	// named like httpidem.Anonymous) beside anonymous ones the route
	// accepts (WithAnonymousCallers); 0: one caller.
	Callers int

	// KeyBy is the SQS key option: "" the key function (which may panic),
	// "field" WithKeyJSONField, "attr" WithKeyAttribute (the producer sets
	// the attribute), "id" WithKeyMessageID.
	KeyBy string
	// HashFields hashes only the body's key and variant fields
	// (WithHashJSONFields) instead of the whole body.
	HashFields bool
	// NoAllFailedError turns WithAllFailedError off.
	NoAllFailedError bool
	// Observe gives every decorator an observer (ObserverCheck), so
	// records run under contexts of their own.
	Observe bool
	// Known are the known-bug knobs turned on (see Known).
	Known []string `json:",omitempty"`
	// Wait is the bound of lambdaidem.WithWaitForCompletion for the
	// request streams (0: off). Twins is then the chance a request is
	// sent twice within two seconds, LateFail the chance a request's key
	// fails its first run after a slow part.
	Wait     time.Duration `json:",omitempty"`
	Twins    float64       `json:",omitempty"`
	LateFail float64       `json:",omitempty"`
	// Optimistic is the chance an execution environment's decorator runs
	// WithOptimisticCommit (1: all of them; between 0 and 1: a mixed
	// fleet of lease-mode and optimistic consumers on one table). It
	// applies with Tx only (the mode is for effects committed with the
	// completion); with WithAtMostOnce or WithHeartbeat the decorator must
	// refuse it when built, and the environment runs in lease mode.
	Optimistic float64 `json:",omitempty"`
	// Resolve is how many operator runs resolve the records whose outcome
	// is unknown (sqsqueue.Resolve): each decides every such record whose
	// function timeout has passed since it was marked, applied when the
	// effect happened, not applied when it did not, or, with chance
	// Abandon, abandoned. RedriveUncertain is the chance a redrive run
	// sends outcome_unknown copies back too (IncludeOutcomeUnknown): an
	// operator's decision to run them again.
	Resolve          int     `json:",omitempty"`
	Abandon          float64 `json:",omitempty"`
	RedriveUncertain float64 `json:",omitempty"`
	// Batched is the chance an execution environment's decorator is built
	// WithBatchedWrites (1: all of them; between 0 and 1: a fleet of
	// batched and unbatched consumers on one table). With WithHeartbeat
	// or the optimistic mode the decorator must refuse it when built, and
	// the environment runs without it.
	Batched float64 `json:",omitempty"`
	// ErrAfter is the chance a key's handler, on its first run, has its
	// effect and then returns a plain error (a downstream answer lost
	// after the effect); Unknown the chance it returns
	// lambdaidem.OutcomeUnknown instead, after its effect or (half of
	// them) before it; NotApplied the chance a failing key's failures
	// (FailN) declare lambdaidem.NotApplied.
	ErrAfter   float64 `json:",omitempty"`
	Unknown    float64 `json:",omitempty"`
	NotApplied float64 `json:",omitempty"`
	// LostAnswer is, for the test kit's explorer, the chance that an
	// effect a user's fake records (lambdaidemtest.Effect) has its answer
	// lost: the effect happened, the fake returns an error.
	LostAnswer float64 `json:",omitempty"`
	// Keyed sends a handler's own effect (not a completion write) to a
	// downstream system that recognises a repeat by lambdaidem.EffectKey,
	// as an email API does by Idempotency-Key or the next queue's
	// consumer by its key: it applies the effect once per effect key.
	Keyed bool `json:",omitempty"`

	// ReqRepeat is the chance a request is sent again later (within a
	// minute) with its payload, ReqConflict the chance a request carries
	// another payload (amount) than its key's others: every answer a
	// caller gets is held to the completions of its own payload and to
	// their result retention (which the same draw may make seconds).
	ReqRepeat   float64 `json:",omitempty"`
	ReqConflict float64 `json:",omitempty"`

	// SharedGroups is the chance a FIFO message goes to a message group
	// drawn at random instead of its key's own: one key in several
	// groups, as a FIFO queue allows, so groups running side by side ask
	// for it at once (and a batched claim names it twice). Twice is the
	// chance a message is sent twice at one moment (two messages, one
	// body), so one batch holds its key twice. LargeBody is the chance a
	// key's bodies are padded close to SQS's size limit (MaxMessageSize).
	SharedGroups float64 `json:",omitempty"`
	Twice        float64 `json:",omitempty"`
	LargeBody    float64 `json:",omitempty"`

	// REST sends the httpidem requests through the REST API (payload
	// 1.0) instead of the HTTP API; AuthCaller tells callers by the
	// authorizer identity the requests carry (httpidem's default caller
	// readers) instead of a header; HTTPOptions sets httpidem's other
	// options (problem type, Retry-After, write-refused status, a short
	// key length limit); KeyOptional makes the key optional; Fail503 is
	// the chance a failing run answers 503 instead of an error.
	REST        bool    `json:",omitempty"`
	AuthCaller  bool    `json:",omitempty"`
	HTTPOptions bool    `json:",omitempty"`
	KeyOptional bool    `json:",omitempty"`
	Fail503     float64 `json:",omitempty"`
	// BadKeys is the chance a request has no key of its own (see
	// request.Bad); WrapKey is Wrap's key: "" a key function of the
	// input, "field" WithKeyJSONField, "hash" Wrap's default.
	BadKeys float64 `json:",omitempty"`
	WrapKey string  `json:",omitempty"`
	// KeyForms writes each key in its bodies in one of the forms JSON
	// allows (plain, a character escaped) and makes each malformed body
	// malformed in one of several ways (see malformed).
	KeyForms bool `json:",omitempty"`
	// Panics is the chance a key's handler panics on its first run (a
	// quick key that fails nothing else), or a failing key's failures ask
	// to be retried later (RetryAfter). Logs turns the decorator's logging
	// on, into a handler that reads every line and keeps nothing.
	Panics float64 `json:",omitempty"`
	Logs   bool    `json:",omitempty"`
	// CacheSize bounds WithCache (0: 1000): a small one evicts.
	CacheSize int `json:",omitempty"`
	// Inspect is how many times an operator reads the table while the
	// function runs (list and count, as the CLI does).
	Inspect int `json:",omitempty"`
}

// Known names the checks and draws that reach bugs whose fixes have not
// landed yet: each is off unless named (-sim.known=all turns every one
// on), so that the exploration stays green while the fix is under way,
// and on for the mutant rows that need it. None is open now.
var Known = []string{}

// knob reports whether the known-bug knob name is on.
func (c Config) knob(name string) bool { return slices.Contains(c.Known, name) }

// Filters are the words a Draw filter (SIM_CONFIG) may hold, each with
// what it forces.
var Filters = []struct{ Name, Forces string }{
	{"fifo", "a FIFO queue"},
	{"ordered", "a FIFO queue with one or two message groups, full batches and failing or poison messages in them"},
	{"tx", "effects committed with the completion"},
	{"cache", "WithCache"},
	{"heartbeat", "WithHeartbeat"},
	{"amo", "WithAtMostOnce"},
	{"failany", "WithFailBatchOnAnyFailure"},
	{"redrive", "operator redrive runs"},
	{"forget", "busy operators: more forgets and releases, often forced on running handlers, and slow handlers"},
	{"force", "forget, with most operator actions forced and aimed at running handlers (with a heartbeat, half the time)"},
	{"conflict", "messages reusing a key with another body, poison on their first run, and a sink"},
	{"failing", "handlers that fail their first runs"},
	{"poison", "poison messages and a dead-letter sink"},
	{"faults", "store faults"},
	{"nofaults", "no store faults, kills or failed dead-letter sends"},
	{"late", "store requests held in the network, landing after their retries"},
	{"marks", "final dead-letter marks failing (the store gone between the send and the mark)"},
	{"wrap", "Wrap or httpidem request streams"},
	{"wait", "request streams that wait for a run in progress (WithWaitForCompletion), with requests sent twice at once and runs that fail after a slow part"},
	{"http", "httpidem request streams"},
	{"callers", "httpidem with several callers, one named anonymous, and anonymous requests"},
	{"keyfield", "WithKeyJSONField"},
	{"keyattr", "WithKeyAttribute"},
	{"keyid", "WithKeyMessageID"},
	{"hashfields", "WithHashJSONFields"},
	{"unfinished", "a short WithUnfinishedRetention"},
	{"noallfailed", "WithAllFailedError(false)"},
	{"observe", "an observer on every decorator (the Observer contract checked)"},
	{"optimistic", "effects committed with the completion, by decorators in the optimistic mode (WithOptimisticCommit) or, half the time, a mixed fleet of optimistic and lease-mode ones"},
	{"batched", "batched claims and completions (WithBatchedWrites) on every decorator or, half the time, a fleet of batched and unbatched ones"},
	{"declared", "handlers that return an error after their effect, declare their outcome unknown (OutcomeUnknown) or their failures not applied (NotApplied)"},
	{"keyed", "handlers whose own effect goes to a downstream system that recognises a repeat by lambdaidem.EffectKey, with crashes and handlers that fail after their effect"},
	{"resolve", "WithAtMostOnce with crashes, slow handlers and producer duplicates, so that outcomes are unknown; operators who resolve them (applied, not applied, abandoned) and redrive, sometimes sending outcome_unknown copies back by name"},
	{"groups", "a FIFO queue with keys shared across message groups and messages sent twice at once, so a batch holds a key twice in groups that run side by side (half the time with batched writes)"},
	{"twice", "messages sent twice at the same moment, so one batch holds their key twice"},
	{"large", "bodies close to SQS's 256 KiB limit, whose dead-letter copies fit only with their error text cut, or not at all"},
	{"liveness", "WithHeartbeat keeping a lease shorter than the work: slow handlers that honour their context, transient store errors"},
	{"healthy", "a world without faults, kills, operators' forgets and releases, redrive policy or refused effects, and handlers that fail their first runs: what can succeed must"},
	{"keyforms", "keys written in every form JSON allows, and bodies malformed in every way (cut short, the key field twice, a lone surrogate, data after the object, an object for a key)"},
	{"panics", "handlers that panic on their first run, and failures that ask to be retried later (RetryAfter)"},
	{"rest", "httpidem request streams through the REST API, callers told by the authorizer identity the requests carry"},
	{"badkeys", "Wrap or httpidem requests with no key of their own: an Idempotency-Key missing or malformed, an empty key, a key function that panics or fails, an input that is not valid UTF-8"},
	{"replays", "Wrap or httpidem requests sent again later, others under one key with another payload, slow runs, and half the time a result retention (WithResultRetention) of seconds"},
}

// CheckFilter reports a word of filter that Draw does not know.
func CheckFilter(filter string) error {
	for _, w := range strings.Split(filter, ",") {
		if w != "" && !slices.ContainsFunc(Filters, func(f struct{ Name, Forces string }) bool { return f.Name == w }) {
			return fmt.Errorf("sim: unknown config word %q", w)
		}
	}
	return nil
}

// Draw returns a scenario configuration for seed, with the known-bug
// knobs known turned on (see Known). filter, when not empty, forces
// options: a comma list of the words of Filters.
func Draw(seed uint64, known []string, filter string) Config {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	words := strings.Split(filter, ",")
	want := func(name string) bool { return slices.Contains(words, name) }
	p := func(x float64) bool { return r.Float64() < x }
	dur := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(r.Int64N(int64(hi-lo)+1)) }
	frac := func(hi float64) float64 {
		if p(0.5) {
			return 0
		}
		return r.Float64() * hi
	}
	c := Config{
		Messages:    1 + r.IntN(40),
		BatchSize:   1 + r.IntN(10),
		Pollers:     1 + r.IntN(4),
		Timeout:     dur(5*time.Second, 60*time.Second),
		MaxAttempts: 1 + r.IntN(5),
		Concurrency: 1 + r.IntN(4),
		Grace:       dur(0, 3*time.Second),
		Margin:      dur(500*time.Millisecond, 3*time.Second),
		SendOver:    dur(0, 2*time.Minute),
		FIFO:        p(0.25) || want("fifo"),
		Tx:          p(0.4) || want("tx"),
		AtMostOnce:  p(0.15) || want("amo"),
		FailOnAny:   p(0.15) || want("failany"),
		Isolate:     p(0.7),
		Backoff:     p(0.3),
		Visibility2: p(0.6),
		Sink:        p(0.85),
		ProducerDup: frac(0.3),
		SQSDup:      frac(0.1),
		Conflict:    frac(0.1),
		Poison:      frac(0.1),
		FailN:       frac(0.3),
		Slow:        frac(0.3),
		Honour:      r.Float64(),
		EffectFirst: frac(0.5),
		SlowPoison:  p(0.5),
		Kill:        frac(0.05),
		SinkFail:    frac(0.2),
	}
	c.Keys = max(1, c.Messages-r.IntN(c.Messages))
	c.Groups = 1 + r.IntN(4)
	c.Visibility = c.Timeout + dur(0, 60*time.Second)
	if p(0.3) {
		c.MaxReceive = 2 + r.IntN(8)
	}
	if p(0.3) {
		c.Lease = dur(c.Margin+time.Second, c.Timeout)
		if p(0.1) {
			// A lease no longer than the margin: the decorator must
			// refuse it when built, or handlers start with no time.
			c.Lease = dur(c.Margin/2, c.Margin)
		}
	}
	if p(0.3) || want("cache") {
		c.Cache = dur(time.Second, 10*time.Minute)
	}
	if p(0.2) || want("heartbeat") {
		// An interval must leave room to extend before the lease (less
		// the margin) runs out; the decorator refuses others when built.
		lease := c.Timeout
		if c.Lease > 0 {
			lease = min(lease, c.Lease)
		}
		if room := lease - c.Margin; room > 200*time.Millisecond {
			c.Heartbeat = dur(100*time.Millisecond, room-100*time.Millisecond)
		}
	}
	if p(0.3) {
		c.Retention = dur(time.Minute, 30*time.Minute)
		if p(0.5) {
			c.ResultRet = dur(10*time.Second, c.Retention)
		}
	}
	if p(0.6) && !want("nofaults") || want("faults") {
		c.Store = StoreFaults{
			ErrBefore: frac(0.1),
			LostAfter: frac(0.1),
			Throttle:  frac(0.05),
			Latency:   dur(0, 300*time.Millisecond),
			Late:      frac(0.02),
			LateBy:    dur(0, 90*time.Second),
		}
		if p(0.2) {
			c.Store.OutageFrom = dur(0, 2*time.Minute)
			c.Store.OutageFor = dur(time.Second, 2*time.Minute)
		}
	}
	if p(0.3) || want("redrive") {
		c.Redrive = 1 + r.IntN(3)
		c.RedriveDelFail = frac(0.3)
		c.RedriveSendFail = frac(0.3)
		if p(0.5) {
			c.MaxRedrives = 1 + r.IntN(2)
		}
	}
	c.BadKey = frac(0.05)
	if p(0.2) || want("forget") {
		c.Forget = 1 + r.IntN(3)
		c.ForceOps = frac(0.6)
		c.AbandonCopy = frac(0.6)
		if want("forget") {
			// Operators busy on running keys: more of them, often forced,
			// and handlers slow enough to be caught running.
			c.Forget += 2
			c.ForceOps = 0.3 + r.Float64()*0.5
			c.Slow = max(c.Slow, 0.3)
		}
	}
	if want("conflict") {
		// Payloads that never run under their key: conflicting bodies,
		// keys poison on their first run only (so a later message of
		// another payload completes them), and a sink to hold the copies.
		c.Conflict = 0.2 + r.Float64()*0.3
		c.Poison = 0.2 + r.Float64()*0.3
		c.SlowPoison, c.Sink = true, true
	}
	if c.Tx {
		c.TxRefuse = frac(0.2)
	}
	if p(0.5) || want("wrap") || want("wait") {
		c.Requests = 1 + r.IntN(20)
		c.HTTP = p(0.5)
		c.ClientTimeout = dur(time.Second, c.Timeout+10*time.Second)
		c.BigInt = p(0.5)
		c.LargeResult = p(0.3)
	}
	// Drawn after the rest, so that a seed's older fields stay as they
	// were.
	switch x := r.Float64(); {
	case x < 0.12:
		c.KeyBy = "field"
	case x < 0.24:
		c.KeyBy = "attr"
	case x < 0.34:
		c.KeyBy = "id"
	}
	c.HashFields = p(0.08)
	c.NoAllFailedError = p(0.2)
	if p(0.1) {
		c.UnfinishedRet = dur(time.Minute, 2*time.Hour)
	}
	if c.HTTP && p(0.4) {
		c.Callers = 2 + r.IntN(2)
	}
	if c.Store != (StoreFaults{}) && p(0.3) {
		c.Store.MarkErr = 0.5 + 0.5*r.Float64()
	}
	c.Observe = p(0.5) || want("observe")
	c.Known = known

	switch {
	case want("keyfield"):
		c.KeyBy = "field"
	case want("keyattr"):
		c.KeyBy = "attr"
	case want("keyid"):
		c.KeyBy = "id"
	}
	if want("hashfields") {
		c.HashFields = true
	}
	if want("noallfailed") {
		c.NoAllFailedError = true
	}
	if want("unfinished") && c.UnfinishedRet == 0 {
		c.UnfinishedRet = dur(time.Minute, 2*time.Hour)
	}
	if want("conflict") {
		// Few keys, so conflicting bodies meet.
		c.Keys = max(1, min(c.Keys, c.Messages/3))
	}
	if want("failing") {
		c.FailN = 0.3 + 0.3*r.Float64()
	}
	if want("poison") {
		c.Poison, c.Sink = 0.2+0.3*r.Float64(), true
	}
	if want("ordered") {
		c.FIFO, c.Groups, c.BatchSize = true, 1+r.IntN(2), 5+r.IntN(6)
		c.Messages = max(c.Messages, 20)
		c.Keys = max(c.Keys, c.Messages/2)
		c.FailN = max(c.FailN, 0.2)
		c.Poison = max(c.Poison, 0.1)
	}
	if want("force") {
		c.Forget = max(c.Forget, 3+r.IntN(3))
		c.ForceOps = 0.6 + 0.4*r.Float64()
		if c.Heartbeat == 0 && p(0.5) {
			lease := c.Timeout
			if c.Lease > 0 {
				lease = min(lease, c.Lease)
			}
			if room := lease - c.Margin; room > 200*time.Millisecond {
				c.Heartbeat = dur(100*time.Millisecond, room-100*time.Millisecond)
			}
		}
		c.Slow = max(c.Slow, 0.3)
	}
	if (want("http") || want("callers")) && c.Requests == 0 {
		c.Requests = 1 + r.IntN(20)
		c.ClientTimeout = dur(time.Second, c.Timeout+10*time.Second)
	}
	if want("http") || want("callers") {
		c.HTTP = true
	}
	if want("callers") && c.Callers == 0 {
		c.Callers = 2 + r.IntN(2)
	}
	if want("marks") {
		c.Store.MarkErr = 0.6 + 0.4*r.Float64()
		c.Poison, c.Sink = max(c.Poison, 0.2), true
	}
	if want("nofaults") {
		c.Kill, c.SinkFail = 0, 0
	}
	if want("late") && c.Store != (StoreFaults{}) {
		// Many requests held in the network for a while, landing after
		// their retries; one attempt, so a refusal dead-letters at once.
		c.Store.Late = 0.2 + frac(0.3)
		c.Store.LateBy = dur(100*time.Millisecond, 5*time.Second)
		c.MaxAttempts, c.Sink = 1, true
	}
	if c.Requests > 0 {
		// Waiting requests draw from a stream of their own, so every
		// other setting of a seed stays what it was before they existed.
		rw := rand.New(rand.NewPCG(seed, 0x3a17))
		if rw.Float64() < 0.5 || want("wait") {
			c.Wait = time.Duration(rw.Int64N(int64(c.Timeout+30*time.Second))) + time.Second
			c.Twins = rw.Float64() * 0.6
			c.LateFail = rw.Float64() * 0.4
			if want("wait") {
				c.Twins, c.LateFail = 0.3+c.Twins, 0.2+c.LateFail
				if c.Heartbeat > 0 && c.Store.Late > 0 {
					// Heartbeat extensions held in the network for longer
					// than a lease: they land after later ones, while
					// waiters watch the lease's end.
					lease := c.Timeout
					if c.Lease > 0 {
						lease = min(lease, c.Lease)
					}
					c.Store.LateBy = max(c.Store.LateBy, lease+c.Grace+time.Duration(rw.Int64N(int64(10*time.Second))))
				}
			}
		}
	}
	// The optimistic mode draws from a stream of its own too.
	ro := rand.New(rand.NewPCG(seed, 0x0b71))
	if ro.Float64() < 0.25 || want("optimistic") {
		c.Optimistic = 1
		if ro.Float64() < 0.5 {
			c.Optimistic = 0.2 + 0.6*ro.Float64()
		}
		if want("optimistic") {
			c.Tx = true
			if ro.Float64() < 0.8 {
				// Mostly without what the mode refuses, so that it runs.
				c.AtMostOnce, c.Heartbeat = false, 0
			}
		}
	}
	// So do batched writes.
	rb := rand.New(rand.NewPCG(seed, 0xba7c))
	if rb.Float64() < 0.25 || want("batched") {
		c.Batched = 1
		if rb.Float64() < 0.5 {
			c.Batched = 0.2 + 0.6*rb.Float64()
		}
		if want("batched") {
			c.BatchSize = max(c.BatchSize, 4)
			c.Concurrency = max(c.Concurrency, 2)
			if rb.Float64() < 0.8 {
				// Mostly without what batching refuses, so that it runs.
				c.Heartbeat, c.Optimistic = 0, 0
			}
		}
	}
	// So do the operators who decide on unknown outcomes.
	rr := rand.New(rand.NewPCG(seed, 0x7e50))
	if rr.Float64() < 0.2 || want("resolve") {
		c.Resolve = 1 + rr.IntN(3)
		c.Abandon = 0.1 + 0.4*rr.Float64()
		if rr.Float64() < 0.4 {
			c.RedriveUncertain = 0.2 + 0.6*rr.Float64()
		}
		if want("resolve") {
			// Unknown outcomes: at most once, with crashes and handlers
			// that outlive their lease, plain effects, duplicates that
			// find the decided keys, and redrives beside the decisions.
			c.AtMostOnce, c.Sink, c.Tx, c.Optimistic = true, true, false, 0
			c.Kill = max(c.Kill, 0.01+0.04*rr.Float64())
			c.Slow, c.EffectFirst = max(c.Slow, 0.3), max(c.EffectFirst, 0.5)
			c.ProducerDup = max(c.ProducerDup, 0.2+0.3*rr.Float64())
			c.Resolve += 2
			c.Redrive = max(c.Redrive, 1+rr.IntN(3))
			if rr.Float64() < 0.7 {
				c.RedriveUncertain = 0.3 + 0.6*rr.Float64()
			}
		}
	}
	// And what handlers declare of their failures, and what the kit's
	// world does to effects' answers. With WithAtMostOnce an error after
	// the effect is what the mode must never retry.
	rd := rand.New(rand.NewPCG(seed, 0xdec1))
	if rd.Float64() < 0.3 || want("declared") || c.AtMostOnce && rd.Float64() < 0.5 {
		c.ErrAfter = rd.Float64() * 0.3
		c.Unknown = rd.Float64() * 0.2
		c.NotApplied = rd.Float64()
		if want("declared") || c.AtMostOnce && want("amo") {
			c.ErrAfter = 0.1 + rd.Float64()*0.3
			c.Unknown = 0.1 + rd.Float64()*0.3
			c.FailN = max(c.FailN, 0.1)
		}
	}
	if rd.Float64() < 0.3 {
		c.LostAnswer = rd.Float64() * 0.3
	}
	// And a downstream keyed by the effect key, on a stream of its own.
	rk := rand.New(rand.NewPCG(seed, 0x6b65))
	if rk.Float64() < 0.25 || want("keyed") {
		c.Keyed = true
		if want("keyed") {
			// Repeats within a generation: crashes after the effect,
			// errors after it at least once, redeliveries, takeovers.
			c.Tx, c.Optimistic = false, 0
			c.Kill = max(c.Kill, 0.01+0.04*rk.Float64())
			c.ErrAfter = max(c.ErrAfter, 0.1+0.3*rk.Float64())
			c.ProducerDup = max(c.ProducerDup, 0.2)
			c.Slow, c.EffectFirst = max(c.Slow, 0.2), max(c.EffectFirst, 0.5)
		}
	}
	// Every answer checked: requests sent again later with their
	// payload, others under one key with another payload, and a result
	// retention of seconds. A stream of its own too.
	ra := rand.New(rand.NewPCG(seed, 0xa45e))
	if ra.Float64() < 0.3 || want("replays") {
		if want("replays") {
			if c.Requests == 0 {
				c.Requests = 1 + ra.IntN(20)
				c.ClientTimeout = time.Second + time.Duration(ra.Int64N(int64(c.Timeout+9*time.Second)))
			}
			c.Slow = max(c.Slow, 0.3)
		}
		if c.Requests > 0 {
			c.ReqRepeat = 0.2 + 0.5*ra.Float64()
			c.ReqConflict = 0.4 * ra.Float64()
			if ra.Float64() < 0.5 {
				c.ResultRet = 100*time.Millisecond + time.Duration(ra.Int64N(int64(3*time.Second)))
			}
		}
	}
	// Inputs a queue may send that the draws above never make: a key in
	// several FIFO groups, a key twice at once, bodies near the size
	// limit. A stream of their own.
	rq := rand.New(rand.NewPCG(seed, 0x9e5d))
	if want("groups") {
		c.FIFO, c.Groups = true, max(c.Groups, 2)
		c.BatchSize, c.Concurrency = max(c.BatchSize, 4), max(c.Concurrency, 2)
		if rq.Float64() < 0.5 {
			// Batched claims then name one key twice in one request.
			c.Batched, c.Heartbeat, c.Optimistic = 1, 0, 0
		}
	}
	twice := 0.3
	if c.FIFO && (rq.Float64() < 0.5 || want("groups")) {
		c.SharedGroups = 0.2 + 0.6*rq.Float64()
		c.Groups = max(c.Groups, 2)
		// A key twice at once, in two groups that run side by side:
		// with batched writes, in one claim.
		twice = 0.7
		if c.Batched == 0 && rq.Float64() < 0.4 {
			c.Batched = 1
		}
		if c.Batched > 0 {
			c.Concurrency = max(c.Concurrency, 2)
		}
	}
	if rq.Float64() < twice || want("groups") || want("twice") {
		c.Twice = 0.1 + 0.4*rq.Float64()
	}
	if rq.Float64() < 0.08 || want("large") {
		c.LargeBody = 0.1 + 0.4*rq.Float64()
		if want("large") {
			c.Poison, c.Sink = max(c.Poison, 0.2), true
		}
	}
	// httpidem's APIs, callers and options, Wrap's keys, and requests
	// without a key of their own. A stream of their own.
	rh := rand.New(rand.NewPCG(seed, 0x4770))
	if (want("rest") || want("badkeys")) && c.Requests == 0 {
		c.Requests = 1 + rh.IntN(20)
		c.ClientTimeout = time.Second + time.Duration(rh.Int64N(int64(c.Timeout+9*time.Second)))
	}
	if want("rest") {
		c.HTTP = true
	}
	if c.Requests > 0 {
		if c.HTTP {
			c.REST = rh.Float64() < 0.4 || want("rest")
			c.AuthCaller = rh.Float64() < 0.4 || want("rest")
			c.HTTPOptions = rh.Float64() < 0.3
			c.KeyOptional = rh.Float64() < 0.3
			if rh.Float64() < 0.3 {
				c.Fail503 = rh.Float64()
			}
		} else {
			switch x := rh.Float64(); {
			case x < 0.25:
				c.WrapKey = "field"
			case x < 0.5:
				c.WrapKey = "hash"
			}
		}
		if rh.Float64() < 0.25 || want("badkeys") {
			c.BadKeys = 0.05 + 0.25*rh.Float64()
		}
	}
	if rh.Float64() < 0.3 || want("forget") {
		c.Inspect = 1 + rh.IntN(3)
	}
	c.KeyForms = rh.Float64() < 0.4 || want("keyforms")
	if rh.Float64() < 0.25 || want("panics") {
		c.Panics = 0.05 + 0.3*rh.Float64()
	}
	c.Logs = rh.Float64() < 0.25
	if c.Cache > 0 && rh.Float64() < 0.3 {
		c.CacheSize = 1 + rh.IntN(4)
	}
	// Liveness: a heartbeat keeping a lease shorter than the work, under
	// transient store errors; or a healthy world, where whatever can
	// succeed must. A stream of their own.
	rl := rand.New(rand.NewPCG(seed, 0x11fe))
	ldur := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rl.Int64N(int64(hi-lo)+1)) }
	if want("liveness") {
		c.Timeout = max(c.Timeout, 20*time.Second)
		c.Visibility = max(c.Visibility, c.Timeout)
		c.Lease = ldur(c.Margin+2*time.Second, c.Margin+c.Timeout/3)
		room := c.Lease - c.Margin
		c.Heartbeat = ldur(100*time.Millisecond, room/2)
		c.Slow, c.Honour, c.SlowPoison = 0.4+0.4*rl.Float64(), 0.8+0.2*rl.Float64(), false
		c.Store = StoreFaults{ErrBefore: 0.05 + 0.15*rl.Float64(), Throttle: 0.05 * rl.Float64(), Latency: ldur(0, 200*time.Millisecond)}
		c.Batched, c.Optimistic = 0, 0
	}
	if want("healthy") {
		c.Margin = max(c.Margin, ldur(1500*time.Millisecond, 3*time.Second))
		// What the margin bounds stays as it was drawn, when it can.
		if c.Lease > 0 && c.Lease <= c.Margin+time.Second {
			c.Lease = 0
		}
		lease := c.Timeout
		if c.Lease > 0 {
			lease = min(lease, c.Lease)
		}
		if c.Heartbeat >= lease-c.Margin-100*time.Millisecond {
			c.Heartbeat = 0
		}
		c.Store = StoreFaults{Latency: ldur(0, (c.Margin-time.Second)/4)}
		c.Kill, c.Forget, c.MaxReceive, c.TxRefuse, c.AtMostOnce, c.SlowPoison, c.Resolve = 0, 0, 0, 0, false, false, 0
		c.FailN, c.Honour = 0.3+0.4*rl.Float64(), 1
	}
	return c
}

// String is the configuration's JSON, for replaying a shrunk scenario.
func (c Config) String() string {
	b, _ := json.Marshal(c)
	return string(b)
}

// ParseConfig reads a Config printed by String.
func ParseConfig(s string) (Config, error) {
	var c Config
	if err := json.Unmarshal([]byte(s), &c); err != nil {
		return c, fmt.Errorf("sim: bad scenario: %w", err)
	}
	return c, nil
}
