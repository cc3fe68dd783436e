package seam_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/lambdaidem/go-lambdaidem/internal/seam"
)

// manual is a clock whose timers fire only when fire is called.
type manual struct {
	now   time.Time
	seq   int
	armed map[int]func()
}

type manualTimer struct {
	m *manual
	i int
}

func (t manualTimer) Stop() bool { _, was := t.m.armed[t.i]; delete(t.m.armed, t.i); return was }

func (m *manual) Now() time.Time { return m.now }

func (m *manual) AfterFunc(d time.Duration, f func()) seam.Timer {
	if m.armed == nil {
		m.armed = map[int]func(){}
	}
	m.seq++
	m.armed[m.seq] = f
	return manualTimer{m, m.seq}
}

// fire advances to t and runs every armed timer once (each checks the time).
func (m *manual) fire(t time.Time) {
	m.now = t
	armed := m.armed
	m.armed = map[int]func(){}
	for _, f := range armed {
		f()
	}
}

func TestDeadlineContextMovesAndReportsDeadlineExceeded(t *testing.T) {
	m := &manual{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	ctx := seam.WithDeadline(context.Background(), m, m.now.Add(10*time.Second))
	defer ctx.Cancel()
	if dl, ok := ctx.Deadline(); !ok || !dl.Equal(m.now.Add(10*time.Second)) {
		t.Fatalf("deadline %v %v", dl, ok)
	}
	if !ctx.Move(m.now.Add(20 * time.Second)) {
		t.Fatal("Move refused on a live context")
	}
	m.fire(m.now.Add(15 * time.Second))
	if ctx.Err() != nil {
		t.Fatalf("ended at the old deadline: %v", ctx.Err())
	}
	m.fire(m.now.Add(5 * time.Second))
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) || context.Cause(ctx) != context.DeadlineExceeded {
		t.Fatalf("Err %v, Cause %v; want DeadlineExceeded", ctx.Err(), context.Cause(ctx))
	}
	if ctx.Move(m.now.Add(time.Hour)) {
		t.Fatal("Move revived an ended context")
	}
}

func TestDeadlineContextCancelAndParent(t *testing.T) {
	m := &manual{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	ctx := seam.WithDeadline(context.Background(), m, m.now.Add(time.Second))
	ctx.Cancel()
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("after cancel: %v", ctx.Err())
	}
	parent, pcancel := context.WithCancel(context.Background())
	child := seam.WithDeadline(parent, m, m.now.Add(time.Second))
	defer child.Cancel()
	pcancel()
	// The parent's end reaches the child on a goroutine of the context
	// package's: wait for it.
	<-child.Done()
	if !errors.Is(child.Err(), context.Canceled) {
		t.Fatalf("after the parent's cancel: %v", child.Err())
	}
}

// A context derived from a DeadlineContext ends with it, at once, with
// DeadlineExceeded, as one derived from context.WithDeadline would; a
// cause set on a context between them is kept.
func TestDeadlineContextTellsDerivedContexts(t *testing.T) {
	m := &manual{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	ctx := seam.WithDeadline(context.Background(), m, m.now.Add(time.Second))
	defer ctx.Cancel()
	type key struct{}
	valued := seam.WithValue(ctx, key{}, "v")
	child, cancel := context.WithCancel(valued)
	defer cancel()
	if valued.Value(key{}) != "v" || child.Value(key{}) != "v" {
		t.Fatal("the value was lost")
	}
	m.fire(m.now.Add(time.Second))
	select {
	case <-child.Done():
	default:
		t.Fatal("the derived context did not end with its parent")
	}
	if !errors.Is(child.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(child), context.DeadlineExceeded) {
		t.Fatalf("derived context: Err %v, Cause %v; want DeadlineExceeded", child.Err(), context.Cause(child))
	}
	if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		t.Fatalf("Cause %v, want DeadlineExceeded", context.Cause(ctx))
	}

	ctx2 := seam.WithDeadline(context.Background(), m, m.now.Add(time.Second))
	defer ctx2.Cancel()
	lost2, lose2 := context.WithCancelCause(ctx2)
	why := errors.New("lease lost")
	lose2(why)
	if context.Cause(lost2) != why || ctx2.Err() != nil {
		t.Fatalf("a cause set below the deadline: Cause %v, parent Err %v", context.Cause(lost2), ctx2.Err())
	}
}

// The real Runtime runs Each's calls side by side, at most limit at once,
// and each index once.
func TestRealEachIsBounded(t *testing.T) {
	var mu sync.Mutex
	running, most := 0, 0
	seen := map[int]int{}
	seam.Real.Each(20, 3, func(i int) {
		mu.Lock()
		running++
		most = max(most, running)
		seen[i]++
		mu.Unlock()
		runtime.Gosched()
		mu.Lock()
		running--
		mu.Unlock()
	})
	if most > 3 || len(seen) != 20 {
		t.Fatalf("at most %d at once (limit 3), %d indices", most, len(seen))
	}
	for i, n := range seen {
		if n != 1 {
			t.Fatalf("index %d ran %d times", i, n)
		}
	}
}

// A context made under a parent that has ended reports the earlier of its
// deadline and the parent's, never the zero time.
func TestDeadlineContextUnderAnEndedParent(t *testing.T) {
	m := &manual{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	parent := seam.WithDeadline(context.Background(), m, m.now.Add(time.Second))
	defer parent.Cancel()
	m.fire(m.now.Add(2 * time.Second))
	if parent.Err() == nil {
		t.Fatal("the parent did not end")
	}
	child := seam.WithDeadline(parent, m, m.now.Add(time.Minute))
	defer child.Cancel()
	dl, ok := child.Deadline()
	if !ok || !dl.Equal(m.now.Add(-time.Second)) {
		t.Fatalf("deadline %v %v, want the parent's %v", dl, ok, m.now.Add(-time.Second))
	}
	if child.Err() == nil {
		t.Fatal("a child of an ended parent is live")
	}
}

// A DeadlineContext made under values added by context.WithValue to
// another learns that one ended at once, on the goroutine that ended it
// (no goroutine of the context package's, which a simulated world could
// not schedule).
func TestDeadlineContextUnderStdlibValues(t *testing.T) {
	m := &manual{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	outer := seam.WithDeadline(context.Background(), m, m.now.Add(time.Second))
	defer outer.Cancel()
	type key struct{}
	inner := seam.WithDeadline(context.WithValue(outer, key{}, 1), m, m.now.Add(time.Minute))
	defer inner.Cancel()
	m.fire(m.now.Add(time.Second))
	if !errors.Is(inner.Err(), context.DeadlineExceeded) {
		t.Fatalf("inner context: %v right after the outer one's deadline, want DeadlineExceeded", inner.Err())
	}
}
