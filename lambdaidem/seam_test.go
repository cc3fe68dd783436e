package lambdaidem_test

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambdaidem/go-lambdaidem/internal/seam"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// simWorld is a seam.Runtime whose time moves only when the test says so.
type simWorld struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers []*simTimer
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
			defer w.mu.Unlock()
			w.seq++
			tm := &simTimer{at: w.now.Add(d), seq: w.seq, f: f}
			w.timers = append(w.timers, tm)
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

func TestRuntimeDrivesTheHandlersDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := newSimWorld()
	entered := make(chan time.Time, 1)
	h := lambdaidem.SQS(b.store, func(ctx context.Context, _ events.SQSMessage) error {
		dl, _ := ctx.Deadline()
		entered <- dl
		<-ctx.Done()
		return ctx.Err()
	}, b.opts()...)
	ctx, cancel := w.ctx(30 * time.Second)
	defer cancel()
	start := w.Now()
	done := make(chan events.SQSEventResponse, 1)
	go func() { resp, _ := h(ctx, batch(msg("m1", "x"))); done <- resp }()
	dl := <-entered
	if want := start.Add(30*time.Second - lambdaidem.DefaultDeadlineMargin); !dl.Equal(want) {
		t.Fatalf("handler deadline %v, want %v (the Runtime's deadline minus the margin)", dl, want)
	}
	w.advance(27 * time.Second)
	select {
	case <-done:
		t.Fatal("the handler's context ended before the Runtime's deadline")
	default:
	}
	w.advance(time.Second)
	wantFailed(t, <-done, "m1")
	if r := b.record(t, "m1"); r.Status != lambdaidem.StatusFailed || r.LastError != context.DeadlineExceeded.Error() {
		t.Fatalf("record %s %q, want FAILED with the deadline error", r.Status, r.LastError)
	}
}

func TestRuntimeDrivesTheHeartbeat(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := newSimWorld()
	entered, release := make(chan struct{}), make(chan struct{})
	h := lambdaidem.SQS(b.store, func(ctx context.Context, _ events.SQSMessage) error {
		close(entered)
		<-release
		return nil
	}, b.opts(lambdaidem.WithLease(time.Minute), lambdaidem.WithHeartbeat(10*time.Second))...)
	ctx, cancel := w.ctx(0)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := h(ctx, batch(msg("m1", "x"))); done <- err }()
	<-entered
	first := b.record(t, "m1").LeaseUntil
	if want := w.Now().Add(time.Minute); !first.Equal(want) {
		t.Fatalf("lease until %v, want %v", first, want)
	}
	// Each tick is a Runtime timer: the extension is written inside advance.
	w.advance(10 * time.Second)
	if got, want := b.record(t, "m1").LeaseUntil, w.Now().Add(time.Minute); !got.Equal(want) {
		t.Fatalf("after one tick the lease ends %v, want %v", got, want)
	}
	w.advance(10 * time.Second)
	if got, want := b.record(t, "m1").LeaseUntil, w.Now().Add(time.Minute); !got.Equal(want) {
		t.Fatalf("after two ticks the lease ends %v, want %v", got, want)
	}
	close(release)
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if r := b.record(t, "m1"); r.Status != lambdaidem.StatusCompleted {
		t.Fatalf("record %s, want COMPLETED", r.Status)
	}
}
