// Package seam is what the decorator measures, waits and schedules with:
// a Clock (time and timers) and a Runtime (a Clock, waits on it,
// randomness, and work run side by side). Production runs on Real; a test
// clock (lambdaidem.WithClock) runs on OnClock's Runtime for that clock; a
// simulated world supplies a Runtime of its own. The decorator's code is
// the same on all of them.
package seam

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Timer is a timer a Clock armed; *time.Timer is one.
type Timer = interface{ Stop() bool }

// Clock is a source of time and timers.
type Clock interface {
	// Now is the clock's current time.
	Now() time.Time
	// AfterFunc calls f once d of the clock's time has passed, on a
	// goroutine (or simulated task) of the clock's choosing, never on the
	// caller's before AfterFunc returns.
	AfterFunc(d time.Duration, f func()) Timer
}

// Runtime is a Clock that also waits, draws random numbers and runs work
// side by side. Only this package and types embedding Sealed implement it.
type Runtime interface {
	Clock
	// Sleep waits d of the clock's time, or until ctx ends; it reports
	// whether the full time passed.
	Sleep(ctx context.Context, d time.Duration) bool
	// Int64N returns a number in [0,n).
	Int64N(n int64) int64
	// Each calls f(0) … f(n-1), at most limit at a time, in an order of
	// its choosing, and returns when every call has returned.
	Each(n, limit int, f func(i int))
	sealed()
}

// Sealed is embedded by a Runtime implemented outside this package (the
// simulator's), so that no Clock becomes a Runtime by accident.
type Sealed struct{}

func (Sealed) sealed() {}

// realClock is the wall clock and real timers.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Real is production's Runtime: the wall clock, real timers, math/rand
// and goroutines.
var Real Runtime = onClock{Clock: realClock{}}

// OnClock returns the Runtime for c: c itself if it is one; else c's time
// and timers, waits on c's timers, math/rand and goroutines. A nil c is the
// real clock.
func OnClock(c Clock) Runtime {
	switch c := c.(type) {
	case nil:
		return Real
	case Runtime:
		return c
	default:
		return onClock{Clock: c}
	}
}

// onClock is a Runtime on a Clock that knows only time and timers.
type onClock struct {
	Clock
	Sealed
}

func (r onClock) Sleep(ctx context.Context, d time.Duration) bool { return Sleep(ctx, r.Clock, d) }

func (onClock) Int64N(n int64) int64 { return rand.Int64N(n) }

// Each runs f(0) … f(n-1) on at most limit goroutines at once: the
// caller's and up to limit-1 helpers, each taking the next index until
// none is left, so the calls start in index order. With nothing to
// overlap it runs them in the caller's goroutine, in order. The helpers
// are kept between calls (see spawn): a batch after a batch reuses their
// goroutines, whose stacks have already grown to what the work needs,
// instead of growing a fresh goroutine's stack every time.
func (onClock) Each(n, limit int, f func(i int)) {
	if n <= 1 || limit <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	e := &each{n: int64(n), f: f}
	helpers := min(limit, n) - 1
	e.wg.Add(helpers)
	help := e.help
	for range helpers {
		spawn(help)
	}
	e.work()
	e.wg.Wait()
}

// each is one Each call's shared state.
type each struct {
	next atomic.Int64
	n    int64
	f    func(i int)
	wg   sync.WaitGroup
}

// work calls f for the next index until none is left.
func (e *each) work() {
	for {
		i := e.next.Add(1) - 1
		if i >= e.n {
			return
		}
		e.f(int(i))
	}
}

// help is a helper's share of the work.
func (e *each) help() {
	defer e.wg.Done()
	e.work()
}

// idle hands a job to a helper goroutine waiting for one.
var idle = make(chan func())

// helperIdle is how long a helper waits for another job before it ends:
// long enough for back-to-back batches to share helpers, short enough
// that a process which stops sending batches is soon left with no
// goroutine of the decorator's.
const helperIdle = 200 * time.Millisecond

// spawn runs job on a waiting helper, or on a new one.
func spawn(job func()) {
	select {
	case idle <- job:
	default:
		go helper(job)
	}
}

// helper runs job, then the jobs handed to it, until none comes for
// helperIdle.
func helper(job func()) {
	t := time.NewTimer(helperIdle)
	defer t.Stop()
	for {
		job()
		job = nil // keep nothing of a finished batch alive while idle
		t.Reset(helperIdle)
		select {
		case job = <-idle:
		case <-t.C:
			return
		}
	}
}

// Sleep waits d by clock's timers, or until ctx ends; it reports whether
// the full time passed.
func Sleep(ctx context.Context, clock Clock, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	done := make(chan struct{})
	t := clock.AfterFunc(d, func() { close(done) })
	select {
	case <-done:
		return ctx.Err() == nil
	case <-ctx.Done():
		t.Stop()
		return false
	}
}

// DeadlineContext is a context that ends at a deadline measured by a
// Clock, and whose deadline can be moved (a lease's end, extended by a
// heartbeat). Once it ends by its deadline, Err reports
// context.DeadlineExceeded, to it and to every context derived from it, as
// a context from context.WithDeadline would; context.Cause reports the
// nearest cause (a cancelled parent's, such as a lost lease, or
// DeadlineExceeded).
type DeadlineContext struct {
	parent context.Context
	clock  Clock

	mu       sync.Mutex
	done     chan struct{} // made on first use
	err      error
	deadline time.Time
	timer    Timer
	armed    uint64      // which arming of the timer counts
	unwatch  func() bool // stops watching the parent
	hooks    []*hook     // in the order registered, so a simulated world replays
}

type hook struct{ f func() }

// closed is a channel closed at start, for contexts that end before anyone
// asked for their Done channel.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// WithDeadline returns a context that ends at deadline by clock, when
// parent ends, or on Cancel.
func WithDeadline(parent context.Context, clock Clock, deadline time.Time) *DeadlineContext {
	// The deadline is kept even when the parent has ended already:
	// Deadline never reports the zero time.
	c := &DeadlineContext{parent: parent, clock: clock, deadline: deadline}
	if err := parent.Err(); err != nil {
		c.err = err
		return c
	}
	c.Move(deadline)
	if parent.Done() != nil {
		// A parent that can say when it ends (a DeadlineContext) says so on
		// the goroutine that ends it, at once, so a simulated world stays on
		// its own schedule; any other parent is watched by the context
		// package. Registered outside c.mu: a parent that has ended already
		// ends c at once.
		var stop func() bool
		if a := afterFuncerOf(parent); a != nil {
			stop = a.AfterFunc(func() { c.end(parent.Err()) })
		} else {
			stop = context.AfterFunc(parent, func() { c.end(parent.Err()) })
		}
		c.mu.Lock()
		if c.err == nil {
			c.unwatch = stop
			c.mu.Unlock()
		} else {
			c.mu.Unlock()
			stop()
		}
	}
	return c
}

// WithTimeout is WithDeadline at clock.Now()+d.
func WithTimeout(parent context.Context, clock Clock, d time.Duration) *DeadlineContext {
	return WithDeadline(parent, clock, clock.Now().Add(d))
}

// Cancel ends the context with context.Canceled and releases its timer.
func (c *DeadlineContext) Cancel() { c.end(context.Canceled) }

// end ends the context with err, once.
func (c *DeadlineContext) end(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	if c.unwatch != nil {
		c.unwatch()
		c.unwatch = nil
	}
	if c.done == nil {
		c.done = closed
	} else {
		close(c.done)
	}
	hooks := c.hooks
	c.hooks = nil
	c.mu.Unlock()
	for _, h := range hooks {
		h.f()
	}
}

// Move sets a new deadline, earlier or later. It reports false, and does
// nothing, once the context has ended.
func (c *DeadlineContext) Move(deadline time.Time) bool {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return false
	}
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	c.deadline = deadline
	c.armed++
	d := deadline.Sub(c.clock.Now())
	if d <= 0 {
		c.mu.Unlock()
		c.end(context.DeadlineExceeded)
		return true
	}
	c.arm(d)
	c.mu.Unlock()
	return true
}

// arm sets the timer for the current deadline, d from now; c.mu is held.
func (c *DeadlineContext) arm(d time.Duration) {
	armed := c.armed
	c.timer = c.clock.AfterFunc(d, func() { c.fire(armed) })
}

// fire ends the context if the arming it belongs to is still the current
// one and its deadline has passed by the clock; a timer that fired early
// by the clock's reckoning waits out the rest.
func (c *DeadlineContext) fire(armed uint64) {
	c.mu.Lock()
	if c.err != nil || c.armed != armed {
		c.mu.Unlock()
		return
	}
	if rem := c.deadline.Sub(c.clock.Now()); rem > 0 {
		c.arm(rem)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.end(context.DeadlineExceeded)
}

// Deadline returns the deadline by the context's clock, or the parent's if
// that is earlier.
func (c *DeadlineContext) Deadline() (time.Time, bool) {
	c.mu.Lock()
	dl := c.deadline
	c.mu.Unlock()
	if pdl, ok := c.parent.Deadline(); ok && pdl.Before(dl) {
		return pdl, true
	}
	return dl, true
}

// Done is closed when the context ends.
func (c *DeadlineContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		if c.err != nil {
			c.done = closed
		} else {
			c.done = make(chan struct{})
		}
	}
	return c.done
}

// Err reports context.DeadlineExceeded once the deadline passed, the
// parent's error once it ended, context.Canceled after Cancel, else nil.
func (c *DeadlineContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// deadlineContextKey makes a DeadlineContext answer Value with itself.
var deadlineContextKey byte

// Value is the parent's.
func (c *DeadlineContext) Value(key any) any {
	if key == &deadlineContextKey {
		return c
	}
	return c.parent.Value(key)
}

// afterFuncerOf returns what tells, on the goroutine that ends it, when
// ctx ends: ctx itself if it has an AfterFunc method, or the
// DeadlineContext under values added by context.WithValue (a context
// ending exactly when it does), else nil.
func afterFuncerOf(ctx context.Context) afterFuncer {
	if a, ok := ctx.(afterFuncer); ok {
		return a
	}
	if d, ok := ctx.Value(&deadlineContextKey).(*DeadlineContext); ok && d.Done() == ctx.Done() {
		return d
	}
	return nil
}

// AfterFunc calls f once the context ends, on the goroutine that ends it
// (at once, on the caller's, if it has ended); stop unregisters f. It is
// how the context package cancels a context derived from this one: at
// once, without a goroutine watching each (context.AfterFunc still runs a
// caller's function on a goroutine of its own).
func (c *DeadlineContext) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		f()
		return func() bool { return false }
	}
	h := &hook{f: f}
	c.hooks = append(c.hooks, h)
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, o := range c.hooks {
			if o == h {
				c.hooks = append(c.hooks[:i], c.hooks[i+1:]...)
				return true
			}
		}
		return false
	}
}

// valueContext is a context carrying one value on top of its parent, as
// context.WithValue makes, which also passes the parent's AfterFunc on.
type valueContext struct {
	context.Context
	key, value any
}

type afterFuncer interface {
	AfterFunc(func()) func() bool
}

// WithValue returns parent with value under key, as context.WithValue
// does; over a DeadlineContext, a context derived from the result learns
// that parent ended without a goroutine of its own.
func WithValue(parent context.Context, key, value any) context.Context {
	if _, ok := parent.(afterFuncer); !ok {
		return context.WithValue(parent, key, value)
	}
	return &valueContext{Context: parent, key: key, value: value}
}

// Value is the value under key, else the parent's.
func (c *valueContext) Value(key any) any {
	if key == c.key {
		return c.value
	}
	return c.Context.Value(key)
}

// AfterFunc is the parent's.
func (c *valueContext) AfterFunc(f func()) func() bool {
	return c.Context.(afterFuncer).AfterFunc(f)
}
