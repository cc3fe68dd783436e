package lambdaidem_test

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambdaidem/go-lambdaidem/internal/seam"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// simWorld is a seam.Runtime whose time moves only when the test says so.
type simWorld struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers []*simTimer
	// instantBelow, when set, makes shorter timers pass at once: time
	// advances to them as they are set (a store retry's short waits).
	instantBelow time.Duration
}

type simTimer struct {
	at   time.Time
	seq  int
	f    func()
	dead bool
}

func newSimWorld() *simWorld { return &simWorld{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (w *simWorld) runtime() *seam.Runtime {
	return &seam.Runtime{
		Now: func() time.Time { w.mu.Lock(); defer w.mu.Unlock(); return w.now },
		AfterFunc: func(d time.Duration, f func()) func() bool {
			w.mu.Lock()
			w.seq++
			tm := &simTimer{at: w.now.Add(d), seq: w.seq, f: f}
			w.timers = append(w.timers, tm)
			instant := d < w.instantBelow
			w.mu.Unlock()
			if instant {
				w.advance(d)
			}
			return func() bool {
				w.mu.Lock()
				defer w.mu.Unlock()
				was := !tm.dead
				tm.dead = true
				return was
			}
		},
		Int64N: func(n int64) int64 { return n / 2 },
	}
}

// Now is the world's time.
func (w *simWorld) Now() time.Time { w.mu.Lock(); defer w.mu.Unlock(); return w.now }

// advance moves time by d, firing due timers in order on this goroutine.
func (w *simWorld) advance(d time.Duration) {
	w.mu.Lock()
	end := w.now.Add(d)
	w.mu.Unlock()
	for {
		w.mu.Lock()
		sort.Slice(w.timers, func(i, j int) bool {
			if !w.timers[i].at.Equal(w.timers[j].at) {
				return w.timers[i].at.Before(w.timers[j].at)
			}
			return w.timers[i].seq < w.timers[j].seq
		})
		var next *simTimer
		for len(w.timers) > 0 && w.timers[0].dead {
			w.timers = w.timers[1:]
		}
		if len(w.timers) > 0 && !w.timers[0].at.After(end) {
			next, w.timers = w.timers[0], w.timers[1:]
			next.dead = true
			w.now = next.at
		}
		if next == nil {
			w.now = end
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		next.f()
	}
}

// ctx returns a context carrying the world's Runtime, with an invocation
// deadline d from now in the world's time (zero: none).
func (w *simWorld) ctx(d time.Duration) (context.Context, context.CancelFunc) {
	rt := w.runtime()
	ctx := seam.With(context.Background(), rt)
	if d == 0 {
		return ctx, func() {}
	}
	return seam.WithDeadline(ctx, seam.ClockOf(rt), w.Now().Add(d))
}

func TestRuntimeDrivesTheHandlersDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := newSimWorld()
	entered := make(chan time.Time, 1)
	h := lambdaidem.SQS(b.store, func(ctx context.Context, _ events.SQSMessage) error {
		dl, _ := ctx.Deadline()
		entered <- dl
		<-ctx.Done()
		return ctx.Err()
	}, b.opts()...)
	ctx, cancel := w.ctx(30 * time.Second)
	defer cancel()
	start := w.Now()
	done := make(chan events.SQSEventResponse, 1)
	go func() { resp, _ := h(ctx, batch(msg("m1", "x"))); done <- resp }()
	dl := <-entered
	if want := start.Add(30*time.Second - lambdaidem.DefaultDeadlineMargin); !dl.Equal(want) {
		t.Fatalf("handler deadline %v, want %v (the Runtime's deadline minus the margin)", dl, want)
	}
	w.advance(30*time.Second - lambdaidem.DefaultDeadlineMargin - time.Second)
	select {
	case <-done:
		t.Fatal("the handler's context ended before the Runtime's deadline")
	default:
	}
	w.advance(time.Second)
	wantFailed(t, <-done, "m1")
	if r := b.record(t, "m1"); r.Status != lambdaidem.StatusFailed || r.LastError != context.DeadlineExceeded.Error() {
		t.Fatalf("record %s %q, want FAILED with the deadline error", r.Status, r.LastError)
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
			lambdaidem.Wrap(b.store, func(context.Context, int) (int, error) { return 0, nil }, b.opts(opts...)...)
		}()
	}
	lambdaidem.SQS(b.store, ok, b.opts(lambdaidem.WithLease(time.Minute), lambdaidem.WithHeartbeat(20*time.Second))...)
}

// A lease at or below the default margin scales the margin to a quarter of
// the lease; an explicit margin that leaves no time is rejected.
func TestShortLeaseScalesTheMarginOrIsRejected(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := newSimWorld()
	var left time.Duration
	h := lambdaidem.SQS(b.store, func(ctx context.Context, _ events.SQSMessage) error {
		dl, _ := ctx.Deadline()
		left = dl.Sub(w.Now())
		return ctx.Err()
	}, b.opts(lambdaidem.WithLease(time.Second))...)
	ctx, cancel := w.ctx(30 * time.Second)
	defer cancel()
	wantFailed(t, mustHandle(t, h, ctx, batch(msg("m1", "x"))))
	if left != 750*time.Millisecond {
		t.Fatalf("handler had %v, want 750ms (a 1s lease less a quarter)", left)
	}
	for _, lease := range []time.Duration{time.Second, 5 * time.Second} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("WithDeadlineMargin(5s) with WithLease(%v) was accepted", lease)
				}
			}()
			lambdaidem.SQS(b.store, ok, b.opts(lambdaidem.WithLease(lease), lambdaidem.WithDeadlineMargin(5*time.Second))...)
		}()
	}
}

func mustHandle(t *testing.T, h func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), ctx context.Context, ev events.SQSEvent) events.SQSEventResponse {
	t.Helper()
	resp, err := h(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// In at-most-once mode a handler that returns an error because its context
// ended may have started its effect: it is dead-lettered as outcome unknown,
// never made retryable.
func TestAtMostOnceDeadlineCancelIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := newSimWorld()
	entered := make(chan struct{})
	h := lambdaidem.SQS(b.store, b.counting(func(ctx context.Context, _ events.SQSMessage) error {
		close(entered) // the payment is on its way
		<-ctx.Done()
		return ctx.Err()
	}), b.opts(lambdaidem.WithAtMostOnce(), lambdaidem.WithDeadLetterSink(b.sink))...)
	ctx, cancel := w.ctx(30 * time.Second)
	defer cancel()
	done := make(chan events.SQSEventResponse, 1)
	go func() { resp, _ := h(ctx, batch(msg("m1", "pay 10"))); done <- resp }()
	<-entered
	w.advance(30*time.Second - lambdaidem.DefaultDeadlineMargin)
	wantFailed(t, <-done)
	if got := b.sink.reasons(); len(got) != 1 || got[0] != lambdaidem.ReasonOutcomeUnknown {
		t.Fatalf("dead letters %v, want [outcome_unknown]", got)
	}
	if r := b.record(t, "m1"); r.Status != lambdaidem.StatusDeadLettered || r.DeadLetterReason != lambdaidem.ReasonOutcomeUnknown {
		t.Fatalf("record %s/%s, want DEAD_LETTERED/outcome_unknown", r.Status, r.DeadLetterReason)
	}
	// Without a sink the record stays IN_PROGRESS (never FAILED) and the
	// message is reported failed.
	b2 := setup(t)
	entered2 := make(chan struct{})
	h2 := lambdaidem.SQS(b2.store, func(ctx context.Context, _ events.SQSMessage) error {
		close(entered2)
		<-ctx.Done()
		return ctx.Err()
	}, b2.opts(lambdaidem.WithAtMostOnce())...)
	ctx2, cancel2 := w.ctx(30 * time.Second)
	defer cancel2()
	go func() { resp, _ := h2(ctx2, batch(msg("m2", "pay 10"))); done <- resp }()
	<-entered2
	w.advance(30*time.Second - lambdaidem.DefaultDeadlineMargin)
	wantFailed(t, <-done, "m2")
	if r := b2.record(t, "m2"); r.Status != lambdaidem.StatusInProgress {
		t.Fatalf("record %s, want IN_PROGRESS: a FAILED record lets a retry run the payment again", r.Status)
	}
}

func TestWrapAtMostOnceDeadlineCancelIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := newSimWorld()
	entered := make(chan struct{})
	var runs int
	f := lambdaidem.Wrap(b.store, func(ctx context.Context, id string) (string, error) {
		runs++
		close(entered)
		<-ctx.Done()
		return "", ctx.Err()
	}, b.opts(lambdaidem.WithAtMostOnce(), lambdaidem.WithWrapKey(func(id string) (string, error) { return id, nil }))...)
	ctx, cancel := w.ctx(30 * time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { _, err := f(ctx, "pay-1"); errc <- err }()
	<-entered
	w.advance(30*time.Second - lambdaidem.DefaultDeadlineMargin)
	if err := <-errc; !errors.Is(err, lambdaidem.ErrOutcomeUnknown) {
		t.Fatalf("got %v, want ErrOutcomeUnknown", err)
	}
	if _, err := f(context.Background(), "pay-1"); !errors.Is(err, lambdaidem.ErrOutcomeUnknown) || runs != 1 {
		t.Fatalf("repeat: %v after %d runs, want ErrOutcomeUnknown after 1", err, runs)
	}
}

// A retention for unfinished records shorter than the lease is raised, so
// a held record is never forgotten and claimed afresh by another instance;
// a heartbeat's extensions carry the expiry along.
func TestUnfinishedRecordOutlivesItsLease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := newSimWorld()
	entered, release := make(chan struct{}), make(chan struct{})
	opts := []lambdaidem.Option{lambdaidem.WithLease(time.Minute), lambdaidem.WithUnfinishedRetention(10 * time.Second), lambdaidem.WithHeartbeat(10 * time.Second)}
	h := lambdaidem.SQS(b.store, b.counting(func(context.Context, events.SQSMessage) error {
		close(entered)
		<-release
		return nil
	}), b.opts(opts...)...)
	ctx, cancel := w.ctx(0)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); _, _ = h(ctx, batch(msg("m1", "x"))) }()
	<-entered
	rec, err := b.store.Get(context.Background(), lambdaidem.GetRequest{Namespace: ns, Key: "m1", Now: w.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if !rec.ExpiresAt.After(rec.LeaseUntil.Add(lambdaidem.DefaultGrace)) {
		t.Fatalf("record expires %v, before its lease ends (%v) plus the grace", rec.ExpiresAt, rec.LeaseUntil)
	}
	w.advance(50 * time.Second) // five extensions
	rec, err = b.store.Get(context.Background(), lambdaidem.GetRequest{Namespace: ns, Key: "m1", Now: w.Now()})
	if err != nil {
		t.Fatalf("the record was forgotten while its lease was being extended: %v", err)
	}
	if !rec.ExpiresAt.After(rec.LeaseUntil.Add(lambdaidem.DefaultGrace)) {
		t.Fatalf("after extensions the record expires %v, before its lease ends (%v) plus the grace", rec.ExpiresAt, rec.LeaseUntil)
	}
	// Another instance is turned away.
	other := lambdaidem.SQS(b.store, b.counting(ok), b.opts(opts...)...)
	octx, ocancel := w.ctx(0)
	defer ocancel()
	resp, _ := other(octx, batch(redelivered(msg("m1", "x"), 2)))
	wantFailed(t, resp, "m1")
	close(release)
	<-done
	if n := b.calls.get("m1"); n != 1 {
		t.Fatalf("handler ran %d times while one lease was held", n)
	}
}

// No claim is started without time for its round trip beyond the margin.
func TestNoClaimWithoutABudgetForItsRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := newSimWorld()
	h := lambdaidem.SQS(b.store, b.counting(ok), b.opts(lambdaidem.WithDeadlineMargin(100*time.Millisecond))...)
	ctx, cancel := w.ctx(200 * time.Millisecond)
	defer cancel()
	resp, _ := h(ctx, batch(msg("m1", "x")))
	wantFailed(t, resp, "m1")
	if _, err := b.store.Get(context.Background(), lambdaidem.GetRequest{Namespace: ns, Key: "m1", Now: w.Now()}); !errors.Is(err, lambdaidem.ErrNotFound) {
		t.Fatalf("claimed with 100ms left beyond the margin: %v", err)
	}
}

// slowStore takes d of the world's time per Complete and answers
// unavailable, as a DynamoDB whose every attempt times out.
type slowStore struct {
	lambdaidem.Store
	w     *simWorld
	d     time.Duration
	mu    sync.Mutex
	tries []time.Time // when each try ended
}

func (s *slowStore) Complete(context.Context, lambdaidem.CompleteRequest) error {
	s.w.advance(s.d)
	s.mu.Lock()
	s.tries = append(s.tries, s.w.Now())
	s.mu.Unlock()
	return lambdaidem.ErrStoreUnavailable
}

// The completion's retries stop while the time left cannot hold another
// try as slow as the last, instead of starting one the deadline cuts off.
func TestCompletionRetriesFitBeforeTheDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := newSimWorld()
	w.instantBelow = time.Second
	s := &slowStore{Store: b.store, w: w, d: 1500 * time.Millisecond}
	h := lambdaidem.SQS(s, func(ctx context.Context, _ events.SQSMessage) error {
		w.advance(30*time.Second - lambdaidem.DefaultDeadlineMargin) // work until the margin
		return nil
	}, b.opts()...)
	ctx, cancel := w.ctx(30 * time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	_, _ = h(ctx, batch(msg("m1", "x")))
	if len(s.tries) != 2 {
		t.Errorf("%d tries, want 2 (the third cannot finish before the deadline)", len(s.tries))
	}
	for i, end := range s.tries {
		if end.After(deadline) {
			t.Errorf("try %d ended %v after the deadline", i+1, end.Sub(deadline))
		}
	}
}

// In at-most-once mode a handler that panics may have had its effect before
// the panic: it is dead-lettered as outcome unknown and never runs again,
// as Wrap does with a panicking function.
func TestAtMostOncePanicIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	runs := 0
	h := lambdaidem.SQS(b.store, func(context.Context, events.SQSMessage) error {
		runs++
		panic("charged, then crashed")
	}, b.opts(lambdaidem.WithAtMostOnce(), lambdaidem.WithDeadLetterSink(b.sink))...)
	for range 2 {
		resp, _ := h(context.Background(), batch(msg("m1", "pay 10")))
		wantFailed(t, resp)
	}
	if runs != 1 {
		t.Fatalf("handler ran %d times, want 1", runs)
	}
	if got := b.sink.reasons(); len(got) != 1 || got[0] != lambdaidem.ReasonOutcomeUnknown {
		t.Fatalf("dead letters %v, want [outcome_unknown]", got)
	}
	if r := b.record(t, "m1"); r.Status != lambdaidem.StatusDeadLettered || r.DeadLetterReason != lambdaidem.ReasonOutcomeUnknown {
		t.Fatalf("record %s/%s, want DEAD_LETTERED/outcome_unknown", r.Status, r.DeadLetterReason)
	}
}
