// Package seam lets a test world replace the decorator's clock, timers,
// randomness and scheduling for one invocation. Production code never sets
// a Runtime: From returns nil and the decorator uses real time.
package seam

import (
	"context"
	"sync"
	"time"
)

// Runtime replaces the engine's clock, timers, randomness and scheduling for
// one invocation. Every field must be set except Order.
type Runtime struct {
	// Now is the current time of the world the invocation runs in.
	Now func() time.Time
	// AfterFunc fires f after d of Runtime time and returns a function that
	// stops the timer (true if it stopped it before it fired). f may be
	// called on any goroutine, including the one that advances time.
	AfterFunc func(d time.Duration, f func()) (stop func() bool)
	// Int64N returns a number in [0,n), for jitter.
	Int64N func(n int64) int64
	// Order, when set, runs the groups of one SQS batch that would run
	// concurrently one at a time, in the order it returns (a permutation of
	// 0..n-1). Groups holding redelivered records still run after them, in
	// batch order. With a Runtime and no Order, groups run one at a time in
	// batch order: a Runtime never gets goroutines.
	Order func(n int) []int
	// Sleep, when set, is how Sleep waits with this Runtime: a
	// single-threaded world parks the caller in its own scheduler instead
	// of letting it block on a channel only another goroutine could close.
	// It reports whether the full time passed (false once ctx ended).
	Sleep func(ctx context.Context, d time.Duration) bool
}

type key struct{}

// With returns ctx carrying rt.
func With(ctx context.Context, rt *Runtime) context.Context {
	return context.WithValue(ctx, key{}, rt)
}

// From returns the Runtime ctx carries, or nil (always, in production).
func From(ctx context.Context) *Runtime {
	rt, _ := ctx.Value(key{}).(*Runtime)
	return rt
}

// Clock is what a DeadlineContext measures time with: the Runtime's clock
// and timers, or real ones.
type Clock struct {
	Now       func() time.Time
	AfterFunc func(d time.Duration, f func()) (stop func() bool)
	// Sleep, when set, replaces Sleep's channel wait (see Runtime.Sleep).
	Sleep func(ctx context.Context, d time.Duration) bool
}

// RealClock measures with the wall clock and real timers.
var RealClock = Clock{
	Now: time.Now,
	AfterFunc: func(d time.Duration, f func()) func() bool {
		return time.AfterFunc(d, f).Stop
	},
}

// ClockOf returns the clock of rt, or RealClock when rt is nil.
func ClockOf(rt *Runtime) Clock {
	if rt == nil {
		return RealClock
	}
	return Clock{Now: rt.Now, AfterFunc: rt.AfterFunc, Sleep: rt.Sleep}
}

// DeadlineContext is a context that ends at a deadline measured by a Clock,
// and whose deadline can be moved (a lease's end, extended by a heartbeat).
// When its timer fires, Err reports context.DeadlineExceeded, as a context
// from context.WithDeadline would.
type DeadlineContext struct {
	context.Context // a cancelable child of the parent
	cancel          context.CancelCauseFunc
	clock           Clock

	mu       sync.Mutex
	deadline time.Time
	stop     func() bool
	ended    bool
}

// WithDeadline returns a context that ends at deadline by clock, or when
// parent ends, or when the returned cancel is called.
func WithDeadline(parent context.Context, clock Clock, deadline time.Time) (*DeadlineContext, context.CancelFunc) {
	inner, cancel := context.WithCancelCause(parent)
	// The deadline is kept even when the parent has ended already (Move
	// then does nothing): Deadline never reports the zero time.
	c := &DeadlineContext{Context: inner, cancel: cancel, clock: clock, deadline: deadline}
	c.Move(deadline)
	return c, func() {
		c.mu.Lock()
		c.ended = true
		if c.stop != nil {
			c.stop()
		}
		c.mu.Unlock()
		cancel(context.Canceled)
	}
}

// WithTimeout is WithDeadline at clock.Now()+d.
func WithTimeout(parent context.Context, clock Clock, d time.Duration) (*DeadlineContext, context.CancelFunc) {
	return WithDeadline(parent, clock, clock.Now().Add(d))
}

// Move sets a new deadline, earlier or later. It reports false, and does
// nothing, once the context has ended.
func (c *DeadlineContext) Move(deadline time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended || c.Context.Err() != nil {
		return false
	}
	if c.stop != nil {
		c.stop()
	}
	c.deadline = deadline
	d := deadline.Sub(c.clock.Now())
	if d <= 0 {
		c.ended = true
		c.stop = nil
		c.cancel(context.DeadlineExceeded)
		return true
	}
	var fire func()
	fire = func() {
		c.mu.Lock()
		// A timer stopped too late still runs: only the current one counts.
		if c.ended || !c.deadline.Equal(deadline) {
			c.mu.Unlock()
			return
		}
		if rem := deadline.Sub(c.clock.Now()); rem > 0 {
			// Fired early by the clock's reckoning: wait out the rest.
			c.stop = c.clock.AfterFunc(rem, fire)
			c.mu.Unlock()
			return
		}
		c.ended = true
		c.mu.Unlock()
		c.cancel(context.DeadlineExceeded)
	}
	c.stop = c.clock.AfterFunc(d, fire)
	return true
}

// Deadline returns the deadline by the context's clock, or the parent's if
// that is earlier.
func (c *DeadlineContext) Deadline() (time.Time, bool) {
	c.mu.Lock()
	dl := c.deadline
	c.mu.Unlock()
	if pdl, ok := c.Context.Deadline(); ok && pdl.Before(dl) {
		return pdl, true
	}
	return dl, true
}

// Err reports context.DeadlineExceeded once the deadline passed, else the
// parent's or the cancel's error.
func (c *DeadlineContext) Err() error {
	err := c.Context.Err()
	if err != nil && context.Cause(c.Context) == context.DeadlineExceeded {
		return context.DeadlineExceeded
	}
	return err
}

// Sleep waits d by clock, or until ctx ends; it reports whether the full
// time passed. With a Runtime the caller blocks until the Runtime fires the
// timer.
func Sleep(ctx context.Context, clock Clock, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	if clock.Sleep != nil {
		return clock.Sleep(ctx, d)
	}
	done := make(chan struct{})
	stop := clock.AfterFunc(d, func() { close(done) })
	select {
	case <-done:
		return true
	case <-ctx.Done():
		stop()
		return false
	}
}
