package testclock_test

import (
	"testing"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest/testclock"
)

var start = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// Advance fires due timers in time order, each at its own time, and no
// stopped or later one.
func TestAdvanceFiresDueTimersInOrder(t *testing.T) {
	c := testclock.New(start)
	var fired []time.Duration
	at := func() { fired = append(fired, c.Now().Sub(start)) }
	c.AfterFunc(3*time.Second, at)
	c.AfterFunc(time.Second, at)
	stopped := c.AfterFunc(2*time.Second, at)
	c.AfterFunc(time.Minute, at)
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop reports whether the timer was still armed")
	}
	if c.Pending() != 3 {
		t.Fatalf("%d pending, want 3", c.Pending())
	}
	c.Advance(10 * time.Second)
	if len(fired) != 2 || fired[0] != time.Second || fired[1] != 3*time.Second {
		t.Fatalf("fired at %v, want [1s 3s]", fired)
	}
	if got := c.Now(); !got.Equal(start.Add(10 * time.Second)) {
		t.Fatalf("now %v, want start+10s", got)
	}
	c.Set(start) // back: nothing fires
	if len(fired) != 2 || !c.Now().Equal(start) {
		t.Fatalf("setting the clock back fired %v, now %v", fired, c.Now())
	}
}

// A timer armed inside a callback fires in the same Advance when due.
func TestTimerArmedByATimer(t *testing.T) {
	c := testclock.New(start)
	n := 0
	var tick func()
	tick = func() {
		n++
		c.AfterFunc(time.Second, tick)
	}
	c.AfterFunc(time.Second, tick)
	c.Advance(5 * time.Second)
	if n != 5 {
		t.Fatalf("%d ticks in 5s, want 5", n)
	}
}

// With PassShort, a short timer passes at once, on a goroutine of its own,
// moving the clock to it.
func TestPassShort(t *testing.T) {
	c := testclock.New(start).PassShort(time.Second)
	done := make(chan time.Time, 1)
	c.AfterFunc(100*time.Millisecond, func() { done <- c.Now() })
	if got := <-done; got.Before(start.Add(100 * time.Millisecond)) {
		t.Fatalf("fired at %v, before its time", got)
	}
	long := c.AfterFunc(time.Minute, func() { t.Error("a long timer passed by itself") })
	defer long.Stop()
}
