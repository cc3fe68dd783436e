package sim

import (
	"context"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// SQSHandler is a Lambda function for an SQS event source.
type SQSHandler func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)

// EventSource is Lambda's event source mapping for one queue: pollers
// receive batches, invoke the function with a deadline, delete what the
// response says succeeded and leave the rest to the visibility timeout.
// A function error, a timeout or a crash returns the whole batch.
type EventSource struct {
	W     *World
	Queue *Queue
	// NewHandler builds the function once per poller: each poller is one
	// execution environment, with its own decorator (and cache).
	NewHandler func() SQSHandler
	// BatchSize is the most records per invocation.
	BatchSize int
	// Pollers is the number of concurrent invocations.
	Pollers int
	// Timeout is the function's timeout.
	Timeout time.Duration
	// Until stops polling at this world time.
	Until time.Time
	// OnResult observes each invocation's batch and how it ended
	// (crashed: killed or timed out; err: the function's error).
	OnResult func(batch []*Message, resp events.SQSEventResponse, err error, crashed bool)
	// OnAck observes each message the mapping deletes after a success.
	OnAck func(m *Message)
	// OnStart observes each invocation's process as it starts, with its
	// batch.
	OnStart func(p *Process, batch []*Message)
	// BeforeDelete observes each message the mapping is about to delete
	// (its receipt handle still the latest), while it is still queued.
	BeforeDelete func(m *Message)
	// Invocations counts invocations; Crashes those killed or timed out.
	Invocations, Crashes int
	seq                  int
}

// Start spawns the pollers.
func (e *EventSource) Start() {
	for i := range e.Pollers {
		h := e.NewHandler()
		e.W.Spawn("poller-"+strconv.Itoa(i), nil, func() { e.poll(h) })
	}
}

func (e *EventSource) poll(h SQSHandler) {
	w := e.W
	for w.now.Before(e.Until) {
		msgs := e.Queue.Receive(e.BatchSize, e.Queue.Visibility)
		if len(msgs) == 0 {
			// Long polling: wake when something may be visible, or after
			// the longest wait SQS allows.
			wait := 20 * time.Second
			if nv := e.Queue.NextVisible(); !nv.IsZero() && nv.After(w.now) && nv.Sub(w.now) < wait {
				wait = nv.Sub(w.now)
			}
			w.Sleep(max(wait, time.Millisecond))
			continue
		}
		e.invoke(h, msgs)
	}
}

// invoke runs one invocation in a process of its own and waits for it.
func (e *EventSource) invoke(h SQSHandler, msgs []*Message) {
	w := e.W
	e.seq++
	e.Invocations++
	p := &Process{Name: "inv-" + strconv.Itoa(e.seq)}
	ev := events.SQSEvent{Records: make([]events.SQSMessage, len(msgs))}
	for i, m := range msgs {
		ev.Records[i] = e.Queue.Event(m)
	}
	ctx := w.InvocationContext(p, w.now.Add(e.Timeout))
	poller := w.cur
	var (
		resp     events.SQSEventResponse
		err      error
		finished bool
		done     bool
	)
	w.Logf("%s starts with %d records", p.Name, len(msgs))
	if e.OnStart != nil {
		e.OnStart(p, msgs)
	}
	w.Spawn(p.Name, p, func() {
		defer func() {
			done = true
			w.Ready(poller)
		}()
		resp, err = h(ctx, ev)
		finished = true
	})
	w.At(e.Timeout, nil, func() {
		if !done {
			w.Logf("%s timed out", p.Name)
			w.Kill(p)
		}
	})
	for !done {
		w.Park()
	}
	// Whatever the outcome, the process is gone: its timers die with it.
	w.Kill(p)
	crashed := !finished
	if crashed {
		e.Crashes++
	}
	w.Logf("%s ended: crashed=%v err=%v failures=%d", p.Name, crashed, err, len(resp.BatchItemFailures))
	if e.OnResult != nil {
		e.OnResult(msgs, resp, err, crashed)
	}
	if crashed || err != nil {
		return
	}
	failed := make(map[string]bool, len(resp.BatchItemFailures))
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	for id := range failed {
		if !inBatch(msgs, id) {
			// An unknown identifier fails the whole batch.
			return
		}
	}
	for i, m := range msgs {
		if !failed[m.ID] {
			if e.BeforeDelete != nil && e.Queue.Latest(ev.Records[i].ReceiptHandle) == m {
				e.BeforeDelete(m)
			}
			e.Queue.Delete(ev.Records[i].ReceiptHandle)
			if e.OnAck != nil {
				e.OnAck(m)
			}
		}
	}
}

func inBatch(msgs []*Message, id string) bool {
	for _, m := range msgs {
		if m.ID == id {
			return true
		}
	}
	return false
}
