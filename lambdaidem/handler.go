package lambdaidem

import (
	"context"
	"runtime/debug"
	"time"

	"github.com/lambdaidem/go-lambdaidem/internal/mutant"
	"github.com/lambdaidem/go-lambdaidem/internal/seam"
)

// runHandler runs f under the lease: its context ends a margin before the
// lease ends or before the deadline, whichever is first, so recording the
// outcome still fits; it carries the record state; and with a heartbeat the
// lease is extended while f runs, each granted extension moving the
// context's end with it. An extension that is not granted never moves it,
// so the handler never runs past a lease it still holds. A panic becomes a
// PanicError with its stack.
func (e *engine) runHandler(ctx context.Context, t timing, st *recordState, now time.Time, f func(context.Context) error) error {
	lease := st.lease
	st.accept = func(w any) error { return e.acceptWrite(lease, w) }
	if t.shared != nil && e.c.heartbeat <= 0 && !lease.Until.Before(t.deadline) {
		// The lease lasts as long as the invocation: the invocation's
		// handler context bounds this record too. An observed record's
		// context that only adds values to it (same Done channel) is used
		// instead, so the handler runs under what its observer returned.
		hctx := t.shared.handler
		sharedOnly := mutant.On("observed-handler-shares-invocation-context") // the bug: the handler runs outside its record's observed context
		if e.observed() && ctx.Done() == hctx.Done() && !sharedOnly {
			hctx = ctx
		}
		return st.ran(run(withRecordState(hctx, st), f), hctx)
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
	if mutant.On("heartbeat-handler-outlives-lease") {
		// The bug: the context runs to the invocation's deadline, whether
		// or not the heartbeat's extensions are granted.
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

// run calls the handler, turning a panic into a PanicError with its stack.
func run(ctx context.Context, f func(context.Context) error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return f(ctx)
}
