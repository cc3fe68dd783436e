package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdaidem/go-lambdaidem/localrun"
)

// observer collects what the demo shows while it runs: deliveries counted
// at the queue, invocations and processes from the runner, and the
// library's one line per record from the function's JSON logs. These are
// observations for the progress lines and the "how" of the summary; the
// invariants are checked against the tables and the DLQ instead.
type observer struct {
	received atomic.Int64 // messages ReceiveMessage handed to the runner
	settled  atomic.Int64 // records of finished invocations

	changed chan struct{} // a non-blocking nudge for waiters; capacity 1

	mu         sync.Mutex
	deliveries map[string]int            // message ID -> invocations that carried it
	crashedIDs map[string]bool           // message IDs in an invocation that crashed
	outcomes   map[string]int            // library outcome -> records
	byKey      map[string]map[string]int // order ID -> outcome -> records
	restarts   int                       // processes started in a slot that had one before
	events     []event                   // notable lines not yet printed
	notable    map[string]bool           // order IDs whose events are printed
}

func newObserver(notable []string) *observer {
	o := &observer{
		changed:    make(chan struct{}, 1),
		deliveries: map[string]int{},
		crashedIDs: map[string]bool{},
		outcomes:   map[string]int{},
		byKey:      map[string]map[string]int{},
		notable:    map[string]bool{},
	}
	for _, id := range notable {
		o.notable[id] = true
	}
	return o
}

func (o *observer) nudge() {
	select {
	case o.changed <- struct{}{}:
	default:
	}
}

// inFlight is the number of records received and not yet settled by a
// finished invocation. The runner merges a record received twice within
// one batching window; that cannot happen here, where the window is far
// shorter than the visibility timeout.
func (o *observer) inFlight() int64 {
	return max(o.received.Load()-o.settled.Load(), 0)
}

// onInvoke is localrun's OnInvoke hook.
func (o *observer) onInvoke(inv localrun.Invocation) {
	o.settled.Add(int64(len(inv.MessageIDs)))
	o.mu.Lock()
	for _, id := range inv.MessageIDs {
		o.deliveries[id]++
		if inv.Outcome == localrun.OutcomeCrash {
			o.crashedIDs[id] = true
		}
	}
	if inv.Outcome != localrun.OutcomeSuccess {
		why := ""
		if inv.Err != nil {
			// Lambda's messages start "RequestId: ... Error: "; the rest says it.
			_, after, found := strings.Cut(inv.Err.Message, "Error: ")
			if !found {
				after = inv.Err.Message
			}
			why = " (" + after + ")"
		}
		o.note("invocation ended with " + string(inv.Outcome) + why + "; its " + strconv.Itoa(len(inv.MessageIDs)) +
			" record(s) stay on the queue until their visibility timeout ends")
	}
	o.mu.Unlock()
	o.nudge()
}

// onProcess is localrun's OnProcess hook.
func (o *observer) onProcess(ev localrun.ProcessEvent) {
	if ev.Kind != localrun.ProcessStarted || ev.Start <= 1 {
		return
	}
	o.mu.Lock()
	o.restarts++
	o.note("runner started a new function process (pid " + strconv.Itoa(ev.PID) + ") in slot " + strconv.Itoa(ev.Instance))
	o.mu.Unlock()
}

// crashed reports whether a message was in an invocation that crashed.
func (o *observer) crashed(messageID string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.crashedIDs[messageID]
}

// takeEvents returns the notable lines gathered since the last call.
func (o *observer) takeEvents() []event {
	o.mu.Lock()
	defer o.mu.Unlock()
	ev := o.events
	o.events = nil
	return ev
}

// snapshot copies the counters.
func (o *observer) snapshot() (outcomes map[string]int, byKey map[string]map[string]int, deliveries map[string]int, restarts int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	outcomes = make(map[string]int, len(o.outcomes))
	for k, v := range o.outcomes {
		outcomes[k] = v
	}
	byKey = make(map[string]map[string]int, len(o.byKey))
	for k, m := range o.byKey {
		c := make(map[string]int, len(m))
		for kk, v := range m {
			c[kk] = v
		}
		byKey[k] = c
	}
	deliveries = make(map[string]int, len(o.deliveries))
	for k, v := range o.deliveries {
		deliveries[k] = v
	}
	return outcomes, byKey, deliveries, o.restarts
}

// event is a notable line and when it was observed.
type event struct {
	at   time.Time
	text string
}

// note adds a notable line; the caller holds o.mu.
func (o *observer) note(text string) {
	o.events = append(o.events, event{at: time.Now(), text: text})
}

// logLine is the part of a function log line (AWS_LAMBDA_LOG_FORMAT=JSON)
// the demo reads.
type logLine struct {
	Message string `json:"message"`
	Key     string `json:"key"`
	OrderID string `json:"order_id"`
	Outcome string `json:"outcome"`
	Reason  string `json:"reason"`
	Attempt int    `json:"attempt"`
	Point   string `json:"point"`
}

const recordPrefix = "lambdaidem: record "

// emfPrefix starts the function's CloudWatch Embedded Metric Format lines
// (package emf writes the "_aws" directive first). They share the output
// with the log lines and are skipped: the demo counts records from the
// library's log lines, and a metric line is no record.
var emfPrefix = []byte(`{"_aws":`)

// line takes one line of function output.
func (o *observer) line(b []byte) {
	var l logLine
	if len(b) == 0 || b[0] != '{' || bytes.HasPrefix(b, emfPrefix) || json.Unmarshal(b, &l) != nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case strings.HasPrefix(l.Message, recordPrefix) && l.Outcome != "":
		o.outcomes[l.Outcome]++
		if o.byKey[l.Key] == nil {
			o.byKey[l.Key] = map[string]int{}
		}
		o.byKey[l.Key][l.Outcome]++
		if !o.notable[l.Key] {
			return
		}
		switch l.Outcome {
		case "in_progress":
			o.note(l.Key + ": delivered again while attempt " + strconv.Itoa(l.Attempt) + " still runs; the library holds it back (in_progress)")
		case "failed":
			o.note(l.Key + ": attempt " + strconv.Itoa(l.Attempt) + " failed; SQS will deliver it again")
		case "dead_lettered":
			o.note(l.Key + ": dead-lettered after attempt " + strconv.Itoa(l.Attempt) + " (reason " + l.Reason + ")")
		case "processed":
			o.note(l.Key + ": processed on attempt " + strconv.Itoa(l.Attempt))
		case "duplicate", "duplicate_cached":
			o.note(l.Key + ": duplicate delivery acknowledged without running the handler")
		}
	case l.Message == "lambdaidem: took over an abandoned lease" && o.notable[l.Key]:
		o.note(l.Key + ": attempt " + strconv.Itoa(l.Attempt) + " took over the lease the crashed process abandoned")
	case l.Message == "crashing on purpose" && o.notable[l.OrderID]:
		o.note(l.OrderID + ": handler exits the process on attempt " + strconv.Itoa(l.Attempt) + " (" + l.Point + ")")
	}
}

// countingSQS counts the messages the runner receives.
type countingSQS struct {
	localrun.SQSAPI
	o *observer
}

func (c countingSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	out, err := c.SQSAPI.ReceiveMessage(ctx, in, optFns...)
	if err == nil && out != nil {
		c.o.received.Add(int64(len(out.Messages)))
	}
	return out, err
}
