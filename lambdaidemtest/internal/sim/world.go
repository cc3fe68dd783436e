package sim

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"runtime"
	"time"
)

// Epoch is where every world's clock starts. It lies far in the future so
// that a real-time timer armed from a simulated deadline never fires while a
// test runs.
var Epoch = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)

// World is a simulated clock, a timer queue and a cooperative scheduler.
// Exactly one task runs at a time; a task gives the world control back only
// by parking (Sleep, Park) or finishing, so the order of everything that
// happens is a function of the seed alone.
//
// A World is not safe for concurrent use: only its tasks and the goroutine
// that calls Run may touch it, and never at the same time.
type World struct {
	now    time.Time
	rng    *rand.Rand
	timers timerHeap
	seq    uint64
	// runq[head:] are the runnable tasks, in order.
	runq  []*Task
	head  int
	cur   *Task
	back  chan struct{}
	tasks int
	all   []*Task
	// idle are goroutines whose task finished, kept to run the next
	// spawned task: a goroutine per task would cost its start and the
	// growth of its stack every time.
	idle  []*worker
	trace *Trace
	// Tracing turns the trace on (failure replays); off, Logf costs nothing.
	Tracing bool
	// Panic is the first panic a task raised (a bug in the code under
	// test or in the world); Run stops when it is set.
	Panic error
}

// NewWorld returns a world at Epoch whose randomness comes from seed.
func NewWorld(seed uint64) *World {
	return &World{
		now:   Epoch,
		rng:   rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		back:  make(chan struct{}),
		trace: &Trace{},
	}
}

// Now is the world's time.
func (w *World) Now() time.Time { return w.now }

// Rand is the world's random source. Only the running task or the
// scheduler may use it.
func (w *World) Rand() *rand.Rand { return w.rng }

// Trace is the world's event log.
func (w *World) Trace() *Trace { return w.trace }

// Logf appends one line to the trace, stamped with the world's time.
func (w *World) Logf(format string, args ...any) {
	if !w.Tracing {
		return
	}
	w.trace.add(w.now.Sub(Epoch), fmt.Sprintf(format, args...))
}

// Timer is one scheduled callback.
type Timer struct {
	at    time.Time
	seq   uint64
	fn    func()
	wake  *Task // instead of fn: make this task runnable (Sleep)
	owner *Process
	index int
	done  bool
}

// Stop cancels the timer; it reports whether the timer had not fired yet.
func (t *Timer) Stop() bool {
	if t.done {
		return false
	}
	t.done = true
	return true
}

// At runs fn, in the scheduler, after d of world time. fn must not park;
// to do work that may park, spawn a task from it.
func (w *World) At(d time.Duration, owner *Process, fn func()) *Timer {
	w.seq++
	t := &Timer{at: w.now.Add(max(d, 0)), seq: w.seq, fn: fn, owner: owner}
	heap.Push(&w.timers, t)
	if owner != nil {
		owner.timers = append(owner.timers, t)
	}
	return t
}

// Task is one simulated thread of control (an invocation, a timer
// callback, an operator, a client).
type Task struct {
	name   string
	owner  *Process
	resume chan bool
	state  int // 0 new/parked, 1 runnable, 2 running, 3 finished
	f      func()
	// exiting is set when the task's goroutine unwinds for a kill: that
	// goroutine ends, and is not kept for another task.
	exiting bool
	// stopped, once set by stop, is where the task hands control back
	// while it unwinds: to the stopper, which may be a task of the same
	// process (KillCurrent) while the scheduler waits on w.back for it.
	stopped chan struct{}
}

// handBack returns control from t to whoever resumed it last.
func (w *World) handBack(t *Task) {
	if t.stopped != nil {
		t.stopped <- struct{}{}
		return
	}
	w.back <- struct{}{}
}

// worker is a goroutine that runs tasks one after another.
type worker struct {
	run    chan *Task
	resume chan bool
}

// Process groups the tasks and timers of one execution environment, so a
// crash or a timeout ends all of them at once.
type Process struct {
	Name   string
	tasks  []*Task
	timers []*Timer
	dead   bool
}

// Dead reports whether the process was killed.
func (p *Process) Dead() bool { return p != nil && p.dead }

// killed is what a killed task's goroutine unwinds with.
type killed struct{}

// Spawn starts f as a task of owner (nil: a task of no process). It runs
// when the scheduler reaches it.
func (w *World) Spawn(name string, owner *Process, f func()) *Task {
	t := &Task{name: name, owner: owner, state: 1, f: f}
	if owner != nil {
		if owner.dead {
			return t
		}
		owner.tasks = append(owner.tasks, t)
	}
	w.tasks++
	w.all = append(w.all, t)
	var wk *worker
	if n := len(w.idle); n > 0 {
		wk = w.idle[n-1]
		w.idle[n-1] = nil
		w.idle = w.idle[:n-1]
	} else {
		wk = &worker{run: make(chan *Task, 1), resume: make(chan bool)}
		go w.work(wk)
	}
	t.resume = wk.resume
	wk.run <- t
	w.runq = append(w.runq, t)
	return t
}

// work runs the tasks handed to wk, until a kill unwinds one (the
// goroutine then ends) or the world closes.
func (w *World) work(wk *worker) {
	for t := range wk.run {
		w.runTask(wk, t)
	}
}

func (w *World) runTask(wk *worker, t *Task) {
	if !<-t.resume {
		// Stopped before it ever ran.
		t.state = 3
		w.idle = append(w.idle, wk)
		w.handBack(t)
		return
	}
	defer func() {
		t.state = 3
		w.tasks--
		if v := recover(); v != nil && w.Panic == nil {
			buf := make([]byte, 8<<10)
			buf = buf[:runtime.Stack(buf, false)]
			w.Panic = fmt.Errorf("task %s panicked: %v\n%s", t.name, v, buf)
		}
		if !t.exiting {
			w.idle = append(w.idle, wk)
		}
		t.f = nil
		w.handBack(t)
	}()
	t.f()
}

// Current is the running task (nil in the scheduler).
func (w *World) Current() *Task { return w.cur }

// Park gives control back to the world until Ready(t) is called for the
// running task. A killed process's task never returns from Park.
func (w *World) Park() {
	t := w.cur
	if t == nil {
		panic("sim: Park outside a task")
	}
	t.state = 0
	w.handBack(t)
	if !<-t.resume {
		t.exiting = true
		runtime.Goexit()
	}
}

// Ready makes a parked task runnable.
func (w *World) Ready(t *Task) {
	if t.state != 0 || (t.owner != nil && t.owner.dead) {
		return
	}
	t.state = 1
	w.runq = append(w.runq, t)
}

// Sleep parks the running task for d of world time.
func (w *World) Sleep(d time.Duration) {
	t := w.cur
	if t == nil {
		panic("sim: Sleep outside a task")
	}
	w.seq++
	heap.Push(&w.timers, &Timer{at: w.now.Add(max(d, 0)), seq: w.seq, wake: t})
	w.Park()
}

// Yield lets every other runnable task run before the running one goes on.
func (w *World) Yield() {
	t := w.cur
	t.state = 0
	w.Ready(t)
	w.handBack(t)
	if !<-t.resume {
		t.exiting = true
		runtime.Goexit()
	}
}

// Kill ends a process: its timers never fire and its tasks stop where they
// are parked (their deferred calls run, as Go unwinds them). Call it from
// the scheduler (a timer callback), from a task of another process, or
// from one of p's own (KillCurrent): each stopped task hands control back
// to the caller, not to the scheduler.
func (w *World) Kill(p *Process) {
	if p.dead {
		return
	}
	p.dead = true
	for _, tm := range p.timers {
		tm.done = true
	}
	for _, t := range p.tasks {
		if t == w.cur {
			continue
		}
		w.stop(t)
	}
}

func (w *World) stop(t *Task) {
	switch t.state {
	case 0, 1:
		// Parked or waiting in the run queue: unwind it now.
		if t.state == 1 {
			for i := w.head; i < len(w.runq); i++ {
				if w.runq[i] == t {
					copy(w.runq[i:], w.runq[i+1:])
					w.runq[len(w.runq)-1] = nil
					w.runq = w.runq[:len(w.runq)-1]
					break
				}
			}
		}
		t.state = 3
		prev := w.cur
		w.cur = t
		t.stopped = make(chan struct{})
		t.resume <- false
		<-t.stopped
		w.cur = prev
	}
}

// Step runs one task, or fires the earliest timer when no task is
// runnable. It reports false when nothing is left to do.
func (w *World) Step() bool {
	if w.head < len(w.runq) {
		t := w.runq[w.head]
		w.runq[w.head] = nil
		w.head++
		if w.head == len(w.runq) {
			w.runq, w.head = w.runq[:0], 0
		}
		if t.state != 1 {
			return true
		}
		t.state = 2
		w.cur = t
		t.resume <- true
		<-w.back
		w.cur = nil
		return true
	}
	for w.timers.Len() > 0 {
		tm := heap.Pop(&w.timers).(*Timer)
		if tm.done {
			continue
		}
		tm.done = true
		if tm.at.After(w.now) {
			w.now = tm.at
		}
		if tm.wake != nil {
			w.Ready(tm.wake)
		} else {
			tm.fn()
		}
		return true
	}
	return false
}

// Run steps until nothing is left, until the world's time passes until, or
// until a task panicked.
func (w *World) Run(until time.Time) {
	for w.Panic == nil {
		if w.head == len(w.runq) && w.timers.Len() > 0 && w.timers.peek().at.After(until) {
			return
		}
		if !w.Step() {
			return
		}
	}
}

// Close unwinds every task still parked, so no goroutine outlives the world.
func (w *World) Close() {
	for w.timers.Len() > 0 {
		heap.Pop(&w.timers)
	}
	w.runq, w.head = nil, 0
	for _, t := range w.all {
		w.stop(t)
	}
	w.all = nil
	for _, wk := range w.idle {
		close(wk.run)
	}
	w.idle = nil
}

type timerHeap []*Timer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i]; h[i].index = i; h[j].index = j }
func (h *timerHeap) Push(x any)   { t := x.(*Timer); t.index = len(*h); *h = append(*h, t) }
func (h *timerHeap) Pop() any     { old := *h; t := old[len(old)-1]; *h = old[:len(old)-1]; return t }
func (h timerHeap) peek() *Timer  { return h[0] }

// KillCurrent kills the running task's process and ends the running task
// where it stands; it does not return.
func (w *World) KillCurrent() {
	t := w.cur
	if t.owner != nil {
		w.Kill(t.owner)
	}
	t.exiting = true
	runtime.Goexit()
}
