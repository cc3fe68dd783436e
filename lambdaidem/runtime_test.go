package lambdaidem_test

import (
	"context"
	"time"

	"github.com/lambdaidem/go-lambdaidem/internal/seam"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest/testclock"
)

// simWorld is the bundle's clock seen as a world whose time moves only
// when the test says so: advance fires, in order, every timer the
// decorator armed on it (deadlines, heartbeat ticks, retry waits).
type simWorld struct{ *testclock.Clock }

// world returns the bundle's clock as a simWorld.
func (b *bundle) world() *simWorld { return &simWorld{b.clock} }

// advance moves time by d, firing due timers in order on this goroutine.
func (w *simWorld) advance(d time.Duration) { w.Advance(d) }

// ctx returns an invocation context whose deadline is d from now by the
// world's clock (zero: none).
func (w *simWorld) ctx(d time.Duration) (context.Context, context.CancelFunc) {
	if d == 0 {
		return context.Background(), func() {}
	}
	c := seam.WithDeadline(context.Background(), w.Clock, w.Now().Add(d))
	return c, c.Cancel
}
