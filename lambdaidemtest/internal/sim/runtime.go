package sim

import (
	"context"
	"time"

	"github.com/lambdaidem/go-lambdaidem/internal/seam"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// Clock returns the world as the decorator's clock (lambdaidem.WithClock):
// the world's time; timers owned by the process of the task that arms them
// (so they die with it), whose callbacks run as tasks of that process and
// may park (a heartbeat's store call); sleeps that park the running task;
// the world's randomness; and a batch's groups run as tasks of the
// invocation, in a seeded order. It is the same engine code as production
// that runs on it: only these primitives differ.
func (w *World) Clock() lambdaidem.Clock { return worldClock{w: w} }

// worldClock is the world's seam.Runtime.
type worldClock struct {
	seam.Sealed
	w *World
}

func (r worldClock) Now() time.Time { return r.w.now }

func (r worldClock) AfterFunc(d time.Duration, f func()) seam.Timer {
	w := r.w
	owner := w.owner()
	return w.At(d, owner, func() { w.Spawn("timer", owner, f) })
}

// Sleep parks the running task for d, or until ctx's deadline if that
// comes first.
func (r worldClock) Sleep(ctx context.Context, d time.Duration) bool {
	w := r.w
	if dl, ok := ctx.Deadline(); ok {
		if rem := dl.Sub(w.now); rem < d {
			w.Sleep(max(rem, 0))
			return false
		}
	}
	w.Sleep(d)
	return ctx.Err() == nil
}

func (r worldClock) Int64N(n int64) int64 { return r.w.rng.Int64N(n) }

// Each runs f(0..n-1) on up to limit tasks of the running task's process
// (the running task is one of them), taking the indices in a seeded
// order, and returns when all have returned. The tasks interleave wherever
// they park (a store's latency, a handler's work), as goroutines would.
func (r worldClock) Each(n, limit int, f func(i int)) {
	w := r.w
	if n <= 1 || limit <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	order := w.rng.Perm(n)
	next := 0
	work := func() {
		for next < n {
			i := order[next]
			next++
			f(i)
		}
	}
	me, owner := w.cur, w.owner()
	others, waiting := min(limit, n)-1, false
	for range others {
		w.Spawn("group", owner, func() {
			defer func() {
				// Wake the caller only where it waits for the others, never
				// out of a park of its own (a store's latency).
				if others--; others == 0 && waiting {
					w.Ready(me)
				}
			}()
			work()
		})
	}
	work()
	waiting = true
	for others > 0 {
		w.Park()
	}
}

// owner is the process of the running task (nil in the scheduler).
func (w *World) owner() *Process {
	if w.cur == nil {
		return nil
	}
	return w.cur.owner
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
// deadline (world time). p is where the decorator's timers and tasks live:
// they run as p's and die with it.
func (w *World) InvocationContext(p *Process, deadline time.Time) context.Context {
	return deadlineCtx{Context: context.Background(), dl: deadline}
}
