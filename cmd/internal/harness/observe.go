package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdaidem/go-lambdaidem/localrun"
	"github.com/lambdaidem/go-lambdaidem/producer"
)

// Observer gathers what a run reports while it goes: the records the
// runners received and settled, the messages they deleted, how the
// invocations ended, the processes restarted, and the library's one line
// per record in the function's JSON logs. These explain a run and pace its
// waits; a run's invariants are checked against what it left behind
// (ScanTable, ReadDLQ, ReadRecords), not against them.
//
// A driver adds its own reading through the hooks, which are set before
// the run starts and called without the observer's lock held, from the
// runners' goroutines.
type Observer struct {
	// OnReceive sees the messages a ReceiveMessage handed a runner.
	OnReceive func(msgs []types.Message)
	// OnLine sees every JSON log line of the function but its metric
	// (EMF) lines, after the observer counted it.
	OnLine func(LogLine)
	// OnInvoke sees every invocation, after the observer counted it and
	// before its records count as settled.
	OnInvoke func(localrun.Invocation)
	// OnProcess sees every function process start and exit.
	OnProcess func(localrun.ProcessEvent)

	received atomic.Int64 // records ReceiveMessage handed to the runners
	// progress counts what was seen happen: records received,
	// invocations ended, processes started or exited, the library's
	// record lines.
	progress atomic.Int64
	settled  atomic.Int64 // records of finished invocations
	// deleted counts distinct messages deleted: a message delivered twice
	// (its visibility ran out) may be deleted twice and counts once.
	deleted atomic.Int64
	changed chan struct{} // a nudge for waiters; capacity 1

	mu          sync.Mutex
	keyOf       map[string]string           // message ID -> key
	gone        map[string]bool             // message IDs deleted
	deliveries  map[string]int              // key -> records handed to the function
	crashed     map[string]bool             // keys in an invocation that crashed
	invocations map[string]localrun.Outcome // request ID -> how it ended
	byOutcome   map[localrun.Outcome]int    // invocations by how they ended
	outcomes    map[string]int              // library outcome -> records
	byKey       map[string]map[string]int   // key -> library outcome -> records
	restarts    int                         // processes started in a slot that had one
	otherLines  int                         // output lines that are not JSON
}

// NewObserver returns an empty Observer.
func NewObserver() *Observer {
	return &Observer{
		changed:     make(chan struct{}, 1),
		keyOf:       map[string]string{},
		gone:        map[string]bool{},
		deliveries:  map[string]int{},
		crashed:     map[string]bool{},
		invocations: map[string]localrun.Outcome{},
		byOutcome:   map[localrun.Outcome]int{},
		outcomes:    map[string]int{},
		byKey:       map[string]map[string]int{},
	}
}

// Changed is nudged whenever an invocation ends: a waiter checks its
// condition again at once.
func (o *Observer) Changed() <-chan struct{} { return o.changed }

func (o *Observer) nudge() {
	select {
	case o.changed <- struct{}{}:
	default:
	}
}

// Progress counts what the observer has seen happen so far: records
// received, invocations ended, processes started or exited, the library's
// record lines. A wait that sees it move knows the run is alive, however
// slowly the machine runs it.
func (o *Observer) Progress() int64 { return o.progress.Load() }

// Received is the number of records the runners received.
func (o *Observer) Received() int64 { return o.received.Load() }

// Deleted is the number of distinct messages the runners deleted.
func (o *Observer) Deleted() int64 { return o.deleted.Load() }

// InFlight is the number of records received and not yet settled by a
// finished invocation. The two counters meet exactly when nothing is in
// flight as long as a runner never merges two receipts of one record,
// which it does only within a batching window far shorter than the
// visibility timeout.
func (o *Observer) InFlight() int64 { return max(o.received.Load()-o.settled.Load(), 0) }

// KeyOf returns the key of a message the run sent or received, "" if
// unknown.
func (o *Observer) KeyOf(messageID string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.keyOf[messageID]
}

// sent records the key of a message the harness sent.
func (o *Observer) sent(messageID, key string) {
	o.mu.Lock()
	o.keyOf[messageID] = key
	o.mu.Unlock()
}

// Processed reports whether the library logged a record of the key as
// processed: its handler ran to the end and the completion was written.
// (The line is logged at debug: a Function with Debug set shows it.)
func (o *Observer) Processed(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.byKey[key]["processed"] > 0
}

// Crashed reports whether a message of the key was in an invocation that
// crashed.
func (o *Observer) Crashed(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.crashed[key]
}

// Observations are the observer's counters at one moment.
type Observations struct {
	// Outcomes counts the library's per-record outcomes; ByKey the same
	// per key.
	Outcomes map[string]int
	ByKey    map[string]map[string]int
	// Deliveries counts the records handed to the function, per key.
	Deliveries map[string]int
	// Invocations counts the invocations by how they ended;
	// InvocationOutcome tells one invocation's, by request ID.
	Invocations       map[localrun.Outcome]int
	InvocationOutcome map[string]localrun.Outcome
	// Restarts is the processes started to replace one.
	Restarts int
	// OtherLines counts the function's output lines that were not JSON.
	OtherLines int
}

// Snapshot copies the counters.
func (o *Observer) Snapshot() Observations {
	o.mu.Lock()
	defer o.mu.Unlock()
	byKey := make(map[string]map[string]int, len(o.byKey))
	for k, m := range o.byKey {
		byKey[k] = maps.Clone(m)
	}
	return Observations{
		Outcomes:          maps.Clone(o.outcomes),
		ByKey:             byKey,
		Deliveries:        maps.Clone(o.deliveries),
		Invocations:       maps.Clone(o.byOutcome),
		InvocationOutcome: maps.Clone(o.invocations),
		Restarts:          o.restarts,
		OtherLines:        o.otherLines,
	}
}

// Receive takes the messages a ReceiveMessage handed a runner, learning
// their keys from the producer's key attribute. The runners' SQS client
// calls it (and Invoke and Process are their hooks); they are exported so
// that a driver's test can feed an observer without a runner.
func (o *Observer) Receive(msgs []types.Message) {
	o.mu.Lock()
	for _, m := range msgs {
		if a, ok := m.MessageAttributes[producer.DefaultKeyAttribute]; ok && a.StringValue != nil {
			o.keyOf[aws.ToString(m.MessageId)] = *a.StringValue
		}
	}
	o.mu.Unlock()
	if o.OnReceive != nil {
		o.OnReceive(msgs)
	}
	o.received.Add(int64(len(msgs)))
	o.progress.Add(int64(len(msgs)))
}

// Invoke takes an invocation's report: localrun's OnInvoke hook.
func (o *Observer) Invoke(inv localrun.Invocation) {
	o.mu.Lock()
	o.invocations[inv.RequestID] = inv.Outcome
	o.byOutcome[inv.Outcome]++
	for _, id := range inv.MessageIDs {
		key := o.keyOf[id]
		o.deliveries[key]++
		if inv.Outcome == localrun.OutcomeCrash {
			o.crashed[key] = true
		}
	}
	fresh := 0
	for _, id := range inv.Deleted {
		if !o.gone[id] {
			o.gone[id] = true
			fresh++
		}
	}
	o.mu.Unlock()
	o.deleted.Add(int64(fresh))
	if o.OnInvoke != nil {
		o.OnInvoke(inv)
	}
	// Settled last: once the counters meet, the invocation is recorded.
	o.settled.Add(int64(len(inv.MessageIDs)))
	o.progress.Add(1)
	o.nudge()
}

// Process takes a process start or exit: localrun's OnProcess hook.
func (o *Observer) Process(ev localrun.ProcessEvent) {
	if ev.Kind == localrun.ProcessStarted && ev.Start > 1 {
		o.mu.Lock()
		o.restarts++
		o.mu.Unlock()
	}
	o.progress.Add(1)
	if o.OnProcess != nil {
		o.OnProcess(ev)
	}
}

// LogLine is what the harness reads of a function's JSON log line
// (AWS_LAMBDA_LOG_FORMAT=JSON): the library's fields, and those the orders
// example and the chaos function add.
type LogLine struct {
	Message   string `json:"message"`
	RequestID string `json:"requestId"`
	Key       string `json:"key"`
	MessageID string `json:"message_id"`
	Outcome   string `json:"outcome"`
	Reason    string `json:"reason"`
	Attempt   int    `json:"attempt"`
	// OrderID, Point and Status are the functions' own: the orders
	// example's order, and the crash point and completion status of a
	// "crashing" line.
	OrderID string `json:"order_id"`
	Point   string `json:"point"`
	Status  int    `json:"status"`
}

// RecordPrefix starts the library's one line per record; its outcome is in
// the line's "outcome" field. ("processed" and "duplicate" are logged at
// debug: a Function with Debug set shows them.)
const RecordPrefix = "lambdaidem: record "

// IsRecord reports whether the line is the library's line for a record.
func (l LogLine) IsRecord() bool {
	return strings.HasPrefix(l.Message, RecordPrefix) && l.Outcome != ""
}

// emfPrefix starts the function's CloudWatch Embedded Metric Format lines
// (package emf writes the "_aws" directive first). They share the output
// with the log lines and are skipped: a metric line is no record.
var emfPrefix = []byte(`{"_aws":`)

// line takes one line of function output.
func (o *Observer) line(b []byte) {
	var l LogLine
	if bytes.HasPrefix(b, emfPrefix) {
		return
	}
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &l) != nil {
		o.mu.Lock()
		o.otherLines++
		o.mu.Unlock()
		return
	}
	if l.IsRecord() {
		o.mu.Lock()
		o.outcomes[l.Outcome]++
		if o.byKey[l.Key] == nil {
			o.byKey[l.Key] = map[string]int{}
		}
		o.byKey[l.Key][l.Outcome]++
		o.mu.Unlock()
		o.progress.Add(1)
	}
	if o.OnLine != nil {
		o.OnLine(l)
	}
}

// Output is a runner's Output: each line of function output to the
// observer, and everything to forward when it is not nil.
func (o *Observer) Output(forward io.Writer) *localrun.LineWriter {
	return &localrun.LineWriter{Line: o.line, Forward: forward}
}

// countingSQS is the runners' SQS client: it shows the observer every
// message received.
type countingSQS struct {
	localrun.SQSAPI
	o *Observer
}

func (c countingSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	out, err := c.SQSAPI.ReceiveMessage(ctx, in, optFns...)
	if err == nil && out != nil {
		c.o.Receive(out.Messages)
	}
	return out, err
}
