package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdaidem/go-lambdaidem/localrun"
)

// attemptKey names one claim of a key: the key and its attempt number.
type attemptKey struct {
	key     string
	attempt int
}

// crashMark is the function's "chaos: crashing" line.
type crashMark struct {
	point  string
	status int // during_completion: the completion's HTTP status, 0 if none
}

// observer gathers what the function's JSON logs and the runners report.
// Nothing here decides an invariant alone: the effects table, the DLQ and
// the idempotency records are the facts; the logs explain them.
type observer struct {
	received atomic.Int64 // records ReceiveMessage handed to the runners
	settled  atomic.Int64 // records of finished invocations
	// deleted counts distinct messages the runners deleted: a message
	// delivered to both runners (its visibility ran out) is deleted twice
	// and must count once, or the send backlog drifts and the queue grows.
	deleted atomic.Int64
	changed chan struct{}

	mu          sync.Mutex
	invocations map[string]localrun.Outcome // request ID -> how it ended
	byOutcome   map[localrun.Outcome]int
	outcomes    map[string]int // library outcome -> records
	processed   map[attemptKey]bool
	unrecorded  map[attemptKey]string // completion_unrecorded or lease_lost
	writeFailed map[attemptKey]bool
	crashes     map[attemptKey]crashMark
	takeovers   map[string]int // key -> "took over an abandoned lease" lines
	poisonRuns  map[string]int // key -> handler runs of a poison message
	effectLines int
	staged      int
	otherLines  int // lines that are not the function's JSON
	restarts    int
	// trail keeps, per key, what happened to its messages (receives,
	// invocations, deletes, the library's lines), so a broken invariant
	// can be traced; msgKey maps message IDs to keys for it.
	trail  map[string][]string
	msgKey map[string]string
	gone   map[string]bool // message IDs deleted at least once
}

func newObserver() *observer {
	return &observer{
		changed:     make(chan struct{}, 1),
		invocations: map[string]localrun.Outcome{},
		byOutcome:   map[localrun.Outcome]int{},
		outcomes:    map[string]int{},
		processed:   map[attemptKey]bool{},
		unrecorded:  map[attemptKey]string{},
		writeFailed: map[attemptKey]bool{},
		crashes:     map[attemptKey]crashMark{},
		takeovers:   map[string]int{},
		poisonRuns:  map[string]int{},
		trail:       map[string][]string{},
		msgKey:      map[string]string{},
		gone:        map[string]bool{},
	}
}

// maxTrail bounds one key's trail.
const maxTrail = 64

// note appends to a key's trail; call with mu held.
func (o *observer) note(key, format string, args ...any) {
	if key == "" || len(o.trail[key]) >= maxTrail {
		return
	}
	o.trail[key] = append(o.trail[key], time.Now().UTC().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
}

// received notes the messages a runner was handed.
func (o *observer) receivedMessages(msgs []types.Message) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, m := range msgs {
		var b struct {
			Key string `json:"key"`
		}
		_ = json.Unmarshal([]byte(aws.ToString(m.Body)), &b)
		id := aws.ToString(m.MessageId)
		o.msgKey[id] = b.Key
		o.note(b.Key, "received %s receive#%s", id, m.Attributes["ApproximateReceiveCount"])
	}
}

func (o *observer) nudge() {
	select {
	case o.changed <- struct{}{}:
	default:
	}
}

// inFlight is the number of records received and not yet settled. With
// no batching window a runner never merges two receipts of one record, so
// the two counters meet exactly when nothing is in flight.
func (o *observer) inFlight() int64 { return o.received.Load() - o.settled.Load() }

func (o *observer) onInvoke(inv localrun.Invocation) {
	o.mu.Lock()
	o.invocations[inv.RequestID] = inv.Outcome
	o.byOutcome[inv.Outcome]++
	deleted := map[string]bool{}
	fresh := 0
	for _, id := range inv.Deleted {
		deleted[id] = true
		if !o.gone[id] {
			o.gone[id] = true
			fresh++
		}
	}
	for _, id := range inv.MessageIDs {
		o.note(o.msgKey[id], "invocation %s ended %s; %s deleted=%v", inv.RequestID, inv.Outcome, id, deleted[id])
	}
	o.mu.Unlock()
	o.deleted.Add(int64(fresh))
	// Settled last: once the counters meet, the invocation is recorded.
	o.settled.Add(int64(len(inv.MessageIDs)))
	o.nudge()
}

func (o *observer) onProcess(ev localrun.ProcessEvent) {
	if ev.Kind == localrun.ProcessStarted && ev.Start > 1 {
		o.mu.Lock()
		o.restarts++
		o.mu.Unlock()
	}
}

// logLine is what the observer reads of a function log line.
type logLine struct {
	Message   string `json:"message"`
	Key       string `json:"key"`
	Attempt   int    `json:"attempt"`
	Outcome   string `json:"outcome"`
	Point     string `json:"point"`
	Status    int    `json:"status"`
	RequestID string `json:"requestId"`
	MessageID string `json:"message_id"`
}

const recordPrefix = "lambdaidem: record "

func (o *observer) line(b []byte) {
	var l logLine
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &l) != nil {
		o.mu.Lock()
		o.otherLines++
		o.mu.Unlock()
		return
	}
	ak := attemptKey{l.Key, l.Attempt}
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case strings.HasPrefix(l.Message, recordPrefix):
		o.note(l.Key, "request %s: %s message %s attempt %d", l.RequestID, l.Outcome, l.MessageID, l.Attempt)
		o.outcomes[l.Outcome]++
		switch l.Outcome {
		case "processed":
			o.processed[ak] = true
		case "completion_unrecorded", "lease_lost":
			o.unrecorded[ak] = l.Outcome
		}
	case l.Message == "lambdaidem: took over an abandoned lease":
		o.takeovers[l.Key]++
	case l.Message == "chaos: effect":
		o.effectLines++
	case l.Message == "chaos: effect staged":
		o.staged++
	case l.Message == "chaos: effect write failed":
		o.writeFailed[ak] = true
	case l.Message == "chaos: poison":
		o.poisonRuns[l.Key]++
	case l.Message == "chaos: crashing":
		o.crashes[ak] = crashMark{point: l.Point, status: l.Status}
	}
}

// countingSQS counts the records the runners receive.
type countingSQS struct {
	localrun.SQSAPI
	o *observer
}

func (c countingSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	out, err := c.SQSAPI.ReceiveMessage(ctx, in, optFns...)
	if err == nil && out != nil {
		c.o.receivedMessages(out.Messages)
		c.o.received.Add(int64(len(out.Messages)))
	}
	return out, err
}
