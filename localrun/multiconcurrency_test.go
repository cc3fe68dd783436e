package localrun_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lambdaidem/go-lambdaidem/localrun"
)

// Rule: with ProcessConcurrency N one process runs N invocations at once
// (Lambda Managed Instances, AWS_LAMBDA_MAX_CONCURRENCY), and the
// decorator, its cache, the lease heartbeat and the EMF hook stay correct
// there: the function is built with -race, shares one store between all
// invocations, and receives overlapping invocations of shared keys.
func TestMultiConcurrencyProcess(t *testing.T) {
	t.Parallel()
	const perProcess = 4
	b := setup(t, queueOpts{visibility: "1"}, func(c *localrun.Config) {
		c.Bootstrap = raceBootstrap
		c.BatchSize = 1
		c.MaxConcurrency = perProcess
		c.ProcessConcurrency = perProcess
		c.FunctionTimeout = 20 * time.Second
		c.Env = []string{
			fmt.Sprintf("IDEMFN_BARRIER=%d", perProcess),
			"GORACE=halt_on_error=1",
		}
	})

	// First the barrier: it opens only when perProcess handlers run at
	// once, which one process can only do with that many GET /next in
	// flight. Then 10 keys, 3 copies each, overlapping across invocations.
	var ids []string
	for i := range perProcess {
		ids = append(ids, b.sendTo("", fmt.Sprintf(`{"key":"barrier-%d","do":"barrier"}`, i)))
	}
	want := map[string]int{}
	for range 3 {
		for k := range 10 {
			key := fmt.Sprintf("k%d", k)
			ids = append(ids, b.sendTo("", fmt.Sprintf(`{"key":%q}`, key)))
			want[key] = 1
		}
	}
	for i := range perProcess {
		want[fmt.Sprintf("barrier-%d", i)] = 1
	}

	deleted := map[string]bool{}
	invocations := 0
	for len(deleted) < len(ids) {
		inv := b.next(nil)
		invocations++
		switch {
		case inv.Outcome == localrun.OutcomeSuccess:
		case inv.Outcome == localrun.OutcomeFunctionError && inv.Err != nil && inv.Err.Type == "BatchError":
			// A copy that arrived while its key was held elsewhere (or a
			// barrier message SQS handed out again after its one-second
			// visibility timeout while the barrier was still closed) is
			// reported in progress; a one-record batch that failed is a
			// function error. SQS keeps the message, and the effect
			// count below is what must hold.
		default:
			t.Fatalf("invocation %s: %s (%v)", inv.RequestID, inv.Outcome, inv.Err)
		}
		for _, id := range inv.Deleted {
			deleted[id] = true
		}
	}
	s := b.runner.Stats()
	if s.MaxInFlight != perProcess || s.MaxProcesses != 1 || s.ProcessStarts != 1 {
		t.Errorf("in flight %d, processes %d, starts %d; want %d invocations in one process started once",
			s.MaxInFlight, s.MaxProcesses, s.ProcessStarts, perProcess)
	}

	effects := map[string]int{}
	emfEvents := 0
	sc := bufio.NewScanner(strings.NewReader(b.out.String()))
	sc.Buffer(make([]byte, 0, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "DATA RACE") {
			t.Errorf("the race detector fired in the function:\n%s", b.out.String())
			break
		}
		if key, ok := strings.CutPrefix(line, "effect "); ok {
			effects[key]++
			continue
		}
		var ev struct {
			AWS *json.RawMessage `json:"_aws"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.AWS != nil {
			emfEvents++
		}
	}
	for key, n := range want {
		if effects[key] != n {
			t.Errorf("key %s took effect %d times, want once (all effects: %v)", key, effects[key], effects)
		}
	}
	if emfEvents < invocations {
		t.Errorf("%d EMF events for %d invocations, want at least one each", emfEvents, invocations)
	}
}
