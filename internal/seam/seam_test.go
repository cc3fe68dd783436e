package seam_test

import (
	"context"
	"errors"
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

func (m *manual) clock() seam.Clock {
	return seam.Clock{
		Now: func() time.Time { return m.now },
		AfterFunc: func(d time.Duration, f func()) func() bool {
			if m.armed == nil {
				m.armed = map[int]func(){}
			}
			m.seq++
			i := m.seq
			m.armed[i] = f
			return func() bool { _, was := m.armed[i]; delete(m.armed, i); return was }
		},
	}
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
	ctx, cancel := seam.WithDeadline(context.Background(), m.clock(), m.now.Add(10*time.Second))
	defer cancel()
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
	ctx, cancel := seam.WithDeadline(context.Background(), m.clock(), m.now.Add(time.Second))
	cancel()
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("after cancel: %v", ctx.Err())
	}
	parent, pcancel := context.WithCancel(context.Background())
	child, ccancel := seam.WithDeadline(parent, m.clock(), m.now.Add(time.Second))
	defer ccancel()
	pcancel()
	if !errors.Is(child.Err(), context.Canceled) {
		t.Fatalf("after the parent's cancel: %v", child.Err())
	}
	if seam.From(context.Background()) != nil {
		t.Fatal("a plain context carries a Runtime")
	}
	rt := &seam.Runtime{}
	if seam.From(seam.With(context.Background(), rt)) != rt {
		t.Fatal("With/From lost the Runtime")
	}
}

// A context made under a parent that has ended reports the earlier of its
// deadline and the parent's, never the zero time.
func TestDeadlineContextUnderAnEndedParent(t *testing.T) {
	m := &manual{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	parent, pcancel := seam.WithDeadline(context.Background(), m.clock(), m.now.Add(time.Second))
	defer pcancel()
	m.fire(m.now.Add(2 * time.Second))
	if parent.Err() == nil {
		t.Fatal("the parent did not end")
	}
	child, cancel := seam.WithDeadline(parent, m.clock(), m.now.Add(time.Minute))
	defer cancel()
	dl, ok := child.Deadline()
	if !ok || !dl.Equal(m.now.Add(-time.Second)) {
		t.Fatalf("deadline %v %v, want the parent's %v", dl, ok, m.now.Add(-time.Second))
	}
	if child.Err() == nil {
		t.Fatal("a child of an ended parent is live")
	}
}
