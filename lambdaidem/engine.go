package lambdaidem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lambdaidem/go-lambdaidem/internal/mutant"
	"github.com/lambdaidem/go-lambdaidem/internal/seam"
)

// engine is what SQS and Wrap share: the store, the options, the clock
// arithmetic and the retry-safe recording of outcomes.
type engine struct {
	store      Store
	c          *config
	cache      *completedCache
	unrecorded *unrecordedCompletions
}

func newEngine(store Store, c *config) *engine {
	if store == nil {
		panic("lambdaidem: nil Store")
	}
	return &engine{store: store, c: c, cache: newCompletedCache(c.cacheSize, c.cacheTTL), unrecorded: newUnrecorded()}
}

// maxUnrecorded bounds the completions a container remembers it could not
// write; beyond it the oldest are forgotten (their keys then behave as
// after a crash).
const maxUnrecorded = 1024

// unrecordedCompletions remembers, per key, a completion this container
// could not write although the handler succeeded, so a redelivery of the
// key to this container writes it (fenced by the lease token, so it
// applies only if nobody took the key over) instead of running the
// handler again.
type unrecordedCompletions struct {
	n     atomic.Int32 // len(items), read without the lock
	mu    sync.Mutex
	order []string
	items map[string]unrecordedCompletion
}

type unrecordedCompletion struct {
	hash string
	req  CompleteRequest
}

func newUnrecorded() *unrecordedCompletions {
	return &unrecordedCompletions{items: map[string]unrecordedCompletion{}}
}

func (u *unrecordedCompletions) add(key, hash string, req CompleteRequest) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.items[key]; !ok {
		u.order = append(u.order, key)
	}
	u.items[key] = unrecordedCompletion{hash: hash, req: req}
	for len(u.order) > maxUnrecorded {
		delete(u.items, u.order[0])
		u.order = u.order[1:]
	}
	u.n.Store(int32(len(u.items)))
}

// get returns the remembered completion of key with this payload hash.
func (u *unrecordedCompletions) get(key, hash string) (CompleteRequest, bool) {
	if u.n.Load() == 0 {
		return CompleteRequest{}, false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	it, ok := u.items[key]
	return it.req, ok && it.hash == hash
}

func (u *unrecordedCompletions) drop(key string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.items[key]; !ok {
		return
	}
	delete(u.items, key)
	u.n.Store(int32(len(u.items)))
	for i, k := range u.order {
		if k == key {
			u.order = append(u.order[:i], u.order[i+1:]...)
			break
		}
	}
}

// timing is one invocation's view of time: when it must stop claiming and
// how long leases last. Deadlines of contexts are real time; the decisions
// use the configured clock, so tests can steer them. With a seam.Runtime
// (a simulated world) every reading, timer and wait is the Runtime's.
type timing struct {
	deadline time.Time // zero: no deadline
	margin   time.Duration
	// shared holds contexts every record of an SQS invocation can use,
	// so a record costs no timers of its own; nil for Wrap.
	shared *sharedContexts
	// rt is the invocation's Runtime; nil in production.
	rt *seam.Runtime
	// clock is the configured clock (WithClock), used without a Runtime.
	clock func() time.Time
}

// now is the invocation's current time for decisions.
func (t timing) now() time.Time {
	if t.rt != nil {
		return t.rt.Now()
	}
	return t.clock()
}

// withDeadline returns a context ending at dl by the decision clock.
func (t timing) withDeadline(ctx context.Context, dl time.Time) (context.Context, context.CancelFunc) {
	if t.rt != nil {
		return seam.WithDeadline(ctx, seam.ClockOf(t.rt), dl)
	}
	return context.WithDeadline(ctx, dl)
}

// withTimeout returns a context ending d from now by the decision clock's
// timers (real ones without a Runtime).
func (t timing) withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if t.rt != nil {
		return seam.WithTimeout(ctx, seam.ClockOf(t.rt), d)
	}
	return context.WithTimeout(ctx, d)
}

// int64N returns a random number in [0,n).
func (t timing) int64N(n int64) int64 {
	if t.rt != nil {
		return t.rt.Int64N(n)
	}
	return rand.Int64N(n)
}

// sharedContexts are made once per invocation that has a deadline: the
// handlers' context (ending a margin before it) and the detached context
// outcomes are recorded on.
type sharedContexts struct {
	handler  context.Context
	detached context.Context
}

// share makes the invocation's shared contexts; call the returned function
// when the invocation ends.
func (e *engine) share(ctx context.Context, t *timing) context.CancelFunc {
	if t.deadline.IsZero() {
		return func() {}
	}
	hctx, hcancel := t.withDeadline(ctx, t.deadline.Add(-t.margin))
	dctx, dcancel := e.detached(ctx, *t)
	t.shared = &sharedContexts{handler: hctx, detached: dctx}
	return func() { hcancel(); dcancel() }
}

func (e *engine) timing(ctx context.Context) timing {
	t := timing{margin: e.c.margin, rt: seam.From(ctx), clock: e.c.now}
	dl, ok := ctx.Deadline()
	if !ok {
		if !e.c.marginSet && e.c.leaseNoDeadline < 4*t.margin {
			t.margin = e.c.leaseNoDeadline / 4
		}
		return t
	}
	t.deadline = dl
	if rem := dl.Sub(t.now()); !e.c.marginSet && rem < 4*t.margin {
		t.margin = max(rem/4, 0)
	}
	return t
}

// wall reads the clock a handler's duration is measured with: the real
// one, or the Runtime's.
func (e *engine) wall(t timing) time.Time {
	if t.rt != nil {
		return t.rt.Now()
	}
	return time.Now()
}

// nowAt returns the decision time for a wall reading w (see wall).
func (e *engine) nowAt(t timing, w time.Time) time.Time {
	if t.rt != nil {
		return w
	}
	return e.c.nowAt(w)
}

// minClaimBudget is the least time beyond the margin a claim needs: a
// claim cut off by the deadline may have applied in the store with its
// answer lost, leaving the record IN_PROGRESS (an attempt counted) until
// its lease and the grace run out.
const minClaimBudget = 250 * time.Millisecond

// canClaim reports whether there is time to claim and run a record.
func (t timing) canClaim(now time.Time) bool {
	return t.deadline.IsZero() || t.deadline.Sub(now) > t.margin+minClaimBudget
}

// leaseUntil is the end of a lease claimed at now: the invocation's
// deadline, capped; with no deadline, a fixed lease.
func (e *engine) leaseUntil(t timing, now time.Time) time.Time {
	if t.deadline.IsZero() {
		return now.Add(e.c.leaseNoDeadline)
	}
	return minTime(t.deadline, now.Add(e.c.maxLease))
}

// runHandler runs f under the lease: its context ends a margin before the
// lease ends or before the deadline, whichever is first, so recording the
// outcome still fits; it carries the record state; and with a heartbeat the
// lease is extended while f runs, each granted extension moving the
// context's end with it. An extension that is not granted never moves it,
// so the handler never runs past a lease it still holds. A panic becomes a
// PanicError with its stack.
func (e *engine) runHandler(ctx context.Context, t timing, st *recordState, now time.Time, f func(context.Context) error) error {
	lease := st.lease
	if t.shared != nil && e.c.heartbeat <= 0 && !lease.Until.Before(t.deadline) {
		// The lease lasts as long as the invocation: the invocation's
		// handler context bounds this record too.
		return st.ran(run(withRecordState(t.shared.handler, st), f), t.shared.handler)
	}
	length := lease.Until.Sub(now)
	lm := e.c.leaseMargin(t.margin, length)
	end := e.handlerEnd(t, lease.Until, lm)
	hctx, cancelCause := context.WithCancelCause(withRecordState(ctx, st))
	defer cancelCause(nil)
	if e.c.heartbeat <= 0 {
		var cancel context.CancelFunc
		hctx, cancel = t.withTimeout(hctx, max(end.Sub(now), 0))
		defer cancel()
		return st.ran(run(hctx, f), hctx)
	}
	// The deadline moves with each granted extension. Without a Runtime it
	// is measured by real timers, the configured clock giving the durations.
	toClock := func(at, now time.Time) time.Time {
		if t.rt != nil {
			return at
		}
		return time.Now().Add(at.Sub(now))
	}
	if mutant.On("heartbeat-unbounded") {
		// issue 11 bug 4: the context runs to the invocation's deadline,
		// whether or not the heartbeat's extensions are granted.
		end = t.deadline.Add(-t.margin)
	}
	mctx, cancel := seam.WithDeadline(hctx, seam.ClockOf(t.rt), toClock(end, now))
	defer cancel()
	hb := &heartbeat{e: e, t: t, lease: lease, length: length, cancel: cancelCause, ctx: context.WithoutCancel(ctx),
		granted: func(now, until time.Time) { mctx.Move(toClock(e.handlerEnd(t, until, lm), now)) }}
	defer hb.start()()
	return st.ran(run(mctx, f), mctx)
}

// handlerEnd is when a handler's context ends for a lease ending at until:
// the lease margin before it, or the deadline margin before the
// invocation's deadline if that is sooner.
func (e *engine) handlerEnd(t timing, until time.Time, leaseMargin time.Duration) time.Time {
	end := until.Add(-leaseMargin)
	if !t.deadline.IsZero() {
		end = minTime(end, t.deadline.Add(-t.margin))
	}
	return end
}

// heartbeat extends the lease every interval while the handler runs. A
// refused extension cancels the handler with ErrLeaseLost; a store error is
// retried at the next tick (the lease may still be long enough).
type heartbeat struct {
	e      *engine
	t      timing
	ctx    context.Context
	lease  Lease
	length time.Duration
	cancel context.CancelCauseFunc
	// granted is told each extension the store accepted: written at now,
	// the lease now ends at until.
	granted func(now, until time.Time)

	mu      sync.Mutex
	stopped bool
	stopT   func() bool
}

// start begins the heartbeat and returns the function that stops it and
// waits for a tick in flight. Without a Runtime a goroutine ticks; with one,
// each tick is a Runtime timer that arms the next, so a single-threaded
// simulator can drive it.
func (hb *heartbeat) start() (stop func()) {
	if hb.t.rt != nil {
		hb.arm()
		return func() {
			hb.mu.Lock()
			hb.stopped = true
			if hb.stopT != nil {
				hb.stopT()
			}
			hb.mu.Unlock()
		}
	}
	done, quit := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick, stopTick := hb.e.c.ticker(hb.e.c.heartbeat)
		defer stopTick()
		for {
			select {
			case <-quit:
				return
			case <-tick:
			}
			if !hb.beat() {
				return
			}
		}
	}()
	return func() { close(quit); <-done }
}

// arm sets the Runtime timer of the next tick.
func (hb *heartbeat) arm() {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	if hb.stopped {
		return
	}
	hb.stopT = hb.t.rt.AfterFunc(hb.e.c.heartbeat, func() {
		hb.mu.Lock()
		stopped := hb.stopped
		hb.mu.Unlock()
		if !stopped && hb.beat() {
			hb.arm()
		}
	})
}

// beat writes one extension; it reports whether to keep beating.
func (hb *heartbeat) beat() bool {
	e := hb.e
	now := hb.t.now()
	rctx, rcancel := hb.t.withTimeout(hb.ctx, max(e.c.heartbeat, time.Second))
	until := now.Add(hb.length)
	// The record's expiry moves with the lease, so it is never forgotten
	// while held (unfinished retention exceeds the lease plus the grace).
	err := e.store.Extend(rctx, ExtendRequest{Lease: hb.lease, Now: now, LeaseUntil: until,
		ExpiresAt: e.retentionUntil(now, false)})
	rcancel()
	switch {
	case errors.Is(err, ErrLeaseLost):
		e.log(hb.ctx, slog.LevelWarn, "lambdaidem: lease lost while the handler runs",
			slog.String("key", hb.lease.Key), slog.Int("attempt", hb.lease.Attempt))
		hb.cancel(err)
		return false
	case err != nil:
		e.log(hb.ctx, slog.LevelWarn, "lambdaidem: could not extend lease",
			slog.String("key", hb.lease.Key), slog.Any("error", err))
	default:
		hb.granted(now, until)
	}
	return true
}

// detached returns a context for recording an outcome that survives the
// invocation's cancellation but not its deadline.
func (e *engine) detached(ctx context.Context, t timing) (context.Context, context.CancelFunc) {
	if t.shared != nil {
		return t.shared.detached, func() {}
	}
	d := context.WithoutCancel(ctx)
	floor := max(t.margin, time.Second)
	if t.deadline.IsZero() {
		return t.withTimeout(d, floor)
	}
	if rem := t.deadline.Sub(t.now()); rem > floor {
		floor = rem
	}
	return t.withTimeout(d, floor)
}

// retryStore retries a store write that failed as unavailable, within ctx.
// The Store is retry-safe: a write that applied but whose answer was lost
// is recognised as ours on the retry. A retry is started only while the
// time left in ctx covers the wait and a try as slow as the slowest so far,
// so the last try is not cut off by the deadline. The waits are the
// Runtime's when ctx carries one.
//
// A try that failed as unavailable may still apply later: a request held
// in the network lands after the client gave up on it. So when a later try
// is refused because a completion write's condition failed
// (ErrWriteRefused), that refusal only says the earlier try had not landed
// yet, not that it never will: retryStore then reports the write as
// unavailable (its outcome unknown), never as refused, and the caller keeps
// what it would keep for a write whose answer was lost. Other refusals
// stand: a lost lease fences the earlier try by the same token, and what
// can never apply (a result too large, a write the store cannot commit)
// could not have applied the first time either.
func retryStore(ctx context.Context, r *RecordReport, write func(ctx context.Context) error) error {
	err, unknown := retryStoreTries(ctx, r, write)
	if unknown && errors.Is(err, ErrWriteRefused) && !errors.Is(err, ErrLeaseLost) && !mutant.On("refusal-after-timeout") {
		return fmt.Errorf("%w: an earlier try's outcome is unknown and it may still apply; a later try was refused (%v)", ErrStoreUnavailable, err)
	}
	return err
}

// retryStoreTries is retryStore's loop; unknown reports whether a try
// before the last failed as unavailable.
func retryStoreTries(ctx context.Context, r *RecordReport, write func(ctx context.Context) error) (err error, unknown bool) {
	rt := seam.From(ctx)
	clock := time.Now
	if rt != nil {
		clock = rt.Now
	}
	var slowest time.Duration
	for attempt := 0; attempt < 4; attempt++ {
		r.StoreCalls++
		start := clock()
		err = write(ctx)
		slowest = max(slowest, clock().Sub(start))
		if err != nil && !errors.Is(err, ErrLeaseLost) {
			r.StoreErrors++
		}
		if err == nil || !errors.Is(err, ErrStoreUnavailable) || attempt == 3 {
			return err, unknown
		}
		unknown = true
		wait := time.Duration(25<<attempt) * time.Millisecond
		if dl, ok := ctx.Deadline(); ok && dl.Sub(clock()) < wait+slowest {
			return err, unknown
		}
		if rt != nil {
			if !seam.Sleep(ctx, seam.ClockOf(rt), wait) {
				return err, unknown
			}
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err, unknown
		case <-t.C:
		}
	}
	return err, unknown
}

// run calls the handler, turning a panic into a PanicError with its stack.
func run(ctx context.Context, f func(context.Context) error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return f(ctx)
}

func (e *engine) retentionUntil(now time.Time, finished bool) time.Time {
	if finished {
		return now.Add(e.c.retention)
	}
	return now.Add(e.c.unfinishedRetention)
}

// log writes one structured line if the level is enabled, so a quiet
// logger costs no allocations.
func (e *engine) log(ctx context.Context, level slog.Level, msg string, attrs ...slog.Attr) {
	if !e.c.logger.Enabled(ctx, level) {
		return
	}
	e.c.logger.LogAttrs(ctx, level, msg, attrs...)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
