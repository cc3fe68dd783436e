package lambdaidem_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

func TestInProgressIsFailedAndComesBackWhenLeaseEnds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	entered, release := make(chan struct{}), make(chan struct{})
	slow := func(ctx context.Context, m events.SQSMessage) error {
		close(entered)
		<-release
		return nil
	}
	first := lambdaidem.SQS(b.store, b.counting(slow), b.opts(lambdaidem.WithLease(time.Minute))...)
	second := lambdaidem.SQS(b.store, b.counting(ok), b.opts(lambdaidem.WithLease(time.Minute))...)
	done := make(chan events.SQSEventResponse)
	go func() {
		resp, _ := first(context.Background(), batch(msg("m1", "x")))
		done <- resp
	}()
	<-entered
	// A redelivery overlapping the first attempt (visibility ran out).
	b.clock.Advance(10 * time.Second)
	resp, err := second(context.Background(), batch(redelivered(msg("m1", "x"), 2)))
	var be *lambdaidem.BatchError
	if !errors.As(err, &be) || be.Failed != 1 {
		t.Fatalf("all-failed batch returned %v, want a BatchError", err)
	}
	wantFailed(t, resp, "m1")
	d, changed := b.vis.get("m1")
	// The lease ends 50 s from now, plus 2 s grace, plus up to 1 s jitter.
	if !changed || d < 52*time.Second || d > 53*time.Second {
		t.Fatalf("visibility change %v (changed=%v), want between 52s and 53s", d, changed)
	}
	close(release)
	wantFailed(t, <-done)
	if b.calls.get("m1") != 1 {
		t.Fatalf("handler ran %d times, want 1", b.calls.get("m1"))
	}
}

func TestExpiredLeaseIsTakenOverAndStaleOwnerIsFenced(t *testing.T) {
	t.Parallel()
	b := setup(t)
	entered, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var reps []*lambdaidem.InvocationReport
	stale := lambdaidem.SQS(b.store, func(ctx context.Context, m events.SQSMessage) error {
		close(entered)
		<-release
		return nil
	}, b.opts(lambdaidem.WithLease(time.Minute), reportsOf(&reps, &mu))...)
	fresh := lambdaidem.SQS(b.store, b.counting(ok), b.opts(lambdaidem.WithLease(time.Minute), reportsOf(&reps, &mu))...)

	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = stale(context.Background(), batch(msg("m1", "x")))
	}()
	<-entered
	b.clock.Advance(2 * time.Minute) // the stale owner's lease ran out
	resp, err := fresh(context.Background(), batch(redelivered(msg("m1", "x"), 2)))
	if err != nil {
		t.Fatal(err)
	}
	wantFailed(t, resp)
	close(release)
	<-done

	mu.Lock()
	defer mu.Unlock()
	takeover, late := reps[0].Records[0], reps[1].Records[0]
	if !takeover.Takeover || takeover.Attempt != 2 || takeover.Outcome != lambdaidem.OutcomeProcessed {
		t.Fatalf("takeover report %+v", takeover)
	}
	if late.Outcome != lambdaidem.OutcomeLeaseLost || !errors.Is(late.Err, lambdaidem.ErrLeaseLost) {
		t.Fatalf("stale owner's completion: %+v, want lease_lost", late)
	}
	r := b.record(t, "m1")
	if r.Status != lambdaidem.StatusCompleted || r.Fence.Claim != 2 {
		t.Fatalf("record %+v, want COMPLETED by claim 2", r)
	}
}

// ledger is a downstream system that accepts a write only with a fencing
// number above the last one it saw for the key (within one generation).
type ledger struct {
	mu   sync.Mutex
	last map[string]idemstore.Fence
	rows []string
}

func (l *ledger) write(key string, f idemstore.Fence, row string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if prev, ok := l.last[key]; ok && prev.Generation == f.Generation && prev.Claim >= f.Claim {
		return errors.New("stale fencing number")
	}
	if l.last == nil {
		l.last = map[string]idemstore.Fence{}
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

// No claim is started without time for its round trip beyond the margin.
func TestNoClaimWithoutABudgetForItsRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world()
	h := lambdaidem.SQS(b.store, b.counting(ok), b.opts(lambdaidem.WithDeadlineMargin(100*time.Millisecond))...)
	ctx, cancel := w.ctx(200 * time.Millisecond)
	defer cancel()
	resp, _ := h(ctx, batch(msg("m1", "x")))
	wantFailed(t, resp, "m1")
	if _, err := b.store.Get(context.Background(), idemstore.GetRequest{Namespace: ns, Key: "m1", Now: w.Now()}); !errors.Is(err, idemstore.ErrNotFound) {
		t.Fatalf("claimed with 100ms left beyond the margin: %v", err)
	}
}
