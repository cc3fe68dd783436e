package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/lambdaidem/go-lambdaidem/cmd/internal/harness"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// ReasonSQSRedrive labels a DLQ message that SQS's redrive policy moved
// there (no library metadata): the backstop, not the library's decision.
const ReasonSQSRedrive = "sqs_redrive"

// Summary is the outcome of one run. The invariants (Lost,
// DuplicateEffects, PoisonDeadLettered) come from what the run left
// behind: the effects table, the DLQ and the idempotency records. The
// outcome counts come from the library's log lines and the runner.
type Summary struct {
	Elapsed time.Duration

	Sent         int // messages sent
	UniqueOrders int
	Deliveries   int // records handed to the function, redeliveries included
	Invocations  int
	HandlerRuns  int // claims of a key: the handler ran (or crashed) once per claim
	Effects      int // rows in the effects table
	// DuplicatesSuppressed are deliveries acknowledged without running the
	// handler because the key was already done.
	DuplicatesSuppressed int
	// HeldBack are deliveries refused while another attempt held the key
	// (in_progress); SQS delivers them again later.
	HeldBack       int
	FailedAttempts int
	// DeadLettered counts DLQ messages by reason.
	DeadLettered map[string]int
	Crashes      int // invocations that ended with the process exiting
	Timeouts     int
	Restarts     int // function processes started to replace one

	// Lost are orders with neither an effect nor a DLQ message.
	Lost []string
	// DuplicateEffects maps orders with more than one effect to their count.
	DuplicateEffects map[string]int
	// PoisonDeadLettered reports whether every poison order is in the DLQ
	// with reason poison.
	PoisonDeadLettered bool

	// PerMode is how each function did on "one effect per order".
	PerMode map[Mode]ModeSummary

	Rows []Row

	// Violations lists the broken invariants; empty means the run passed.
	Violations []string
}

// ModeSummary is one function's tally: of the orders that must have an
// effect (all but poison ones), how many have exactly one.
type ModeSummary struct {
	Orders     int // orders that must have an effect
	ExactlyOne int
	Effects    int // effect rows in the function's table
}

// Row is one line of the per-scenario table.
type Row struct {
	Mode        Mode
	Scenario    Scenario
	Orders      int
	Messages    int
	Deliveries  int
	HandlerRuns int
	Effects     int
	DLQ         string // reasons, or "-"
	Outcomes    string // library outcomes of the deliveries
}

// OK reports whether every invariant held.
func (s *Summary) OK() bool { return len(s.Violations) == 0 }

// summarize reads back what the run left behind and builds the summary.
func summarize(ctx context.Context, h *harness.Harness, w harness.Workload, start time.Time) (*Summary, error) {
	t := harness.Tally{Effects: map[string]int{}, DLQ: map[string][]string{}}
	for _, m := range Modes {
		counts, err := h.CountBy(ctx, h.EffectsTable(functionName[m]), "order_id")
		if err != nil {
			return nil, fmt.Errorf("scan effects: %w", err)
		}
		for id, n := range counts { // the two functions' order IDs differ
			t.Effects[id] += n
		}
	}
	dlq, err := h.ReadDLQ(ctx)
	if err != nil {
		return nil, err
	}
	for _, d := range dlq {
		reason := ReasonSQSRedrive // no library metadata: SQS's redrive moved it
		switch {
		case d.Err != nil:
			return nil, fmt.Errorf("read DLQ: %w", d.Err)
		case d.Library:
			reason = string(d.Reason)
		}
		id := orderID(d.Body)
		t.DLQ[id] = append(t.DLQ[id], reason)
	}
	attempts := map[string]int{}
	for _, m := range Modes {
		keys := harness.Workload{Messages: w.Where(func(o harness.Message) bool { return modeOf(o) == m })}.Keys()
		recs, err := harness.ReadRecords(ctx, h.Store(), namespaceOf(m), keys)
		if err != nil {
			return nil, err
		}
		for k, r := range recs {
			attempts[k] = r.Attempts
		}
	}
	obs := h.Obs.Snapshot()
	stats := h.Stats()
	outcomes := obs.Outcomes

	s := &Summary{
		Elapsed:              time.Since(start),
		Sent:                 int(h.Sent()),
		UniqueOrders:         len(w.Messages),
		Deliveries:           int(stats.Records),
		Invocations:          int(stats.Batches),
		DuplicatesSuppressed: outcomes["duplicate"] + outcomes["duplicate_cached"] + outcomes["duplicate_dead_lettered"] + outcomes["late_replay"],
		HeldBack:             outcomes["in_progress"],
		FailedAttempts:       outcomes["failed"],
		DeadLettered:         map[string]int{},
		Crashes:              int(stats.Crashes),
		Timeouts:             int(stats.Timeouts),
		Restarts:             obs.Restarts,
		PoisonDeadLettered:   true,
		PerMode:              map[Mode]ModeSummary{},
	}
	for _, n := range t.Effects {
		s.Effects += n
	}
	for _, n := range attempts {
		s.HandlerRuns += n
	}
	for _, reasons := range t.DLQ {
		for _, r := range reasons {
			s.DeadLettered[r]++
		}
	}
	keys := w.Keys()
	s.Lost = t.Lost(keys)
	s.DuplicateEffects = t.Duplicates(keys)
	for _, o := range w.Messages {
		if o.Poison && !slices.Contains(t.DLQ[o.Key], string(idemstore.ReasonPoison)) {
			s.PoisonDeadLettered = false
		}
		ms := s.PerMode[modeOf(o)]
		ms.Effects += t.Effects[o.Key]
		if !o.Poison {
			ms.Orders++
			if t.Effects[o.Key] == 1 {
				ms.ExactlyOne++
			}
		}
		s.PerMode[modeOf(o)] = ms
	}
	// Orders in the effects table that the workload never sent would mean
	// the tables are not this run's: say so rather than count.
	for _, id := range slices.Sorted(maps.Keys(t.Effects)) {
		if _, ok := w.Find(id); !ok {
			s.Violations = append(s.Violations, fmt.Sprintf("effect for unknown order %q", id))
		}
	}
	if n := len(s.Lost); n > 0 {
		s.Violations = append(s.Violations, fmt.Sprintf("%d lost order(s): %s", n, strings.Join(s.Lost, ", ")))
	}
	if n := len(s.DuplicateEffects); n > 0 {
		var parts []string
		for _, id := range slices.Sorted(maps.Keys(s.DuplicateEffects)) {
			parts = append(parts, fmt.Sprintf("%s×%d", id, s.DuplicateEffects[id]))
		}
		s.Violations = append(s.Violations, fmt.Sprintf("%d order(s) with a duplicate effect: %s", n, strings.Join(parts, ", ")))
	}
	if !s.PoisonDeadLettered {
		s.Violations = append(s.Violations, "the poison order is not in the DLQ with reason poison")
	}

	for _, m := range Modes {
		for _, sc := range Scenarios {
			orders := w.Where(func(o harness.Message) bool { return modeOf(o) == m && o.Scenario == string(sc) })
			if len(orders) == 0 {
				continue
			}
			row := Row{Mode: m, Scenario: sc, Orders: len(orders)}
			reasons, outs := map[string]int{}, map[string]int{}
			for _, o := range orders {
				row.Messages += o.Sends()
				row.Deliveries += obs.Deliveries[o.Key]
				row.HandlerRuns += attempts[o.Key]
				row.Effects += t.Effects[o.Key]
				for _, r := range t.DLQ[o.Key] {
					reasons[r]++
				}
				for k, n := range obs.ByKey[o.Key] {
					outs[k] += n
				}
			}
			row.DLQ = harness.CountList(reasons)
			row.Outcomes = harness.CountList(outs)
			s.Rows = append(s.Rows, row)
		}
	}
	return s, nil
}

// orderID reads order_id from a body; "" when there is none.
func orderID(body string) string {
	var v struct {
		OrderID string `json:"order_id"`
	}
	_ = json.Unmarshal([]byte(body), &v)
	return v.OrderID
}

// Print writes the summary as a table a person reads at a glance.
func (s *Summary) Print(w io.Writer) {
	check := harness.Verdict
	dl := 0
	for _, n := range s.DeadLettered {
		dl += n
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "lambdaidem demo summary (%.1fs)\n", s.Elapsed.Seconds())
	fmt.Fprintln(w, strings.Repeat("-", 100))
	line := func(label string, n int, note string) {
		fmt.Fprintf(w, "  %-24s %6d   %s\n", label, n, note)
	}
	line("sent messages", s.Sent, fmt.Sprintf("%d producer copies", s.Sent-s.UniqueOrders))
	line("unique orders", s.UniqueOrders, "")
	line("deliveries", s.Deliveries, fmt.Sprintf("in %d invocations, redeliveries included", s.Invocations))
	line("handler runs", s.HandlerRuns, "claims of an order's key, crashed attempt included")
	line("effects", s.Effects, "rows in the two effects tables")
	line("duplicates suppressed", s.DuplicatesSuppressed, "acknowledged without running the handler")
	line("held back (in progress)", s.HeldBack, "delivered while another attempt held the key")
	line("failed attempts", s.FailedAttempts, "left to SQS to deliver again")
	line("dead-lettered", dl, harness.CountList(s.DeadLettered))
	line("crashes", s.Crashes, fmt.Sprintf("process exits (plain: before the effect; transactional: after it); %d processes restarted", s.Restarts))
	if s.Timeouts > 0 {
		line("timeouts", s.Timeouts, "invocations killed at the function timeout")
	}
	line("lost", len(s.Lost), check(len(s.Lost) > 0)+"  (orders with neither an effect nor a DLQ message)")
	line("duplicate effects", len(s.DuplicateEffects), check(len(s.DuplicateEffects) > 0)+"  (orders with more than one effect)")
	fmt.Fprintf(w, "  %-24s %6s   %s\n", "poison order in DLQ", yesNo(s.PoisonDeadLettered), check(!s.PoisonDeadLettered)+"  (with reason poison)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "  exactly one effect per order, by effect mode:")
	notes := map[Mode]string{
		ModePlain:         "effect = own PutItem; crash before the effect",
		ModeTransactional: "effect commits with the completion; crash after the effect, before completion",
	}
	for _, m := range Modes {
		ms := s.PerMode[m]
		fmt.Fprintf(w, "    %-14s %4d of %-4d %-4s  %d effect rows; %s\n", m, ms.ExactlyOne, ms.Orders,
			check(ms.ExactlyOne != ms.Orders), ms.Effects, notes[m])
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  %-13s %-11s %6s %8s %10s %8s %7s  %-10s %s\n", "mode", "scenario", "orders", "messages", "deliveries", "handler", "effects", "DLQ", "library outcomes")
	for _, r := range s.Rows {
		fmt.Fprintf(w, "  %-13s %-11s %6d %8d %10d %8d %7d  %-10s %s\n", r.Mode, r.Scenario, r.Orders, r.Messages, r.Deliveries, r.HandlerRuns, r.Effects, r.DLQ, r.Outcomes)
	}
	fmt.Fprintln(w, strings.Repeat("-", 100))
	if s.OK() {
		fmt.Fprintln(w, "PASS: every order has exactly one effect or a DLQ message with its reason")
		return
	}
	for _, v := range s.Violations {
		fmt.Fprintf(w, "FAIL: %s\n", v)
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
