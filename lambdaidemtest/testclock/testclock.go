package testclock

import (
	"sort"
	"sync"
	"time"
)

// Clock is a settable clock with timers. It is safe for concurrent use.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers []*Timer
	short  time.Duration
}

// Timer is one timer armed on a Clock.
type Timer struct {
	c    *Clock
	at   time.Time
	seq  int
	f    func()
	done bool
}

// New returns a clock at start.
func New(start time.Time) *Clock { return &Clock{now: start} }

// PassShort makes timers shorter than d pass at once: arming one moves the
// clock ahead to it (on a goroutine of its own), as if the wait had
// happened. For tests whose store fails, so the decorator's retries wait a
// few milliseconds that nobody would otherwise move the clock through.
func (c *Clock) PassShort(d time.Duration) *Clock {
	c.mu.Lock()
	c.short = d
	c.mu.Unlock()
	return c
}

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc arms a timer calling f once the clock has moved d ahead (at
// once, on a goroutine of its own, if d <= 0).
func (c *Clock) AfterFunc(d time.Duration, f func()) interface{ Stop() bool } {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &Timer{c: c, at: c.now.Add(d), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	if d <= 0 || d < c.short {
		go c.fireUntil(t.at)
	}
	return t
}

// Stop disarms the timer; it reports whether it had not fired yet.
func (t *Timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.done
	t.done = true
	return was
}

// Advance moves the clock d ahead, firing every timer that falls due, in
// order, each at its own time.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	c.fireUntil(end)
}

// Set moves the clock to t: ahead as Advance does, or back (no timer fires).
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	if t.Before(c.now) {
		c.now = t
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.fireUntil(t)
}

// fireUntil fires due timers one by one up to end and leaves the clock at
// end (or later, if another goroutine moved it further meanwhile).
func (c *Clock) fireUntil(end time.Time) {
	for {
		c.mu.Lock()
		sort.SliceStable(c.timers, func(i, j int) bool {
			if !c.timers[i].at.Equal(c.timers[j].at) {
				return c.timers[i].at.Before(c.timers[j].at)
			}
			return c.timers[i].seq < c.timers[j].seq
		})
		for len(c.timers) > 0 && c.timers[0].done {
			c.timers = c.timers[1:]
		}
		if len(c.timers) == 0 || c.timers[0].at.After(end) {
			if end.After(c.now) {
				c.now = end
			}
			c.mu.Unlock()
			return
		}
		t := c.timers[0]
		c.timers = c.timers[1:]
		t.done = true
		if t.at.After(c.now) {
			c.now = t.at
		}
		c.mu.Unlock()
		t.f()
	}
}

// Pending is the number of armed timers (for a test that waits until the
// code under test armed one).
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.done {
			n++
		}
	}
	return n
}
