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
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest/testclock"
)

// feature is one row of the matrix.
type feature struct {
	name string
	// enable is how a handler turns the feature on.
	enable string
	// sqsOnly features have no meaning for Wrap and httpidem: their
	// option is refused there with ErrUnsupportedOption. wrapOnly
	// features are refused by the SQS handler, and so by the kit.
	sqsOnly, wrapOnly bool
	// option is the option refused where the feature is not supported;
	// refusedWith the named error it is refused with there, besides
	// ErrUnsupportedOption (nil: that one).
	option      func() lambdaidem.Option
	refusedWith error
	// refusedWhy says why, for the document.
	refusedWhy string
	// run runs the feature through one entry point on one store.
	run func(t *testing.T, c *cellEnv)
	// kit runs the feature in the test kit (TestKit); nil for a feature
	// the kit refuses when it is built, as the SQS handler does. kitHow
	// says, for the document, how a test turns it on there.
	kit    func(t *testing.T)
	kitHow string
	// kitRefused, for a feature the SQS handler supports and the kit
	// does not run yet, is the named error lambdaidemtest.New refuses
	// its option with today (TestKit asserts it); kitHow then says why.
	kitRefused error
	// sim names the simulator's knobs (fields of its Config) that draw
	// the feature under the simulation's invariants; empty while the
	// simulator does not draw it.
	sim string
}

// refusal is the named error a refused cell of f is refused with.
func (f feature) refusal() error {
	if f.refusedWith != nil {
		return f.refusedWith
	}
	return idemstore.ErrUnsupportedOption
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
		kit:    kitCompletionWrites,
		kitHow: "`NewWithStore(memstore.New(memstore.WithCompletionWrites(db)), ...)`, `db` a `dynamotest.DB`; `New` (no applier) refuses the declaration (`lambdaidem.ErrUnsupportedWrite`)",
		sim:    "Tx, TxRefuse",
	},
	{
		name:   "at-most-once",
		enable: "`WithAtMostOnce()`",
		run:    runAtMostOnce,
		kit:    kitAtMostOnce,
		kitHow: "the option; `CrashAfterEffect`, `ErrorAfterEffect` with `Effect` in the fake, `ExpectDeadLetter(key, outcome_unknown)`",
		sim:    "AtMostOnce, ErrAfter, Unknown, NotApplied",
	},
	{
		name:   "heartbeat",
		enable: "`WithHeartbeat(interval)`",
		run:    runHeartbeat,
		kit:    kitHeartbeat,
		kitHow: "the options; `RedeliverWhileRunning`",
		sim:    "Heartbeat",
	},
	{
		name:    "cache",
		enable:  "`WithCache(size, ttl)`",
		sqsOnly: true,
		option:  func() lambdaidem.Option { return lambdaidem.WithCache(10, time.Minute) },
		run:     runCache,
		kit:     kitCache,
		kitHow:  "the option; one key sent twice to one execution environment (`Pollers` and `BatchSize` 1)",
		sim:     "Cache",
	},
	{
		name:    "FIFO",
		enable:  "a FIFO queue, `WithKeyDeduplicationID(perGroup)`",
		sqsOnly: true,
		option:  func() lambdaidem.Option { return lambdaidem.WithKeyDeduplicationID(false) },
		run:     runFIFO,
		kit:     kitFIFO,
		kitHow:  "`Group(g)`, `StopGroup`",
		sim:     "FIFO, Groups",
	},
	{
		name:    "redrive reset",
		enable:  "`WithDeadLetterSink(sink)`, then `sqsqueue.Redrive` (the store's `ResetDeadLetter`)",
		sqsOnly: true,
		option:  func() lambdaidem.Option { return lambdaidem.WithDeadLetterSink(&deadLetters{}) },
		run:     runRedrive,
		kit:     kitRedrive,
		kitHow:  "the kit's own sink; `Poison`, then `Redrive`",
		sim:     "Redrive, MaxRedrives",
	},
	{
		name:       "large results",
		enable:     "`WithMaxResultBytes(n)`, up to the store's limit",
		wrapOnly:   true,
		option:     func() lambdaidem.Option { return lambdaidem.WithMaxResultBytes(1 << 20) },
		refusedWhy: "the SQS handler stores no result",
		run:        runLargeResults,
		sim:        "LargeResult",
	},
	{
		name:    "fail-on-any",
		enable:  "`WithFailBatchOnAnyFailure()`",
		sqsOnly: true,
		option:  func() lambdaidem.Option { return lambdaidem.WithFailBatchOnAnyFailure() },
		run:     runFailOnAny,
		kit:     kitFailOnAny,
		kitHow:  "the option; `ExpectFailure(key)`",
		sim:     "FailOnAny",
	},
	{
		name:   "key conflict",
		enable: "always on; `WithPayloadHash`, `WithHashJSONFields` choose what is compared",
		run:    runKeyConflict,
		kit:    kitKeyConflict,
		kitHow: "a key option; `ExpectDeadLetter(key, key_conflict)`",
		sim:    "Conflict",
	},
	{
		name:   "late replay",
		enable: "`WithResultRetention(d)` shorter than `WithRetention`",
		run:    runLateReplay,
		kit:    kitLateReplay,
		kitHow: "the options; a repeat sent after the result's retention",
		sim:    "ResultRet",
	},
	{
		name:        "wait-for-completion",
		enable:      "`WithWaitForCompletion(limit)` (httpidem: in `WithWrapOptions`)",
		wrapOnly:    true,
		option:      func() lambdaidem.Option { return lambdaidem.WithWaitForCompletion(time.Minute) },
		refusedWith: lambdaidem.ErrWaitUnsupported,
		refusedWhy:  "an SQS message whose key is held waits in the queue",
		run:         runWait,
		sim:         "Wait, Twins, LateFail",
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
	var ce *idemstore.ConfigError
	if !errors.As(err, &ce) || !errors.Is(err, idemstore.ErrUnsupportedWrite) || ce.Store != c.store.name {
		t.Fatalf("WithCompletionWrites of a type the store does not commit: %v, want a ConfigError naming %s, ErrUnsupportedWrite", err, c.store.name)
	}
	// The store built without what commits its writes refuses them too.
	if c.bare != nil {
		err := lambdaidem.Check(func() { c.entry.build(t, c.bare, c.ns, ok, c.effects.declare) })
		if !errors.As(err, &ce) || !errors.Is(err, idemstore.ErrUnsupportedWrite) || ce.Store != c.store.name {
			t.Fatalf("the %s store without its applier, given the writes it commits with one: %v, want a ConfigError naming it, ErrUnsupportedWrite", c.store.name, err)
		}
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
	// An error that does not declare the effect did not happen (the
	// email API's 504 after the send) is as unknown; NotApplied retries.
	var sends, declined atomic.Int32
	h = c.handler(t, func(_ context.Context, key, _ string) (string, error) {
		switch {
		case key == "sent" && sends.Add(1) == 1:
			return "", errors.New("email API: 504 Gateway Timeout")
		case key == "declined" && declined.Add(1) == 1:
			return "", lambdaidem.NotApplied(errors.New("email API: 400, not sent"))
		}
		return "done", nil
	}, lambdaidem.WithAtMostOnce())
	for range 2 {
		h(t.Context(), "sent", "p")
		h(t.Context(), "declined", "p")
	}
	if n := sends.Load(); n != 1 {
		t.Fatalf("a run that returned an error after its effect ran %d times, want once", n)
	}
	if again := h(t.Context(), "declined", "p"); again.v != replay || declined.Load() != 2 {
		t.Fatalf("a NotApplied failure: %s after %d runs, want it retried and done; %s", again.v, declined.Load(), again.detail)
	}
}

// extensions counts the extensions a store granted.
type extensions struct {
	idemstore.Store
	n atomic.Int32
}

func (e *extensions) Extend(ctx context.Context, req idemstore.ExtendRequest) error {
	err := e.Store.Extend(ctx, req)
	if err == nil {
		e.n.Add(1)
	}
	return err
}

// Unwrap returns the store counted, whose capabilities are checked.
func (e *extensions) Unwrap() idemstore.Store { return e.Store }

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
	resetter, isResetter := c.env.store.(idemstore.DeadLetterResetter)
	if !isResetter {
		t.Fatalf("the %s store cannot reset a dead-lettered record", c.store.name)
	}
	if _, err := resetter.ResetDeadLetter(t.Context(), idemstore.ResetRequest{Namespace: c.ns, Key: "k", DeadLetterMessageID: sink.last(), Now: time.Now()}); err != nil {
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
	// Over what the store keeps: refused when built, naming the store.
	if caps, declared := idemstore.CapabilitiesOf(c.env.store); declared && caps.MaxResultBytes > 0 {
		err := lambdaidem.Check(func() { c.handler(t, ok, lambdaidem.WithMaxResultBytes(caps.MaxResultBytes+1)) })
		var ce *idemstore.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, idemstore.ErrUnsupportedOption) || ce.Store != c.store.name {
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

func runLateReplay(t *testing.T, c *cellEnv) {
	clk := testclock.New(time.Now().Truncate(time.Second)).PassShort(200 * time.Millisecond)
	h := c.handler(t, ok, lambdaidem.WithClock(clk), lambdaidem.WithRetention(24*time.Hour), lambdaidem.WithResultRetention(time.Hour))
	want(t, "first call", h(t.Context(), "k", "p"), fresh, true)
	want(t, "repeat within the result's retention", h(t.Context(), "k", "p"), replay, false)
	clk.Advance(2 * time.Hour)
	want(t, "repeat after it", h(t.Context(), "k", "p"), late, false)
}

// reads signals the first time the store is read (Store.Get): a call
// waiting for a run in progress polls the record with it.
type reads struct {
	idemstore.Store
	once  sync.Once
	first chan struct{}
}

// Unwrap returns the store read, whose capabilities are checked.
func (r *reads) Unwrap() idemstore.Store { return r.Store }

func (r *reads) Get(ctx context.Context, req idemstore.GetRequest) (idemstore.Record, error) {
	r.once.Do(func() { close(r.first) })
	return r.Store.Get(ctx, req)
}

// runWait: a call for a key whose run is in progress waits for it and
// answers with its stored result, without running the function.
func runWait(t *testing.T, c *cellEnv) {
	release := make(chan struct{})
	started := make(chan struct{})
	holder := c.handler(t, func(ctx context.Context, key, _ string) (string, error) {
		close(started)
		select {
		case <-release:
			return "the first run's result for " + key, nil
		case <-ctx.Done():
			return "", context.Cause(ctx)
		}
	})
	watched := &reads{Store: c.env.store, first: make(chan struct{})}
	waiter := c.entry.build(t, watched, c.ns, ok, c.feat.option())

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	held := make(chan call, 1)
	go func() { held <- holder(ctx, "k", "p") }()
	waitFor(t, started, "the first run to start")
	waited := make(chan call, 1)
	go func() { waited <- waiter(ctx, "k", "p") }()
	waitFor(t, watched.first, "the second call to read the record in progress")
	close(release)
	first, second := <-held, <-waited
	want(t, "the first call", first, fresh, true)
	want(t, "the call that waited", second, replay, false)
	if second.result != first.result {
		t.Fatalf("the call that waited answered %q, want the first run's %q", second.result, first.result)
	}
}

// waitFor waits for ch to close, up to a bound generous enough for a
// loaded machine, and fails naming what it waited for.
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("waited 30 s for %s", what)
	}
}
