package lambdaidem

import (
	"context"
	"time"

	"github.com/lambdaidem/go-lambdaidem/internal/seam"
)

// timing is one invocation's view of time: when it must stop claiming and
// how long leases last, measured, like every timer and wait of the
// invocation, by the engine's one Runtime (the real clock, WithClock's, or
// a simulated world's). The code below never asks which.
type timing struct {
	deadline time.Time // zero: no deadline
	margin   time.Duration
	// shared holds contexts every record of an SQS invocation can use,
	// so a record costs no timers of its own; nil for Wrap.
	shared *sharedContexts
	rt     seam.Runtime
}

// now is the invocation's current time.
func (t timing) now() time.Time { return t.rt.Now() }

// withDeadline returns a context ending at dl by the clock.
func (t timing) withDeadline(ctx context.Context, dl time.Time) (context.Context, context.CancelFunc) {
	c := seam.WithDeadline(ctx, t.rt, dl)
	return c, c.Cancel
}

// withTimeout returns a context ending d from now by the clock.
func (t timing) withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	c := seam.WithTimeout(ctx, t.rt, d)
	return c, c.Cancel
}

// int64N returns a random number in [0,n).
func (t timing) int64N(n int64) int64 { return t.rt.Int64N(n) }

// sharedContexts are made once per invocation that has a deadline: the
// handlers' context (ending a margin before it) and the detached context
// outcomes are recorded on.
type sharedContexts struct {
	handler  context.Context
	detached context.Context
}

// share makes the invocation's shared contexts; call the returned function
// when the invocation ends.
func (e *engine) share(ctx context.Context, t *timing) func() {
	if t.deadline.IsZero() {
		return func() {}
	}
	hctx := seam.WithDeadline(ctx, t.rt, t.deadline.Add(-t.margin))
	dctx := seam.WithDeadline(context.WithoutCancel(ctx), t.rt, t.detachedUntil())
	t.shared = &sharedContexts{handler: hctx, detached: dctx}
	return func() { hctx.Cancel(); dctx.Cancel() }
}

// timing reads the invocation's deadline (a time of the engine's clock)
// and settles the margin kept before it.
func (e *engine) timing(ctx context.Context) timing {
	t := timing{margin: e.c.margin, rt: e.c.rt}
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

// detachedUntil is when a context recording an outcome ends: the
// invocation's deadline, but never sooner than a floor from now.
func (t timing) detachedUntil() time.Time {
	floor := t.now().Add(max(t.margin, time.Second))
	if t.deadline.After(floor) {
		return t.deadline
	}
	return floor
}

// detached returns a context for recording an outcome that survives the
// invocation's cancellation but not its deadline: the invocation's shared
// one, or, for an observed record, one of its own carrying the values of
// the context its observer returned.
func (e *engine) detached(ctx context.Context, t timing) (context.Context, context.CancelFunc) {
	if t.shared != nil && !e.observed() {
		return t.shared.detached, func() {}
	}
	return t.withDeadline(context.WithoutCancel(ctx), t.detachedUntil())
}
