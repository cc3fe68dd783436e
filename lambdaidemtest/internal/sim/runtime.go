package sim

import (
	"context"
	"time"

	"github.com/lambdaidem/go-lambdaidem/internal/seam"
)

// Runtime returns the seam the decorator runs on inside p: the world's
// clock, timers owned by p (so they die with it), the world's randomness,
// a seeded order for a batch's groups, and sleeps that park the running
// task. Timer callbacks run as tasks of p, so they may park too (a
// heartbeat's store call).
func (w *World) Runtime(p *Process) *seam.Runtime {
	return &seam.Runtime{
		Now: w.Now,
		AfterFunc: func(d time.Duration, f func()) func() bool {
			tm := w.At(d, p, func() { w.Spawn("timer", p, f) })
			return tm.Stop
		},
		Int64N: func(n int64) int64 { return w.rng.Int64N(n) },
		Order:  func(n int) []int { return w.rng.Perm(n) },
		Sleep:  w.sleepCtx,
	}
}

// WithRuntime returns ctx carrying the world's Runtime for p.
func (w *World) WithRuntime(ctx context.Context, p *Process) context.Context {
	return seam.With(ctx, w.Runtime(p))
}

// sleepCtx parks the running task for d, or until ctx's deadline if that
// comes first.
func (w *World) sleepCtx(ctx context.Context, d time.Duration) bool {
	if dl, ok := ctx.Deadline(); ok {
		if rem := dl.Sub(w.now); rem < d {
			w.Sleep(max(rem, 0))
			return false
		}
	}
	w.Sleep(d)
	return ctx.Err() == nil
}

// deadlineCtx is an invocation's context: its deadline is in world time and
// it never ends by itself (the world kills the process at the deadline, as
// Lambda does).
type deadlineCtx struct {
	context.Context
	dl time.Time
}

func (c deadlineCtx) Deadline() (time.Time, bool) { return c.dl, true }

// InvocationContext returns a context for an invocation of p that ends at
// deadline (world time), carrying the Runtime.
func (w *World) InvocationContext(p *Process, deadline time.Time) context.Context {
	return w.WithRuntime(deadlineCtx{Context: context.Background(), dl: deadline}, p)
}
