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

func TestHeartbeatExtendsTheLeaseAndReportsLoss(t *testing.T) {
	t.Parallel()
	b := setup(t)
	entered := make(chan struct{})
	var cause error
	opts := b.opts(lambdaidem.WithLease(time.Minute), lambdaidem.WithHeartbeat(10*time.Second))
	h := lambdaidem.SQS(b.store, func(ctx context.Context, m events.SQSMessage) error {
		close(entered)
		<-ctx.Done()
		cause = context.Cause(ctx)
		return cause
	}, opts...)
	done := make(chan events.SQSEventResponse)
	go func() { resp, _ := h(context.Background(), batch(msg("m1", "long job"))); done <- resp }()
	<-entered
	first := b.record(t, "m1").LeaseUntil
	// Each tick is a timer of the clock: the extension is written inside
	// Advance.
	b.clock.Advance(10 * time.Second)
	if got := b.record(t, "m1").LeaseUntil; !got.After(first) {
		t.Fatalf("after a tick the lease ends %v, not after %v", got, first)
	}
	// An operator revokes the live lease; the next extension is refused and
	// the handler learns it lost the lease, at once.
	rec := b.record(t, "m1")
	if _, err := b.store.Release(context.Background(), idemstore.ReleaseRequest{Namespace: ns, Key: "m1", Token: rec.LeaseToken,
		Now: b.clock.Now(), Grace: lambdaidem.DefaultGrace, Force: true}); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(10 * time.Second)
	resp := <-done
	if !errors.Is(cause, lambdaidem.ErrLeaseLost) {
		t.Fatalf("context cause %v, want ErrLeaseLost", cause)
	}
	wantFailed(t, resp, "m1")
	if r := b.record(t, "m1"); r.Status == lambdaidem.StatusCompleted {
		t.Fatalf("the revoked holder completed the record")
	}
}

func TestRuntimeDrivesTheHeartbeat(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world()
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

func (s *extendFaults) Extend(ctx context.Context, r idemstore.ExtendRequest) error {
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
	w := b.world()
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
	w2 := b2.world()
	store2 := &extendFaults{Store: b2.store, off: true}
	h2 := lambdaidem.SQS(store2, waiting, b2.opts(lambdaidem.WithLease(time.Minute), lambdaidem.WithHeartbeat(10*time.Second))...)
	go func() { resp, _ := h2(context.Background(), batch(msg("m2", "x"))); done <- resp }()
	c = <-hctx
	start = w2.Now()
	w2.advance(10 * time.Second)
	if dl, want := c.Deadline(); !dl.Equal(start.Add(70*time.Second-lambdaidem.DefaultDeadlineMargin)) || !want {
		t.Fatalf("after a granted extension the deadline is %v, want %v", dl, start.Add(70*time.Second-lambdaidem.DefaultDeadlineMargin))
	}
	store2.mu.Lock()
	store2.off = false
	store2.mu.Unlock()
	w2.advance(time.Minute - lambdaidem.DefaultDeadlineMargin - time.Second)
	if c.Err() != nil {
		t.Fatal("ended before the granted lease")
	}
	w2.advance(time.Second)
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

// With WithClock and a heartbeat whose extensions all fail, the handler's
// context ends by that clock at its lease's end, before another consumer
// may take the key over: never two handlers on one key at once. (When only
// decisions followed WithClock, the context ended by real time, a minute
// later, and the takeover's handler ran beside the first one.)
func TestWithClockNeverTwoHandlersOnOneKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store := &extendFaults{Store: b.store} // every extension fails
	first := make(chan context.Context, 1)
	h := lambdaidem.SQS(store, func(ctx context.Context, _ events.SQSMessage) error {
		first <- ctx
		<-ctx.Done()
		return ctx.Err()
	}, b.opts(lambdaidem.WithLease(time.Minute), lambdaidem.WithHeartbeat(10*time.Second))...)
	done := make(chan events.SQSEventResponse, 1)
	go func() { resp, _ := h(context.Background(), batch(msg("m1", "x"))); done <- resp }()
	held := <-first

	// The lease runs out by the clock, and its grace with it: the key may
	// be taken over.
	b.clock.Advance(time.Minute + lambdaidem.DefaultGrace + time.Second)
	var overlap error
	ran := false
	thief := lambdaidem.SQS(b.store, func(context.Context, events.SQSMessage) error {
		ran = true
		if held.Err() == nil {
			overlap = errors.New("the takeover's handler runs while the first handler's context is live")
		}
		return nil
	}, b.opts(lambdaidem.WithLease(time.Minute))...)
	if resp, err := thief(context.Background(), batch(redelivered(msg("m1", "x"), 2))); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("takeover: %v %v", resp, err)
	}
	if !ran {
		t.Fatal("the takeover did not run the handler")
	}
	if overlap != nil {
		t.Fatal(overlap)
	}
	if !errors.Is(held.Err(), context.DeadlineExceeded) {
		t.Fatalf("first handler's context: %v, want DeadlineExceeded", held.Err())
	}
	wantFailed(t, <-done, "m1")
}
