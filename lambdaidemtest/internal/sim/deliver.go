package sim

import "time"

// Deliver invokes the function once with msgs, as the event source mapping
// does (in an execution environment of its own, with the function's
// deadline), and deletes what the response says succeeded. Call it from a
// task: it parks until the invocation ends. It lets a test hand a message to
// the function at a moment it chooses, beside the pollers.
func (e *EventSource) Deliver(h SQSHandler, msgs []*Message) { e.invoke(h, msgs) }

// Redeliver hands m out again as a receive would, even while it is in
// flight (SQS's own duplicate delivery): a new receipt handle, one more
// receive, hidden for visibility. It returns nil when m was deleted.
func (q *Queue) Redeliver(m *Message, visibility time.Duration) *Message {
	if m.deleted {
		return nil
	}
	q.handOut(m, visibility)
	q.svc.w.Logf("sqs %s: %s delivered again", q.name(), m.ID)
	return m
}
