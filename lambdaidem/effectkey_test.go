package lambdaidem_test

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// uuidV8 is the form EffectKeyOf promises: an RFC 9562 UUID, version 8.
var uuidV8 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// fifoDedupSafe reports whether s is a valid SQS FIFO
// MessageDeduplicationId: 1 to 128 characters, letters, digits and
// punctuation (!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~).
func fifoDedupSafe(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for _, c := range s {
		if !(c >= '!' && c <= '~') {
			return false
		}
	}
	return true
}

func TestEffectKeyOfForm(t *testing.T) {
	t.Parallel()
	k := lambdaidem.EffectKeyOf("orders", "o-1", "gen-1")
	if !uuidV8.MatchString(k) || !fifoDedupSafe(k) {
		t.Fatalf("EffectKeyOf = %q: not a version 8 UUID usable as a FIFO deduplication ID and a header value", k)
	}
	if again := lambdaidem.EffectKeyOf("orders", "o-1", "gen-1"); again != k {
		t.Fatalf("EffectKeyOf is not a function of its parts: %q, then %q", k, again)
	}
	seen := map[string][3]string{}
	for _, parts := range [][3]string{
		{"orders", "o-1", "gen-1"},
		{"orders", "o-1", "gen-2"},
		{"orders", "o-2", "gen-1"},
		{"refunds", "o-1", "gen-1"},
		// The same bytes split otherwise are other records.
		{"orders", "o-1g", "en-1"},
		{"order", "so-1", "gen-1"},
		{"", "", ""},
	} {
		k := lambdaidem.EffectKeyOf(parts[0], parts[1], parts[2])
		if prev, dup := seen[k]; dup {
			t.Fatalf("%v and %v share the effect key %s", prev, parts, k)
		}
		seen[k] = parts
	}
}

// effectKeys is a handler that notes the effect key of every run.
type effectKeys struct {
	keys []string
	oks  []bool
	fail int // the first runs that fail (NotApplied)
}

func (e *effectKeys) handle(ctx context.Context, _ events.SQSMessage) error {
	k, ok := lambdaidem.EffectKey(ctx)
	e.keys, e.oks = append(e.keys, k), append(e.oks, ok)
	if len(e.keys) <= e.fail {
		return lambdaidem.NotApplied(errors.New("not yet"))
	}
	return nil
}

func (e *effectKeys) last(t *testing.T) string {
	t.Helper()
	if len(e.keys) == 0 || !e.oks[len(e.oks)-1] {
		t.Fatalf("no effect key in the last run (runs %d, oks %v)", len(e.keys), e.oks)
	}
	return e.keys[len(e.keys)-1]
}

// The effect key names the record's generation: it stays across a retry
// after a failure, a takeover of an abandoned lease and a redrive's reset,
// and changes when the record is forgotten or expires.
func TestEffectKeyAcrossTheRecordsLife(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := &effectKeys{fail: 1}
	opts := b.opts(lambdaidem.WithLease(time.Minute), lambdaidem.WithDeadLetterSink(b.sink), lambdaidem.WithRetention(time.Hour))
	h := lambdaidem.SQS(b.store, e.handle, opts...)

	handled(t, h, batch(msg("m1", "x")))
	first := e.last(t)
	r := b.record(t, "m1")
	if want := lambdaidem.EffectKeyOf(ns, "m1", r.Fence.Generation); first != want {
		t.Fatalf("EffectKey = %s, want EffectKeyOf(namespace, key, generation) = %s", first, want)
	}
	handled(t, h, batch(redelivered(msg("m1", "x"), 2)))
	if got := e.last(t); got != first {
		t.Fatalf("after a retry: %s, want %s", got, first)
	}
	if st := b.status("m1"); st != lambdaidem.StatusCompleted {
		t.Fatalf("status %s", st)
	}

	// A takeover: m2's first holder dies mid-handler.
	sim := crashSim{b}
	var crashedKey string
	crashing := lambdaidem.SQS(b.store, func(ctx context.Context, _ events.SQSMessage) error {
		crashedKey, _ = lambdaidem.EffectKey(ctx)
		sim.crash()
		return nil
	}, opts...)
	handled(t, crashing, batch(msg("m2", "y")))
	sim.revive()
	b.clock.Advance(2 * time.Minute)
	handled(t, h, batch(redelivered(msg("m2", "y"), 2)))
	if got := e.last(t); got != crashedKey || crashedKey == "" {
		t.Fatalf("after a takeover: %s, want the abandoned attempt's %s", got, crashedKey)
	}

	// A redrive: m3 is poison, then reset and run again.
	poison := lambdaidem.SQS(b.store, func(ctx context.Context, _ events.SQSMessage) error {
		crashedKey, _ = lambdaidem.EffectKey(ctx)
		return lambdaidem.Poison(errors.New("bad"))
	}, opts...)
	handled(t, poison, batch(msg("m3", "z")))
	dl := b.record(t, "m3")
	if _, err := b.store.ResetDeadLetter(t.Context(), idemstore.ResetRequest{Namespace: ns, Key: "m3", DeadLetterMessageID: dl.DeadLetterMessageID, Now: b.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	handled(t, h, batch(msg("m3", "z")))
	if got := e.last(t); got != crashedKey || crashedKey == "" {
		t.Fatalf("after a redrive: %s, want the dead-lettered attempt's %s", got, crashedKey)
	}

	// A forget: the next message of the key is new work, downstream too.
	if _, err := b.store.Forget(t.Context(), idemstore.ForgetRequest{Namespace: ns, Key: "m1", Now: b.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	handled(t, h, batch(msg("m1", "x")))
	afterForget := e.last(t)
	if afterForget == first {
		t.Fatalf("after a forget: the same effect key %s", first)
	}

	// An expiry after the retention: a new generation again.
	b.clock.Advance(2 * time.Hour)
	handled(t, h, batch(msg("m1", "x")))
	if got := e.last(t); got == afterForget || got == first {
		t.Fatalf("after the record expired: %s, an earlier generation's key", got)
	}
}

// A first delivery of the optimistic mode has no generation yet: no
// effect key. Its redelivery, claimed under a lease, has one.
func TestEffectKeyOptimisticFirstDelivery(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := &effectKeys{fail: 1}
	h := lambdaidem.SQS(b.store, e.handle, b.opts(lambdaidem.WithOptimisticCommit())...)
	handled(t, h, batch(msg("m1", "x")))
	if e.keys[0] != "" || e.oks[0] {
		t.Fatalf("optimistic first delivery: EffectKey = %q, %v; want \"\", false", e.keys[0], e.oks[0])
	}
	handled(t, h, batch(redelivered(msg("m1", "x"), 2)))
	r := b.record(t, "m1")
	if got := e.last(t); got != lambdaidem.EffectKeyOf(ns, "m1", r.Fence.Generation) {
		t.Fatalf("redelivery: %s, want the record's generation's key", got)
	}
}

func TestEffectKeyWrapAndOutside(t *testing.T) {
	t.Parallel()
	if k, ok := lambdaidem.EffectKey(context.Background()); ok || k != "" {
		t.Fatalf("outside a handler: %q, %v", k, ok)
	}
	b := setup(t)
	f := lambdaidem.Wrap(b.store, func(ctx context.Context, o order) (string, error) {
		k, ok := lambdaidem.EffectKey(ctx)
		if !ok {
			return "", errors.New("no effect key")
		}
		return k, nil
	}, b.wrapOpts(lambdaidem.WithKeyJSONField("id"))...)
	k, err := f(t.Context(), order{ID: "o1"})
	if err != nil {
		t.Fatal(err)
	}
	if r := b.record(t, "o1"); k != lambdaidem.EffectKeyOf(ns, "o1", r.Fence.Generation) {
		t.Fatalf("Wrap's effect key %s is not the record's", k)
	}
}
