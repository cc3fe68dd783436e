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

func TestRuntimeDrivesTheHeartbeat(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := newSimWorld()
	entered, release := make(chan struct{}), make(chan struct{})
	h := lambdaidem.SQS(b.store, func(ctx context.Context, _ events.SQSMessage) error {
		close(entered)
		<-release
		return nil
	}, b.opts(lambdaidem.WithLease(time.Minute), lambdaidem.WithHeartbeat(10*time.Second))...)
	ctx, cancel := w.ctx(0)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := h(ctx, batch(msg("m1", "x"))); done <- err }()
	<-entered
	first := b.record(t, "m1").LeaseUntil
	if want := w.Now().Add(time.Minute); !first.Equal(want) {
		t.Fatalf("lease until %v, want %v", first, want)
	}
	// Each tick is a Runtime timer: the extension is written inside advance.
	w.advance(10 * time.Second)
	if got, want := b.record(t, "m1").LeaseUntil, w.Now().Add(time.Minute); !got.Equal(want) {
		t.Fatalf("after one tick the lease ends %v, want %v", got, want)
	}
	w.advance(10 * time.Second)
	if got, want := b.record(t, "m1").LeaseUntil, w.Now().Add(time.Minute); !got.Equal(want) {
		t.Fatalf("after two ticks the lease ends %v, want %v", got, want)
	}
	close(release)
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if r := b.record(t, "m1"); r.Status != lambdaidem.StatusCompleted {
		t.Fatalf("record %s, want COMPLETED", r.Status)
	}
}

// extendFaults refuses to extend leases as unavailable while on.
type extendFaults struct {
	lambdaidem.Store
	mu  sync.Mutex
	off bool
}

func (s *extendFaults) Extend(ctx context.Context, r lambdaidem.ExtendRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.off {
		return lambdaidem.ErrStoreUnavailable
	}
	return s.Store.Extend(ctx, r)
}

// The handler's context ends at the last granted lease end minus the margin,
// whatever the heartbeat's luck: a handler must never outlive its lease.
func TestHeartbeatHandlerEndsWithTheLastGrantedLease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store := &extendFaults{Store: b.store}
	w := newSimWorld()
	hctx := make(chan context.Context, 1)
	abandon := make(chan struct{})
	t.Cleanup(func() { close(abandon) })
	// The handler hands its context over and runs until it ends.
	waiting := func(ctx context.Context, _ events.SQSMessage) error {
		hctx <- ctx
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-abandon:
			return nil
		}
	}
	h := lambdaidem.SQS(store, waiting, b.opts(lambdaidem.WithLease(time.Minute), lambdaidem.WithHeartbeat(10*time.Second))...)
	ctx, cancel := w.ctx(0)
	defer cancel()
	start := w.Now()
	done := make(chan events.SQSEventResponse, 1)
	go func() { resp, _ := h(ctx, batch(msg("m1", "x"))); done <- resp }()
	c := <-hctx
	if dl, ok := c.Deadline(); !ok || !dl.Equal(start.Add(time.Minute-lambdaidem.DefaultDeadlineMargin)) {
		t.Fatalf("handler deadline %v %v, want the lease end minus the margin", dl, ok)
	}
	// Every extension fails: the context must still end with the first lease.
	w.advance(time.Minute - lambdaidem.DefaultDeadlineMargin - time.Second)
	if c.Err() != nil {
		t.Fatal("ended early")
	}
	w.advance(time.Second)
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Fatalf("after every extension failed, the handler still runs past its lease (err %v)", c.Err())
	}
	wantFailed(t, <-done, "m1")

	// Granted extensions move the end; a failing one leaves it where the
	// last granted one put it.
	b2 := setup(t)
	store2 := &extendFaults{Store: b2.store, off: true}
	h2 := lambdaidem.SQS(store2, waiting, b2.opts(lambdaidem.WithLease(time.Minute), lambdaidem.WithHeartbeat(10*time.Second))...)
	go func() { resp, _ := h2(ctx, batch(msg("m2", "x"))); done <- resp }()
	c = <-hctx
	start = w.Now()
	w.advance(10 * time.Second)
	if dl, want := c.Deadline(); !dl.Equal(start.Add(70*time.Second-lambdaidem.DefaultDeadlineMargin)) || !want {
		t.Fatalf("after a granted extension the deadline is %v, want %v", dl, start.Add(70*time.Second-lambdaidem.DefaultDeadlineMargin))
	}
	store2.mu.Lock()
	store2.off = false
	store2.mu.Unlock()
	w.advance(time.Minute - lambdaidem.DefaultDeadlineMargin - time.Second)
	if c.Err() != nil {
		t.Fatal("ended before the granted lease")
	}
	w.advance(time.Second)
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Fatalf("handler outlives its last granted lease (err %v)", c.Err())
	}
	wantFailed(t, <-done, "m2")
}

func TestHeartbeatThatCannotKeepTheLeaseIsRejected(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, opts := range [][]lambdaidem.Option{
		{lambdaidem.WithLease(time.Minute), lambdaidem.WithHeartbeat(time.Minute)},
		{lambdaidem.WithLease(time.Minute), lambdaidem.WithHeartbeat(59 * time.Second)},
		{lambdaidem.WithHeartbeat(2 * time.Minute)},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("a heartbeat that cannot keep the lease alive was accepted")
				}
			}()
			lambdaidem.SQS(b.store, ok, b.opts(opts...)...)
		}()
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Wrap accepted a heartbeat that cannot keep the lease alive")
				}
			}()
			lambdaidem.Wrap(b.store, func(context.Context, int) (int, error) { return 0, nil }, b.wrapOpts(opts...)...)
		}()
	}
	lambdaidem.SQS(b.store, ok, b.opts(lambdaidem.WithLease(time.Minute), lambdaidem.WithHeartbeat(20*time.Second))...)
}
