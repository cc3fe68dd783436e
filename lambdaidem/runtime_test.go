package lambdaidem_test

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/lambdaidem/go-lambdaidem/internal/seam"
)

// simWorld is a seam.Runtime whose time moves only when the test says so.
type simWorld struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers []*simTimer
	// instantBelow, when set, makes shorter timers pass at once: time
	// advances to them as they are set (a store retry's short waits).
	instantBelow time.Duration
}

type simTimer struct {
	at   time.Time
	seq  int
	f    func()
	dead bool
}

func newSimWorld() *simWorld { return &simWorld{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (w *simWorld) runtime() *seam.Runtime {
	return &seam.Runtime{
		Now: func() time.Time { w.mu.Lock(); defer w.mu.Unlock(); return w.now },
		AfterFunc: func(d time.Duration, f func()) func() bool {
			w.mu.Lock()
			w.seq++
			tm := &simTimer{at: w.now.Add(d), seq: w.seq, f: f}
			w.timers = append(w.timers, tm)
			instant := d < w.instantBelow
			w.mu.Unlock()
			if instant {
				w.advance(d)
			}
			return func() bool {
				w.mu.Lock()
				defer w.mu.Unlock()
				was := !tm.dead
				tm.dead = true
				return was
			}
		},
		Int64N: func(n int64) int64 { return n / 2 },
	}
}

// Now is the world's time.
func (w *simWorld) Now() time.Time { w.mu.Lock(); defer w.mu.Unlock(); return w.now }

// advance moves time by d, firing due timers in order on this goroutine.
func (w *simWorld) advance(d time.Duration) {
	w.mu.Lock()
	end := w.now.Add(d)
	w.mu.Unlock()
	for {
		w.mu.Lock()
		sort.Slice(w.timers, func(i, j int) bool {
			if !w.timers[i].at.Equal(w.timers[j].at) {
				return w.timers[i].at.Before(w.timers[j].at)
			}
			return w.timers[i].seq < w.timers[j].seq
		})
		var next *simTimer
		for len(w.timers) > 0 && w.timers[0].dead {
			w.timers = w.timers[1:]
		}
		if len(w.timers) > 0 && !w.timers[0].at.After(end) {
			next, w.timers = w.timers[0], w.timers[1:]
			next.dead = true
			w.now = next.at
		}
		if next == nil {
			w.now = end
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		next.f()
	}
}

// ctx returns a context carrying the world's Runtime, with an invocation
// deadline d from now in the world's time (zero: none).
func (w *simWorld) ctx(d time.Duration) (context.Context, context.CancelFunc) {
	rt := w.runtime()
	ctx := seam.With(context.Background(), rt)
	if d == 0 {
		return ctx, func() {}
	}
	return seam.WithDeadline(ctx, seam.ClockOf(rt), w.Now().Add(d))
}
