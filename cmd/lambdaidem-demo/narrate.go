package main

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lambdaidem/go-lambdaidem/cmd/internal/harness"
	"github.com/lambdaidem/go-lambdaidem/localrun"
)

// narrator tells the run as it goes: a progress line every tick, and the
// notable moments of the special orders (a crash, a takeover, a delivery
// held back, a dead-lettering) as they are observed. It reads the
// harness's observer through its hooks; none of it decides an invariant.
type narrator struct {
	h       *harness.Harness
	notable map[string]bool // keys whose moments are told

	mu     sync.Mutex
	events []event // moments not yet printed
}

// event is a notable line and when it was observed.
type event struct {
	at   time.Time
	text string
}

// narrate hooks a narrator onto h's observer. The special orders (all but
// plain and duplicate ones) are told.
func narrate(h *harness.Harness, w harness.Workload) *narrator {
	n := &narrator{h: h, notable: map[string]bool{}}
	for _, m := range w.Messages {
		if m.Scenario != string(ScenarioPlain) && m.Scenario != string(ScenarioDuplicate) {
			n.notable[m.Key] = true
		}
	}
	h.Obs.OnLine = n.line
	h.Obs.OnInvoke = n.invoke
	h.Obs.OnProcess = n.process
	h.OnPhase = func(harness.Phase) { n.flush() } // what led up to a phase comes first
	return n
}

// tick is the progress line, and the moments gathered since the last.
func (n *narrator) tick(final bool) {
	n.flush()
	if final {
		return
	}
	o := n.h.Obs.Snapshot().Outcomes
	n.h.Log.Printf("%-5s sent %d  received %d  in flight %d  | processed %d  duplicates %d  held back %d  failed %d  dead-lettered %d",
		n.h.Phase(), n.h.Sent(), n.h.Obs.Received(), n.h.Obs.InFlight(),
		o["processed"], o["duplicate"]+o["duplicate_cached"], o["in_progress"], o["failed"], o["dead_lettered"])
}

func (n *narrator) flush() {
	n.mu.Lock()
	ev := n.events
	n.events = nil
	n.mu.Unlock()
	for _, e := range ev {
		n.h.Log.PrintAt(e.at, "  %s", e.text)
	}
}

func (n *narrator) note(text string) {
	n.mu.Lock()
	n.events = append(n.events, event{at: time.Now(), text: text})
	n.mu.Unlock()
}

// line tells the library's lines about the special orders, and the orders
// example's own "crashing on purpose".
func (n *narrator) line(l harness.LogLine) {
	attempt := strconv.Itoa(l.Attempt)
	switch {
	case l.IsRecord() && n.notable[l.Key]:
		switch l.Outcome {
		case "in_progress":
			n.note(l.Key + ": delivered again while attempt " + attempt + " still runs; the library holds it back (in_progress)")
		case "failed":
			n.note(l.Key + ": attempt " + attempt + " failed; SQS will deliver it again")
		case "dead_lettered":
			n.note(l.Key + ": dead-lettered after attempt " + attempt + " (reason " + l.Reason + ")")
		case "processed":
			n.note(l.Key + ": processed on attempt " + attempt)
		case "duplicate", "duplicate_cached":
			n.note(l.Key + ": duplicate delivery acknowledged without running the handler")
		}
	case l.Message == "lambdaidem: took over an abandoned lease" && n.notable[l.Key]:
		n.note(l.Key + ": attempt " + attempt + " took over the lease the crashed process abandoned")
	case l.Message == "crashing on purpose" && n.notable[l.OrderID]:
		n.note(l.OrderID + ": handler exits the process on attempt " + attempt + " (" + l.Point + ")")
	}
}

// invoke tells an invocation that did not succeed.
func (n *narrator) invoke(inv localrun.Invocation) {
	if inv.Outcome == localrun.OutcomeSuccess {
		return
	}
	why := ""
	if inv.Err != nil {
		// Lambda's messages start "RequestId: ... Error: "; the rest says it.
		_, after, found := strings.Cut(inv.Err.Message, "Error: ")
		if !found {
			after = inv.Err.Message
		}
		why = " (" + after + ")"
	}
	n.note("invocation ended with " + string(inv.Outcome) + why + "; its " + strconv.Itoa(len(inv.MessageIDs)) +
		" record(s) stay on the queue until their visibility timeout ends")
}

// process tells a process the runner started to replace one.
func (n *narrator) process(ev localrun.ProcessEvent) {
	if ev.Kind == localrun.ProcessStarted && ev.Start > 1 {
		n.note("runner started a new function process (pid " + strconv.Itoa(ev.PID) + ") in slot " + strconv.Itoa(ev.Instance))
	}
}
