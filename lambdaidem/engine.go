package lambdaidem

import (
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"time"
)

// engine is what SQS and Wrap share: the store, the options, the clock
// arithmetic and the retry-safe recording of outcomes.
type engine struct {
	store Store
	c     *config
	cache *completedCache
}

func newEngine(store Store, c *config) *engine {
	if store == nil {
		panic("lambdaidem: nil Store")
	}
	return &engine{store: store, c: c, cache: newCompletedCache(c.cacheSize, c.cacheTTL)}
}

// timing is one invocation's view of time: when it must stop claiming and
// how long leases last. Deadlines of contexts are real time; the decisions
// use the configured clock, so tests can steer them.
type timing struct {
	deadline time.Time // zero: no deadline
	margin   time.Duration
	// shared holds contexts every record of an SQS invocation can use,
	// so a record costs no timers of its own; nil for Wrap.
	shared *sharedContexts
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
	hctx, hcancel := context.WithDeadline(ctx, t.deadline.Add(-t.margin))
	dctx, dcancel := e.detached(ctx, *t)
	t.shared = &sharedContexts{handler: hctx, detached: dctx}
	return func() { hcancel(); dcancel() }
}

func (e *engine) timing(ctx context.Context) timing {
	t := timing{margin: e.c.margin}
	dl, ok := ctx.Deadline()
	if !ok {
		if !e.c.marginSet && e.c.leaseNoDeadline < 4*t.margin {
			t.margin = e.c.leaseNoDeadline / 4
		}
		return t
	}
	t.deadline = dl
	if rem := dl.Sub(e.c.now()); !e.c.marginSet && rem < 4*t.margin {
		t.margin = max(rem/4, 0)
	}
	return t
}

// canClaim reports whether there is time to claim and run a record.
func (t timing) canClaim(now time.Time) bool {
	return t.deadline.IsZero() || t.deadline.Sub(now) > t.margin
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
// deadline (or before the lease ends, with no deadline and no heartbeat), so
// recording the outcome still fits; it carries the record state; and with a
// heartbeat the lease is extended while f runs. A panic becomes a
// PanicError with its stack.
func (e *engine) runHandler(ctx context.Context, t timing, st *recordState, now time.Time, f func(context.Context) error) error {
	lease := st.lease
	if t.shared != nil && e.c.heartbeat <= 0 && !lease.Until.Before(t.deadline) {
		// The lease lasts as long as the invocation: the invocation's
		// handler context bounds this record too.
		return run(withRecordState(t.shared.handler, st), f)
	}
	budget := time.Duration(-1)
	if e.c.heartbeat <= 0 {
		budget = lease.Until.Sub(now) - t.margin
	}
	if !t.deadline.IsZero() {
		rem := t.deadline.Sub(now) - t.margin
		if budget < 0 || rem < budget {
			budget = rem
		}
	}
	hctx, cancelCause := context.WithCancelCause(withRecordState(ctx, st))
	defer cancelCause(nil)
	if budget >= 0 {
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeout(hctx, max(budget, 0))
		defer cancel()
	}
	if e.c.heartbeat > 0 {
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			e.heartbeat(ctx, lease, lease.Until.Sub(now), stop, cancelCause)
		}()
		defer func() { close(stop); <-done }()
	}
	return run(hctx, f)
}

// heartbeat extends the lease until stop is closed. A refused extension
// cancels the handler with ErrLeaseLost; a store error is retried at the
// next tick (the lease may still be long enough).
func (e *engine) heartbeat(ctx context.Context, lease Lease, length time.Duration, stop <-chan struct{}, cancel context.CancelCauseFunc) {
	tick, stopTick := e.c.ticker(e.c.heartbeat)
	defer stopTick()
	ctx = context.WithoutCancel(ctx)
	for {
		select {
		case <-stop:
			return
		case <-tick:
		}
		now := e.c.now()
		rctx, rcancel := context.WithTimeout(ctx, max(e.c.heartbeat, time.Second))
		err := e.store.Extend(rctx, ExtendRequest{Lease: lease, Now: now, LeaseUntil: now.Add(length)})
		rcancel()
		switch {
		case errors.Is(err, ErrLeaseLost):
			e.log(ctx, slog.LevelWarn, "lambdaidem: lease lost while the handler runs",
				slog.String("key", lease.Key), slog.Int("attempt", lease.Attempt))
			cancel(err)
			return
		case err != nil:
			e.log(ctx, slog.LevelWarn, "lambdaidem: could not extend lease",
				slog.String("key", lease.Key), slog.Any("error", err))
		}
	}
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
		return context.WithTimeout(d, floor)
	}
	if rem := t.deadline.Sub(e.c.now()); rem > floor {
		floor = rem
	}
	return context.WithTimeout(d, floor)
}

// retryStore retries a store write that failed as unavailable, within ctx.
// The Store is retry-safe: a write that applied but whose answer was lost
// is recognised as ours on the retry.
func retryStore(ctx context.Context, r *RecordReport, write func(ctx context.Context) error) error {
	var err error
	for attempt := 0; attempt < 4; attempt++ {
		r.StoreCalls++
		err = write(ctx)
		if err != nil && !errors.Is(err, ErrLeaseLost) {
			r.StoreErrors++
		}
		if err == nil || !errors.Is(err, ErrStoreUnavailable) {
			return err
		}
		t := time.NewTimer(time.Duration(25<<attempt) * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
	return err
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
