package storetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// UnwrittenFinalMark runs the SQS decorator on store when a dead-letter
// copy is sent but the store does not take the final mark, and checks that
// the copy is never stranded: the message is reported failed (kept); its
// redelivery to the same container writes the mark for the copy already
// sent, sending no second one; and another container that takes over a key
// left with only the pending mark finishes the dead-lettering with its
// reason instead of running the handler again.
func UnwrittenFinalMark(t *testing.T, store idemstore.Store, namespace string) {
	t.Helper()
	clock := &steppedClock{now: time.Now().Truncate(time.Second)}
	faulty := &finalMarkFaults{Store: store}
	sink := &countingSink{}
	var runs atomic.Int32
	poison := func(context.Context, events.SQSMessage) error {
		runs.Add(1)
		return lambdaidem.Poison(errors.New("unreadable order"))
	}
	opts := []lambdaidem.Option{
		lambdaidem.WithNamespace(namespace), lambdaidem.WithClock(clock), lambdaidem.WithLease(time.Minute),
		lambdaidem.WithDeadLetterSink(sink), lambdaidem.WithKeyAttribute("key"),
		lambdaidem.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
	}
	first := lambdaidem.SQS(faulty, poison, opts...)
	other := lambdaidem.SQS(store, poison, opts...)
	rec := func(id, key string) events.SQSEvent {
		return events.SQSEvent{Records: []events.SQSMessage{{
			MessageId: id, Body: "order " + key, EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:orders",
			Attributes:        map[string]string{"ApproximateReceiveCount": "1"},
			MessageAttributes: map[string]events.SQSMessageAttribute{"key": {DataType: "String", StringValue: &key}},
		}}}
	}
	deliver := func(what string, h func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), ev events.SQSEvent, kept bool) {
		t.Helper()
		resp, _ := h(t.Context(), ev)
		if got := len(resp.BatchItemFailures) == 1; got != kept {
			t.Fatalf("%s: reported failed %t, want %t", what, got, kept)
		}
	}
	get := func(key string) idemstore.Record {
		t.Helper()
		r, err := store.Get(t.Context(), idemstore.GetRequest{Namespace: namespace, Key: key, Now: clock.Now()})
		if err != nil {
			t.Fatalf("get %s: %v", key, err)
		}
		return r
	}

	// The same container: the mark is written on the redelivery.
	faulty.on.Store(true)
	deliver("first delivery, mark not written", first, rec("m1", "fm-1"), true)
	if r := get("fm-1"); r.Status != idemstore.StatusInProgress || r.DeadLetterReason != idemstore.ReasonPoison || sink.n() != 1 {
		t.Fatalf("after the unwritten mark: %s (%q), %d copies; want IN_PROGRESS with the pending mark, 1 copy", r.Status, r.DeadLetterReason, sink.n())
	}
	faulty.on.Store(false)
	deliver("redelivery to the same container", first, rec("m1", "fm-1"), false)
	if r := get("fm-1"); r.Status != idemstore.StatusDeadLettered || r.DeadLetterMessageID != "copy-1" || sink.n() != 1 || runs.Load() != 1 {
		t.Fatalf("after the redelivery: %s by %q, %d copies, %d runs; want DEAD_LETTERED by copy-1, 1 copy, 1 run", r.Status, r.DeadLetterMessageID, sink.n(), runs.Load())
	}

	// Another container, once the lease ran out: the takeover finishes it.
	faulty.on.Store(true)
	deliver("first delivery, mark not written", first, rec("m2", "fm-2"), true)
	faulty.on.Store(false)
	clock.Advance(10 * time.Minute)
	deliver("redelivery to another container", other, rec("m2", "fm-2"), false)
	if r := get("fm-2"); r.Status != idemstore.StatusDeadLettered || r.DeadLetterReason != idemstore.ReasonPoison || r.DeadLetterMessageID != "copy-3" || runs.Load() != 2 {
		t.Fatalf("after the takeover: %s (%s) by %q, %d runs; want DEAD_LETTERED (poison) by copy-3, 2 runs", r.Status, r.DeadLetterReason, r.DeadLetterMessageID, runs.Load())
	}
	// The first container's remembered mark is refused now; its
	// redelivery is a duplicate of the dead-lettered message.
	deliver("redelivery to the first container", first, rec("m2", "fm-2"), false)
	if r := get("fm-2"); r.DeadLetterMessageID != "copy-3" || sink.n() != 3 {
		t.Fatalf("after the first container's redelivery: copy %q, %d copies; want copy-3, 3", r.DeadLetterMessageID, sink.n())
	}
}

// finalMarkFaults answers the final (not pending) DeadLetter as
// unavailable while on.
type finalMarkFaults struct {
	idemstore.Store
	on atomic.Bool
}

func (s *finalMarkFaults) DeadLetter(ctx context.Context, r idemstore.DeadLetterRequest) error {
	if s.on.Load() && !r.Pending {
		return fmt.Errorf("storetest: final mark refused: %w", idemstore.ErrStoreUnavailable)
	}
	return s.Store.DeadLetter(ctx, r)
}

// countingSink takes every copy, naming them copy-1, copy-2...
type countingSink struct{ sent atomic.Int32 }

func (s *countingSink) Send(context.Context, lambdaidem.DeadLetter) (string, error) {
	return fmt.Sprintf("copy-%d", s.sent.Add(1)), nil
}

func (s *countingSink) n() int { return int(s.sent.Load()) }

// steppedClock reads a time the test sets, and waits (the decorator's
// retries of an unavailable store) in real time.
type steppedClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *steppedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the time read by d.
func (c *steppedClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *steppedClock) AfterFunc(d time.Duration, f func()) lambdaidem.Timer {
	return time.AfterFunc(d, f)
}
