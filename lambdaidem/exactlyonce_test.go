package lambdaidem_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// abandon claims key m1 under a handler that never records an outcome (its
// process "dies" mid-handler), then lets the lease run out.
func abandon(t *testing.T, b *bundle, opts ...lambdaidem.Option) {
	t.Helper()
	sim := crashSim{b}
	h := lambdaidem.SQS(b.store, b.counting(func(context.Context, events.SQSMessage) error {
		sim.crash()
		return nil
	}), b.opts(opts...)...)
	_, _ = h(context.Background(), batch(msg("m1", "pay 10")))
	sim.revive()
	b.clock.Advance(2 * time.Minute)
}

func TestAtMostOnceDeadLettersAnAbandonedAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	opts := []lambdaidem.Option{lambdaidem.WithAtMostOnce(), lambdaidem.WithLease(time.Minute), lambdaidem.WithDeadLetterSink(b.sink)}
	abandon(t, b, opts...)
	h := lambdaidem.SQS(b.store, b.counting(ok), b.opts(opts...)...)
	resp, err := h(context.Background(), batch(redelivered(msg("m1", "pay 10"), 2)))
	if err != nil {
		t.Fatal(err)
	}
	wantFailed(t, resp)
	if n := b.calls.get("m1"); n != 1 {
		t.Fatalf("handler ran %d times, want 1: at-most-once re-ran an abandoned attempt", n)
	}
	if got := b.sink.reasons(); len(got) != 1 || got[0] != lambdaidem.ReasonOutcomeUnknown {
		t.Fatalf("dead letters %v, want [outcome_unknown]", got)
	}
	if r := b.record(t, "m1"); r.Status != lambdaidem.StatusDeadLettered || r.DeadLetterReason != lambdaidem.ReasonOutcomeUnknown {
		t.Fatalf("record %s/%s", r.Status, r.DeadLetterReason)
	}
	// The default mode re-runs instead.
	b2 := setup(t)
	abandon(t, b2, lambdaidem.WithLease(time.Minute))
	h2 := lambdaidem.SQS(b2.store, b2.counting(ok), b2.opts(lambdaidem.WithLease(time.Minute))...)
	_, _ = h2(context.Background(), batch(redelivered(msg("m1", "pay 10"), 2)))
	if n := b2.calls.get("m1"); n != 2 {
		t.Fatalf("at-least-once ran %d times, want 2", n)
	}
}

func TestAtMostOnceFencesTheOriginalOwnersLateCompletion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	entered, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var reps []*lambdaidem.InvocationReport
	opts := []lambdaidem.Option{lambdaidem.WithAtMostOnce(), lambdaidem.WithLease(time.Minute), lambdaidem.WithDeadLetterSink(b.sink), reportsOf(&reps, &mu)}
	slow := lambdaidem.SQS(b.store, func(context.Context, events.SQSMessage) error {
		close(entered)
		<-release
		return nil
	}, b.opts(opts...)...)
	done := make(chan struct{})
	go func() { defer close(done); _, _ = slow(context.Background(), batch(msg("m1", "trade"))) }()
	<-entered
	b.clock.Advance(2 * time.Minute)
	h := lambdaidem.SQS(b.store, ok, b.opts(opts...)...)
	_, _ = h(context.Background(), batch(redelivered(msg("m1", "trade"), 2)))
	close(release)
	<-done
	mu.Lock()
	defer mu.Unlock()
	late := reps[1].Records[0]
	if late.Outcome != lambdaidem.OutcomeLeaseLost {
		t.Fatalf("original owner's late completion: %s, want lease_lost", late.Outcome)
	}
	if r := b.record(t, "m1"); r.Status != lambdaidem.StatusDeadLettered {
		t.Fatalf("status %s: the late completion overwrote the outcome-unknown mark", r.Status)
	}
}

func TestAtMostOnceResendsWhenTheDLQWasDown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	opts := []lambdaidem.Option{lambdaidem.WithAtMostOnce(), lambdaidem.WithLease(time.Minute), lambdaidem.WithDeadLetterSink(b.sink)}
	abandon(t, b, opts...)
	b.sink.err = errors.New("DLQ unreachable")
	h := lambdaidem.SQS(b.store, b.counting(ok), b.opts(opts...)...)
	resp, _ := h(context.Background(), batch(redelivered(msg("m1", "pay 10"), 2)))
	wantFailed(t, resp, "m1") // not sent: SQS keeps it
	// Never FAILED, which would let the retry run the handler.
	if st := b.status("m1"); st != lambdaidem.StatusInProgress {
		t.Fatalf("status %s after the failed send, want IN_PROGRESS", st)
	}
	b.sink.mu.Lock()
	b.sink.err = nil
	b.sink.mu.Unlock()
	b.clock.Advance(2 * time.Minute) // the lease taken for the send runs out
	resp, _ = h(context.Background(), batch(redelivered(msg("m1", "pay 10"), 3)))
	wantFailed(t, resp)
	if got := b.sink.reasons(); len(got) != 1 || got[0] != lambdaidem.ReasonOutcomeUnknown {
		t.Fatalf("dead letters %v", got)
	}
	if b.calls.get("m1") != 1 {
		t.Fatal("handler re-ran")
	}
	// A further delivery of the same message is acknowledged, not sent again.
	resp, _ = h(context.Background(), batch(redelivered(msg("m1", "pay 10"), 4)))
	wantFailed(t, resp)
	if n := len(b.sink.reasons()); n != 1 {
		t.Fatalf("%d DLQ copies, want 1", n)
	}
}

func TestWrapAtMostOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sim := crashSim{b}
	opts := b.opts(lambdaidem.WithAtMostOnce(), lambdaidem.WithLease(time.Minute), lambdaidem.WithKeyJSONField("id"))
	crashing := lambdaidem.Wrap(b.store, func(context.Context, order) (string, error) { sim.crash(); return "charged", nil }, opts...)
	_, _ = crashing(context.Background(), order{ID: "p1"})
	sim.revive()
	b.clock.Advance(2 * time.Minute)
	ran := false
	pay := lambdaidem.Wrap(b.store, func(context.Context, order) (string, error) { ran = true; return "charged", nil }, opts...)
	if _, err := pay(context.Background(), order{ID: "p1"}); !errors.Is(err, lambdaidem.ErrOutcomeUnknown) || !errors.Is(err, lambdaidem.ErrDeadLettered) {
		t.Fatalf("err = %v, want ErrOutcomeUnknown", err)
	}
	if _, err := pay(context.Background(), order{ID: "p1"}); !errors.Is(err, lambdaidem.ErrOutcomeUnknown) {
		t.Fatalf("second call: %v, want ErrOutcomeUnknown", err)
	}
	if ran {
		t.Fatal("at-most-once ran the payment again")
	}
}

func TestHeartbeatExtendsTheLeaseAndReportsLoss(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ticks := make(chan time.Time)
	extended, release := make(chan struct{}), make(chan struct{})
	var cause error
	opts := b.opts(lambdaidem.WithLease(time.Minute), lambdaidem.WithHeartbeat(10*time.Second), lambdaidem.WithTestTicker(ticks))
	h := lambdaidem.SQS(b.store, func(ctx context.Context, m events.SQSMessage) error {
		close(extended)
		<-release
		<-ctx.Done()
		cause = context.Cause(ctx)
		return cause
	}, opts...)
	done := make(chan events.SQSEventResponse)
	go func() { resp, _ := h(context.Background(), batch(msg("m1", "long job"))); done <- resp }()
	<-extended
	first := b.record(t, "m1").LeaseUntil
	b.clock.Advance(50 * time.Second)
	ticks <- time.Time{}
	// The extension is written by the heartbeat's goroutine: wait for it.
	testenv.WaitFor(t, "the lease end to move", func() bool { return b.record(t, "m1").LeaseUntil.After(first) })
	// Another consumer takes the lease over once it runs out; the next
	// extension is refused and the handler learns it lost the lease.
	b.clock.Advance(5 * time.Minute)
	thief := lambdaidem.SQS(b.store, ok, b.opts(lambdaidem.WithLease(time.Minute))...)
	if resp, _ := thief(context.Background(), batch(redelivered(msg("m1", "long job"), 2))); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("takeover failed: %v", resp)
	}
	close(release)
	ticks <- time.Time{}
	resp := <-done
	if !errors.Is(cause, lambdaidem.ErrLeaseLost) {
		t.Fatalf("context cause %v, want ErrLeaseLost", cause)
	}
	wantFailed(t, resp, "m1")
	if r := b.record(t, "m1"); r.Status != lambdaidem.StatusCompleted || r.Fence.Claim != 2 {
		t.Fatalf("the new owner's record was touched: %s claim %d", r.Status, r.Fence.Claim)
	}
}

// ledger is a downstream system that accepts a write only with a fencing
// number above the last one it saw for the key (within one generation).
type ledger struct {
	mu   sync.Mutex
	last map[string]lambdaidem.Fence
	rows []string
}

func (l *ledger) write(key string, f lambdaidem.Fence, row string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if prev, ok := l.last[key]; ok && prev.Generation == f.Generation && prev.Claim >= f.Claim {
		return errors.New("stale fencing number")
	}
	if l.last == nil {
		l.last = map[string]lambdaidem.Fence{}
	}
	l.last[key] = f
	l.rows = append(l.rows, row)
	return nil
}

func TestFencingNumberRefusesAStaleOwnersLateWrite(t *testing.T) {
	t.Parallel()
	b := setup(t)
	led := &ledger{}
	entered, release := make(chan struct{}), make(chan struct{})
	var staleErr error
	stale := lambdaidem.SQS(b.store, func(ctx context.Context, m events.SQSMessage) error {
		close(entered)
		<-release
		l, _ := lambdaidem.LeaseFromContext(ctx)
		staleErr = led.write("m1", l.Fence, "stale")
		return staleErr
	}, b.opts(lambdaidem.WithLease(time.Minute))...)
	fresh := lambdaidem.SQS(b.store, func(ctx context.Context, m events.SQSMessage) error {
		l, _ := lambdaidem.LeaseFromContext(ctx)
		return led.write("m1", l.Fence, "fresh")
	}, b.opts(lambdaidem.WithLease(time.Minute))...)
	done := make(chan struct{})
	go func() { defer close(done); _, _ = stale(context.Background(), batch(msg("m1", "x"))) }()
	<-entered
	b.clock.Advance(2 * time.Minute)
	_, _ = fresh(context.Background(), batch(redelivered(msg("m1", "x"), 2)))
	close(release)
	<-done
	if staleErr == nil || len(led.rows) != 1 || led.rows[0] != "fresh" {
		t.Fatalf("ledger rows %v, stale write error %v: the stale owner's late write got through", led.rows, staleErr)
	}
}
