package lambdaidem

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/lambdaidem/go-lambdaidem/internal/seam"
)

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

// detached returns a context for recording an outcome that survives the
// invocation's cancellation but not its deadline: the invocation's shared
// one, or, for an observed record, one of its own carrying the values of
// the context its observer returned.
func (e *engine) detached(ctx context.Context, t timing) (context.Context, context.CancelFunc) {
	if t.shared != nil && !e.observed() {
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
