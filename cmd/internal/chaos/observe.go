package chaos

import (
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdaidem/go-lambdaidem/cmd/internal/harness"
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

// observer reads, on top of the harness's observer, what the chaos run
// needs to explain its effects: which claims recorded their completion,
// which crashed where, which took over a lease, and each key's trail.
// Nothing here decides an invariant alone: the effects table, the DLQ and
// the idempotency records are the facts; the logs explain them.
type observer struct {
	obs *harness.Observer

	mu          sync.Mutex
	processed   map[attemptKey]bool
	unrecorded  map[attemptKey]string // completion_unrecorded or lease_lost
	writeFailed map[attemptKey]bool
	crashes     map[attemptKey]crashMark
	crashLines  map[string]int // point -> "chaos: crashing" lines
	takeovers   map[string]int // key -> "took over an abandoned lease" lines
	poisonRuns  map[string]int // key -> handler runs of a poison message
	effectLines int
	staged      int
	// trail keeps, per key, what happened to its messages (receives,
	// invocations, deletes, the library's lines), so a broken invariant
	// can be traced.
	trail map[string][]string
}

// newObserver hooks the chaos reading onto obs.
func newObserver(obs *harness.Observer) *observer {
	o := &observer{
		obs:         obs,
		processed:   map[attemptKey]bool{},
		unrecorded:  map[attemptKey]string{},
		writeFailed: map[attemptKey]bool{},
		crashes:     map[attemptKey]crashMark{},
		crashLines:  map[string]int{},
		takeovers:   map[string]int{},
		poisonRuns:  map[string]int{},
		trail:       map[string][]string{},
	}
	obs.OnReceive = o.received
	obs.OnLine = o.line
	obs.OnInvoke = o.invoked
	return o
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
func (o *observer) received(msgs []types.Message) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, m := range msgs {
		id := aws.ToString(m.MessageId)
		o.note(o.obs.KeyOf(id), "received %s receive#%s", id, m.Attributes["ApproximateReceiveCount"])
	}
}

func (o *observer) invoked(inv localrun.Invocation) {
	deleted := map[string]bool{}
	for _, id := range inv.Deleted {
		deleted[id] = true
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, id := range inv.MessageIDs {
		o.note(o.obs.KeyOf(id), "invocation %s ended %s; %s deleted=%v", inv.RequestID, inv.Outcome, id, deleted[id])
	}
}

func (o *observer) line(l harness.LogLine) {
	ak := attemptKey{l.Key, l.Attempt}
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case l.IsRecord():
		o.note(l.Key, "request %s: %s message %s attempt %d", l.RequestID, l.Outcome, l.MessageID, l.Attempt)
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
		o.crashLines[l.Point]++
	}
}
