package chaos

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/lambdaidem/go-lambdaidem/cmd/internal/harness"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/localrun"
)

// Report is what one run injected and what it observed. The invariants are
// decided from the effects table, the DLQ and the idempotency records;
// the function's logs explain duplicates (which completion was never
// recorded, which attempt took over an abandoned lease).
type Report struct {
	Mode    Mode
	Batched bool // lambdaidem.WithBatchedWrites
	Seed    uint64

	// Injected.
	Messages       int            // distinct messages (keys)
	Sends          int            // messages sent, duplicates included
	DuplicateSends int            // sends of a key already sent
	Crashes        map[string]int // messages per crash point
	Poison         int
	Slow           int
	StoreRequests  int // the function's DynamoDB requests (through the proxy)
	StoreFaults    map[FaultKind]int

	// Observed.
	Deliveries      int // records handed to the function, redeliveries included
	Invocations     map[localrun.Outcome]int
	ProcessRestarts int
	CrashesSeen     map[string]int // crash lines in the logs, per point
	Outcomes        map[string]int // the library's per-record outcomes
	Effects         int            // rows in the effects table
	KeysWithEffect  int
	// DuplicateEffects counts effects beyond the first, over all keys.
	DuplicateEffects   int
	KeysWithDuplicates int
	// UnrecordedEffects counts effects whose completion the logs show was
	// never recorded: a crash after the effect, a crash during completion
	// whose request was not answered 200, completion_unrecorded or
	// lease_lost outcomes, a failed effect write, or an invocation that
	// crashed or timed out before the record's "processed" line.
	UnrecordedEffects int
	// UnexplainedEffects are effects with neither a "processed" line nor
	// a reason to lack one. Reported, not an invariant: a log line can be
	// cut short by a kill.
	UnexplainedEffects int
	Takeovers          int // "took over an abandoned lease" lines
	DLQ                map[idemstore.Reason]int
	DLQWithoutReason   int
	Records            map[idemstore.Status]int
	PoisonMaxRuns      int // most handler runs of one poison message
	PoisonMaxAttempts  int // most attempts of a poison key (record or DLQ)
	InnocentDLQ        int // non-poison keys in the DLQ
	OtherOutputLines   int // function output that was not a JSON log line
	Lost               []string
	// Trails tell, for each lost key, what happened to its messages.
	Trails map[string][]string

	Drained  time.Duration // from start until the queue drained and the runners stopped
	Duration time.Duration // the whole run, reading results included

	// Violations lists every broken invariant; empty means the run passed.
	Violations []string
}

// name is the run's mode as the table heads it.
func (r Report) name() string { return Config{Mode: r.Mode, Batched: r.Batched}.name() }

// OK reports whether every invariant held.
func (r Report) OK() bool { return len(r.Violations) == 0 }

// report derives the report from the facts and the logs.
func (r *run) report(f facts) Report {
	seen := r.h.Obs.Snapshot()
	o := r.obs
	o.mu.Lock()
	defer o.mu.Unlock()
	cfg := r.cfg
	rep := Report{
		Mode:             cfg.Mode,
		Batched:          cfg.Batched,
		Seed:             cfg.Seed,
		Messages:         len(r.workload.Messages),
		Sends:            r.workload.Sends(),
		Crashes:          map[string]int{},
		StoreFaults:      r.plan.snapshot(),
		Invocations:      seen.Invocations,
		ProcessRestarts:  seen.Restarts,
		CrashesSeen:      map[string]int{},
		Outcomes:         seen.Outcomes,
		DLQ:              map[idemstore.Reason]int{},
		Records:          map[idemstore.Status]int{},
		OtherOutputLines: seen.OtherLines,
	}
	rep.DuplicateSends = rep.Sends - rep.Messages
	// Counted by line: the optimistic mode's unleased crashes of one key
	// share attempt 0.
	maps.Copy(rep.CrashesSeen, o.crashLines)
	for _, n := range o.takeovers {
		rep.Takeovers += n
	}
	dlqByKey := map[string][]dlqEntry{}
	for _, e := range f.dlq {
		if !e.parsed || e.reason == "" {
			rep.DLQWithoutReason++
			continue
		}
		rep.DLQ[e.reason]++
		dlqByKey[e.key] = append(dlqByKey[e.key], e)
	}
	for _, rec := range f.records {
		rep.Records[rec.Status]++
	}

	for _, m := range r.workload.Messages {
		switch {
		case m.Crash != "":
			rep.Crashes[m.Crash]++
		case m.Poison:
			rep.Poison++
		case m.Sleep > 0:
			rep.Slow++
		}
	}

	var unexplainedDup, noTakeover, txUncommitted, poisonOver, poisonNotDLQ []string
	for _, m := range r.workload.Messages {
		rows := f.effects[m.Key]
		dl := dlqByKey[m.Key]
		rep.Effects += len(rows)
		if len(rows) > 0 {
			rep.KeysWithEffect++
		}
		dup := max(len(rows)-1, 0)
		if dup > 0 {
			rep.DuplicateEffects += dup
			rep.KeysWithDuplicates++
		}
		if len(rows) == 0 && len(dl) == 0 {
			rep.Lost = append(rep.Lost, m.Key)
			if rep.Trails == nil {
				rep.Trails = map[string][]string{}
			}
			rep.Trails[m.Key] = append([]string(nil), o.trail[m.Key]...)
		}
		if len(dl) > 0 && !m.Poison {
			rep.InnocentDLQ++
		}
		switch cfg.Mode {
		case ModePlain:
			unrecorded := 0
			for _, row := range rows {
				switch o.completion(row, seen.InvocationOutcome) {
				case completionUnrecorded:
					unrecorded++
				case completionUnknown:
					rep.UnexplainedEffects++
				}
			}
			rep.UnrecordedEffects += unrecorded
			if dup > unrecorded {
				unexplainedDup = append(unexplainedDup, fmt.Sprintf("%s (%d effects, %d unrecorded)", m.Key, len(rows), unrecorded))
			}
			reruns := o.takeovers[m.Key]
			for ak := range o.writeFailed {
				if ak.key == m.Key {
					reruns++
				}
			}
			if dup > reruns {
				noTakeover = append(noTakeover, fmt.Sprintf("%s (%d duplicates, %d takeovers)", m.Key, dup, reruns))
			}
		case ModeTx, ModeOptimistic:
			if len(rows) == 1 {
				// The effect is the completing claim's: its attempt is
				// the record's. An optimistic first delivery holds no
				// lease (attempt 0): its commit wrote its message ID on
				// the record.
				row := rows[0]
				rec, ok := f.records[m.Key]
				mine := rec.Attempts == row.attempt
				if row.attempt == 0 {
					mine = rec.MessageID == row.messageID
				}
				if !ok || rec.Status != idemstore.StatusCompleted || !mine {
					txUncommitted = append(txUncommitted, fmt.Sprintf("%s (effect of attempt %d by message %s, record %s at attempt %d by %s)",
						m.Key, row.attempt, row.messageID, rec.Status, rec.Attempts, rec.MessageID))
				}
			}
		}
		if m.Poison {
			runs := o.poisonRuns[m.Key]
			attempts := f.records[m.Key].Attempts
			hasPoison := false
			for _, e := range dl {
				attempts = max(attempts, e.attempts)
				hasPoison = hasPoison || e.reason == idemstore.ReasonPoison
			}
			rep.PoisonMaxRuns = max(rep.PoisonMaxRuns, runs)
			rep.PoisonMaxAttempts = max(rep.PoisonMaxAttempts, attempts)
			if runs > cfg.MaxAttempts || attempts > cfg.MaxAttempts {
				poisonOver = append(poisonOver, fmt.Sprintf("%s (%d runs, %d attempts)", m.Key, runs, attempts))
			}
			if !hasPoison {
				poisonNotDLQ = append(poisonNotDLQ, m.Key)
			}
		}
	}

	v := func(format string, args ...any) {
		rep.Violations = append(rep.Violations, fmt.Sprintf(format, args...))
	}
	if len(rep.Lost) > 0 {
		v("lost: %d keys have no effect and no DLQ entry: %s", len(rep.Lost), harness.Sample(rep.Lost))
	}
	if cfg.Mode.committed() && rep.DuplicateEffects > 0 {
		v("transactional completion: %d duplicate effects (want 0) on %d keys", rep.DuplicateEffects, rep.KeysWithDuplicates)
	}
	if len(txUncommitted) > 0 {
		v("transactional completion: %d effects not committed by the key's completing claim: %s", len(txUncommitted), harness.Sample(txUncommitted))
	}
	if cfg.Mode == ModePlain && rep.DuplicateEffects > rep.UnrecordedEffects {
		v("at-least-once: %d duplicate effects exceed the %d effects whose completion was never recorded", rep.DuplicateEffects, rep.UnrecordedEffects)
	}
	if len(unexplainedDup) > 0 {
		v("at-least-once: %d keys have more duplicates than unrecorded completions: %s", len(unexplainedDup), harness.Sample(unexplainedDup))
	}
	if len(noTakeover) > 0 {
		v("at-least-once: %d keys have duplicates without a lease takeover in the logs: %s", len(noTakeover), harness.Sample(noTakeover))
	}
	if rep.DLQWithoutReason > 0 {
		v("%d DLQ entries carry no reason", rep.DLQWithoutReason)
	}
	if len(poisonOver) > 0 {
		v("%d poison messages were tried past the maximum of %d: %s", len(poisonOver), cfg.MaxAttempts, harness.Sample(poisonOver))
	}
	if len(poisonNotDLQ) > 0 {
		v("%d poison messages are not in the DLQ with reason poison: %s", len(poisonNotDLQ), harness.Sample(poisonNotDLQ))
	}
	return rep
}

// completion says whether an effect's completion was recorded.
type completion int

const (
	completionRecorded completion = iota
	completionUnrecorded
	completionUnknown
)

// completion classifies an effect row from the logs and how its
// invocation ended; the caller holds o.mu.
func (o *observer) completion(row effectRow, invocations map[string]localrun.Outcome) completion {
	ak := attemptKey{row.key, row.attempt}
	if o.processed[ak] {
		return completionRecorded
	}
	if c, ok := o.crashes[ak]; ok {
		if c.point == CrashDuringCompletion && c.status == 200 {
			return completionRecorded
		}
		return completionUnrecorded
	}
	if o.unrecorded[ak] != "" || o.writeFailed[ak] {
		return completionUnrecorded
	}
	switch invocations[row.requestID] {
	case localrun.OutcomeCrash, localrun.OutcomeTimeout, localrun.OutcomeStopped:
		// The process died (another record's crash, or the deadline)
		// before this record's outcome was logged.
		return completionUnrecorded
	}
	return completionUnknown
}

// Print writes the reports side by side as one table: what was injected,
// what was observed, and the verdict of each.
func Print(w io.Writer, reports ...Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(label string, cell func(Report) string) {
		fmt.Fprintf(tw, "%s\t", label)
		for _, r := range reports {
			fmt.Fprintf(tw, "%s\t", cell(r))
		}
		fmt.Fprintln(tw)
	}
	n := func(f func(Report) int) func(Report) string {
		return func(r Report) string { return fmt.Sprint(f(r)) }
	}
	section := func(title string) { row(title, func(Report) string { return "" }) }

	row("mode", func(r Report) string { return r.name() })
	row("seed", func(r Report) string { return fmt.Sprint(r.Seed) })
	section("injected")
	row("  messages (keys)", n(func(r Report) int { return r.Messages }))
	row("  sends", n(func(r Report) int { return r.Sends }))
	row("  duplicate sends (same key, new message ID)", n(func(r Report) int { return r.DuplicateSends }))
	for _, p := range CrashPoints {
		row("  crash "+p, n(func(r Report) int { return r.Crashes[p] }))
	}
	row("  poison messages", n(func(r Report) int { return r.Poison }))
	row("  slow messages (outlive the visibility timeout)", n(func(r Report) int { return r.Slow }))
	row("  store requests of the function", n(func(r Report) int { return r.StoreRequests }))
	for _, k := range FaultKinds {
		row("  store fault "+string(k), n(func(r Report) int { return r.StoreFaults[k] }))
	}
	section("observed")
	row("  deliveries (redeliveries included)", n(func(r Report) int { return r.Deliveries }))
	for _, oc := range outcomeKeys(reports, func(r Report) []string {
		var ks []string
		for k := range r.Invocations {
			ks = append(ks, string(k))
		}
		return ks
	}) {
		row("  invocations "+oc, n(func(r Report) int { return r.Invocations[localrun.Outcome(oc)] }))
	}
	row("  process restarts", n(func(r Report) int { return r.ProcessRestarts }))
	for _, p := range CrashPoints {
		row("  crashes seen "+p, n(func(r Report) int { return r.CrashesSeen[p] }))
	}
	for _, oc := range outcomeKeys(reports, func(r Report) []string { return slices.Collect(maps.Keys(r.Outcomes)) }) {
		row("  record outcome "+oc, n(func(r Report) int { return r.Outcomes[oc] }))
	}
	row("  lease takeovers", n(func(r Report) int { return r.Takeovers }))
	row("  effects", n(func(r Report) int { return r.Effects }))
	row("  keys with an effect", n(func(r Report) int { return r.KeysWithEffect }))
	row("  duplicate effects", n(func(r Report) int { return r.DuplicateEffects }))
	row("  effects with unrecorded completion", n(func(r Report) int { return r.UnrecordedEffects }))
	row("  effects without an explained outcome", n(func(r Report) int { return r.UnexplainedEffects }))
	for _, reason := range outcomeKeys(reports, func(r Report) []string {
		var ks []string
		for k := range r.DLQ {
			ks = append(ks, string(k))
		}
		return ks
	}) {
		row("  DLQ "+reason, n(func(r Report) int { return r.DLQ[idemstore.Reason(reason)] }))
	}
	row("  DLQ without reason", n(func(r Report) int { return r.DLQWithoutReason }))
	row("  non-poison keys in the DLQ", n(func(r Report) int { return r.InnocentDLQ }))
	row("  poison: most handler runs / attempts", func(r Report) string { return fmt.Sprintf("%d / %d", r.PoisonMaxRuns, r.PoisonMaxAttempts) })
	for _, st := range []idemstore.Status{idemstore.StatusCompleted, idemstore.StatusInProgress, idemstore.StatusFailed, idemstore.StatusDeadLettered} {
		row("  records "+string(st), n(func(r Report) int { return r.Records[st] }))
	}
	row("  lost", n(func(r Report) int { return len(r.Lost) }))
	row("  drained in", func(r Report) string { return r.Drained.Round(100 * time.Millisecond).String() })
	row("  whole run", func(r Report) string { return r.Duration.Round(100 * time.Millisecond).String() })
	row("invariants", func(r Report) string {
		if r.OK() {
			return "OK"
		}
		return fmt.Sprintf("%d BROKEN", len(r.Violations))
	})
	_ = tw.Flush()
	for _, r := range reports {
		for _, v := range r.Violations {
			fmt.Fprintf(w, "BROKEN (%s, seed %d): %s\n", r.name(), r.Seed, v)
		}
		for _, key := range r.Lost {
			fmt.Fprintf(w, "trail of lost key %s (%s):\n", key, r.name())
			for _, line := range r.Trails[key] {
				fmt.Fprintf(w, "  %s\n", line)
			}
		}
	}
}

// outcomeKeys is the sorted union of the keys the reports have.
func outcomeKeys(reports []Report, keys func(Report) []string) []string {
	set := map[string]bool{}
	for _, r := range reports {
		for _, k := range keys(r) {
			set[k] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}
