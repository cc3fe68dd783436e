package compat

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// feature is one row of the matrix.
type feature struct {
	name string
	// enable is how a handler turns the feature on.
	enable string
	// sqsOnly features have no meaning for Wrap and httpidem: their
	// option is refused there with ErrUnsupportedOption. wrapOnly
	// features are refused by the SQS handler.
	sqsOnly, wrapOnly bool
	// option is the option refused where the feature is not supported.
	option func() lambdaidem.Option
	// run runs the feature through one entry point on one store.
	run func(t *testing.T, c *cellEnv)
	// kit says how the test kit covers it; sim names the simulator's
	// knobs (fields of its Config) that draw it.
	kit, sim string
}

// cellEnv is what a supported cell runs with.
type cellEnv struct {
	*env
	entry entry
	store storeKind
	feat  feature
	ns    string
}

// handler builds the entry's handler over the cell's store.
func (c *cellEnv) handler(t *testing.T, h work, opts ...lambdaidem.Option) invoke {
	return c.entry.build(t, c.env.store, c.ns, h, opts...)
}

// want fails the test unless the call ended as v, and ran as said.
func want(t *testing.T, what string, got call, v verdict, ran bool) {
	t.Helper()
	if got.v != v || got.ran != ran {
		t.Fatalf("%s: %s (function ran: %v), want %s (ran: %v); %s", what, got.v, got.ran, v, ran, got.detail)
	}
}

func ok(context.Context, string, string) (string, error) { return "done", nil }

// foreignWrite is a completion write no store commits.
type foreignWrite struct{}

var features = []feature{
	{
		name:   "completion writes",
		enable: "`WithCompletionWrites[W]()`, then `AddCompletionWrite` in the handler",
		run:    runCompletionWrites,
		kit:    "runs them on its in-memory tables",
		sim:    "Tx, TxRefuse",
	},
	{
		name:   "at-most-once",
		enable: "`WithAtMostOnce()`",
		run:    runAtMostOnce,
		kit:    "runs it",
		sim:    "AtMostOnce",
	},
	{
		name:   "heartbeat",
		enable: "`WithHeartbeat(interval)`",
		run:    runHeartbeat,
		kit:    "runs it",
		sim:    "Heartbeat",
	},
	{
		name:    "cache",
		enable:  "`WithCache(size, ttl)`",
		sqsOnly: true,
		option:  func() lambdaidem.Option { return lambdaidem.WithCache(10, time.Minute) },
		run:     runCache,
		kit:     "runs it",
		sim:     "Cache",
	},
	{
		name:    "FIFO",
		enable:  "a FIFO queue, `WithKeyDeduplicationID(perGroup)`",
		sqsOnly: true,
		option:  func() lambdaidem.Option { return lambdaidem.WithKeyDeduplicationID(false) },
		run:     runFIFO,
		kit:     "runs it (`Group`)",
		sim:     "FIFO, Groups",
	},
	{
		name:    "redrive reset",
		enable:  "`WithDeadLetterSink(sink)`, then `sqsqueue.Redrive` (the store's `ResetDeadLetter`)",
		sqsOnly: true,
		option:  func() lambdaidem.Option { return lambdaidem.WithDeadLetterSink(&deadLetters{}) },
		run:     runRedrive,
		kit:     "runs it (`Redrive`)",
		sim:     "Redrive, MaxRedrives",
	},
	{
		name:     "large results",
		enable:   "`WithMaxResultBytes(n)`, up to the store's limit",
		wrapOnly: true,
		option:   func() lambdaidem.Option { return lambdaidem.WithMaxResultBytes(1 << 20) },
		run:      runLargeResults,
		kit:      "not applicable: the kit runs SQS handlers, which store no result",
		sim:      "LargeResult",
	},
	{
		name:    "fail-on-any",
		enable:  "`WithFailBatchOnAnyFailure()`",
		sqsOnly: true,
		option:  func() lambdaidem.Option { return lambdaidem.WithFailBatchOnAnyFailure() },
		run:     runFailOnAny,
		kit:     "runs it",
		sim:     "FailOnAny",
	},
	{
		name:   "key conflict",
		enable: "always on; `WithPayloadHash`, `WithHashJSONFields` choose what is compared",
		run:    runKeyConflict,
		kit:    "runs it",
		sim:    "Conflict",
	},
	{
		name:   "late replay",
		enable: "`WithResultRetention(d)` shorter than `WithRetention`",
		run:    runLateReplay,
		kit:    "runs it",
		sim:    "ResultRet",
	},
}

func runCompletionWrites(t *testing.T, c *cellEnv) {
	ctx := t.Context()
	// The handler inserts "fx-PAYLOAD" = KEY: a second key with the same
	// payload is refused by the insert's own condition.
	h := c.handler(t, func(ctx context.Context, key, payload string) (string, error) {
		return "done", lambdaidem.AddCompletionWrite(ctx, c.effects.insert(c.ns, "fx-"+payload, key))
	}, c.effects.declare)
	effect := func(name string) string {
		t.Helper()
		v, err := c.effects.read(ctx, c.ns, name)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	want(t, "first call", h(ctx, "k1", "a"), fresh, true)
	if v := effect("fx-a"); v != "k1" {
		t.Fatalf("effect after the first call = %q, want k1", v)
	}
	want(t, "repeat", h(ctx, "k1", "a"), replay, false)
	want(t, "a call whose write is refused by its condition", h(ctx, "k2", "a"), failed, true)
	if v := effect("fx-a"); v != "k1" {
		t.Fatalf("effect after the refused call = %q, want k1 unchanged", v)
	}
	want(t, "the refused key, with a write that applies", h(ctx, "k2", "b"), conflict, false)
	want(t, "another key", h(ctx, "k3", "b"), fresh, true)

	// A type the store does not commit is refused when built, naming the
	// store.
	err := lambdaidem.Check(func() { c.handler(t, ok, lambdaidem.WithCompletionWrites[foreignWrite]()) })
	var ce *lambdaidem.ConfigError
	if !errors.As(err, &ce) || !errors.Is(err, lambdaidem.ErrUnsupportedWrite) || ce.Store != c.store.name {
		t.Fatalf("WithCompletionWrites of a type the store does not commit: %v, want a ConfigError naming %s, ErrUnsupportedWrite", err, c.store.name)
	}
}

func runAtMostOnce(t *testing.T, c *cellEnv) {
	var runs atomic.Int32
	h := c.handler(t, func(context.Context, string, string) (string, error) {
		if runs.Add(1) == 1 {
			panic("crashed in the middle of its effect")
		}
		return "done", nil
	}, lambdaidem.WithAtMostOnce())
	first := h(t.Context(), "k", "p")
	if first.v == fresh || !first.ran {
		t.Fatalf("a panicking run: %s (ran %v), want its outcome unknown", first.v, first.ran)
	}
	second := h(t.Context(), "k", "p")
	if second.ran || second.v == fresh || runs.Load() != 1 {
		t.Fatalf("the repeat of a key whose outcome is unknown: %s (ran %v, %d runs), want it not run again; %s", second.v, second.ran, runs.Load(), second.detail)
	}
}

// extensions counts the extensions a store granted.
type extensions struct {
	lambdaidem.Store
	n atomic.Int32
}

func (e *extensions) Extend(ctx context.Context, req lambdaidem.ExtendRequest) error {
	err := e.Store.Extend(ctx, req)
	if err == nil {
		e.n.Add(1)
	}
	return err
}

func (e *extensions) Capabilities() lambdaidem.Capabilities {
	caps, _ := lambdaidem.CapabilitiesOf(e.Store)
	return caps
}

func runHeartbeat(t *testing.T, c *cellEnv) {
	counter := &extensions{Store: c.env.store}
	lease := 4 * time.Second
	h := c.entry.build(t, counter, c.ns, func(ctx context.Context, _, _ string) (string, error) {
		// Hold the key until the lease was extended twice.
		deadline := time.Now().Add(30 * time.Second)
		for counter.n.Load() < 2 {
			select {
			case <-ctx.Done():
				return "", context.Cause(ctx)
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				return "", errors.New("no two extensions within 30 s")
			}
		}
		return "done", nil
	}, lambdaidem.WithLease(lease), lambdaidem.WithHeartbeat(lease/4))
	want(t, "a run longer than the lease's first term", h(t.Context(), "k", "p"), fresh, true)
}

func runCache(t *testing.T, c *cellEnv) {
	h := c.handler(t, ok, c.feat.option())
	want(t, "first delivery", h(t.Context(), "k", "p"), fresh, true)
	want(t, "duplicate", h(t.Context(), "k", "p"), cached, false)
}

// sqsBatch builds an SQS handler for the cell's store directly, for
// features about batches.
func sqsBatch(c *cellEnv, h lambdaidem.MessageHandler, opts ...lambdaidem.Option) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	return lambdaidem.SQS(c.env.store, h, append([]lambdaidem.Option{lambdaidem.WithNamespace(c.ns), quiet}, opts...)...)
}

func record(id, body, arn string, attrs map[string]string) events.SQSMessage {
	a := map[string]string{"ApproximateReceiveCount": "1"}
	for k, v := range attrs {
		a[k] = v
	}
	return events.SQSMessage{MessageId: id, Body: body, EventSourceARN: arn, Attributes: a}
}

func runFIFO(t *testing.T, c *cellEnv) {
	const fifoARN = "arn:aws:sqs:us-east-1:123456789012:compat.fifo"
	var mu sync.Mutex
	var order []string
	failFirst := true
	h := sqsBatch(c, func(_ context.Context, m events.SQSMessage) error {
		mu.Lock()
		defer mu.Unlock()
		if m.Body == "first" && failFirst {
			failFirst = false
			return errors.New("not yet")
		}
		order = append(order, m.Body)
		return nil
	}, lambdaidem.WithKeyDeduplicationID(false))
	msg := func(id, body string) events.SQSMessage {
		return record(id, body, fifoARN, map[string]string{"MessageGroupId": "g", "MessageDeduplicationId": "d-" + id})
	}
	ev := events.SQSEvent{Records: []events.SQSMessage{msg("m1", "first"), msg("m2", "second")}}
	resp, _ := h(t.Context(), ev)
	if len(resp.BatchItemFailures) != 2 {
		t.Fatalf("a group whose first record failed: %d failures reported, want both (the second skipped)", len(resp.BatchItemFailures))
	}
	if resp, err := h(t.Context(), ev); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("the group again: %+v, %v", resp, err)
	}
	if strings.Join(order, ",") != "first,second" {
		t.Fatalf("order %v, want first,second", order)
	}
}

func runRedrive(t *testing.T, c *cellEnv) {
	sink := &deadLetters{}
	poison := true
	h := c.handler(t, func(context.Context, string, string) (string, error) {
		if poison {
			return "", lambdaidem.Poison(errors.New("cannot be processed yet"))
		}
		return "done", nil
	}, lambdaidem.WithDeadLetterSink(sink))
	want(t, "a poison message", h(t.Context(), "k", "p"), settled, true)
	resetter, isResetter := c.env.store.(lambdaidem.DeadLetterResetter)
	if !isResetter {
		t.Fatalf("the %s store cannot reset a dead-lettered record", c.store.name)
	}
	if _, err := resetter.ResetDeadLetter(t.Context(), lambdaidem.ResetRequest{Namespace: c.ns, Key: "k", DeadLetterMessageID: sink.last(), Now: time.Now()}); err != nil {
		t.Fatalf("reset: %v", err)
	}
	poison = false
	want(t, "the redriven message", h(t.Context(), "k", "p"), fresh, true)
}

func runLargeResults(t *testing.T, c *cellEnv) {
	big := strings.Repeat("x", 300<<10)
	h := c.handler(t, func(context.Context, string, string) (string, error) { return big, nil })
	first := h(t.Context(), "k", "p")
	want(t, "a 300 KiB result", first, fresh, true)
	again := h(t.Context(), "k", "p")
	want(t, "its repeat", again, replay, false)
	if again.result != first.result || !strings.Contains(again.result, big) {
		t.Fatalf("replayed %d bytes, want the %d first returned", len(again.result), len(first.result))
	}
	// Over what the store keeps: refused when built.
	if caps, declared := lambdaidem.CapabilitiesOf(c.env.store); declared && caps.MaxResultBytes > 0 {
		err := lambdaidem.Check(func() { c.handler(t, ok, lambdaidem.WithMaxResultBytes(caps.MaxResultBytes+1)) })
		var ce *lambdaidem.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, lambdaidem.ErrUnsupportedOption) || ce.Store != c.store.name {
			t.Fatalf("WithMaxResultBytes over the %s store's %d: %v, want a ConfigError naming the store", c.store.name, caps.MaxResultBytes, err)
		}
	}
}

func runFailOnAny(t *testing.T, c *cellEnv) {
	h := sqsBatch(c, func(_ context.Context, m events.SQSMessage) error {
		if m.Body == "bad" {
			return errors.New("refused")
		}
		return nil
	}, lambdaidem.WithFailBatchOnAnyFailure())
	_, err := h(t.Context(), events.SQSEvent{Records: []events.SQSMessage{record("m1", "good", sourceARN, nil), record("m2", "bad", sourceARN, nil)}})
	var be *lambdaidem.BatchError
	if !errors.As(err, &be) || be.Failed != 1 || be.Total != 2 {
		t.Fatalf("a batch with one failure: %v, want a BatchError of 1 in 2", err)
	}
}

func runKeyConflict(t *testing.T, c *cellEnv) {
	h := c.handler(t, ok)
	want(t, "first payload", h(t.Context(), "k", "a"), fresh, true)
	want(t, "another payload under the key", h(t.Context(), "k", "b"), conflict, false)
}

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func runLateReplay(t *testing.T, c *cellEnv) {
	clk := &clock{now: time.Now().Truncate(time.Second)}
	h := c.handler(t, ok, lambdaidem.WithClock(clk.Now), lambdaidem.WithRetention(24*time.Hour), lambdaidem.WithResultRetention(time.Hour))
	want(t, "first call", h(t.Context(), "k", "p"), fresh, true)
	want(t, "repeat within the result's retention", h(t.Context(), "k", "p"), replay, false)
	clk.advance(2 * time.Hour)
	want(t, "repeat after it", h(t.Context(), "k", "p"), late, false)
}
