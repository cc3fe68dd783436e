package sim

import "testing"

// TestWaitingRequests guards the waiting request streams: with
// WithWaitForCompletion on, through Wrap and through httpidem, requests
// must actually wait, and waiters must answer both with stored results and
// with the failures of the runs they waited for, under every invariant.
// A stream whose requests never met a run in progress would check nothing
// while every scenario passed.
func TestWaitingRequests(t *testing.T) {
	for _, http := range []bool{false, true} {
		var waiters, replays, failures int
		for seed := uint64(1); seed <= 30; seed++ {
			cfg := Draw(seed, nil, "wait")
			cfg.HTTP = http
			res := Run(seed, cfg, nil, false)
			if res.Failed() {
				t.Fatalf("http=%v seed %d: %v\nreplay: go test ./lambdaidemtest/internal/sim -run TestSimulation -sim.seed=%d -sim.scenario='%s'",
					http, seed, res.Violations, seed, cfg)
			}
			waiters += res.Waiters
			replays += res.WaiterReplays
			failures += res.WaiterFailures
		}
		t.Logf("http=%v: %d waiting requests, %d answered with a stored result, %d with the failure they waited for", http, waiters, replays, failures)
		if waiters == 0 || replays == 0 || failures == 0 {
			t.Errorf("http=%v: %d waiting requests, %d stored results, %d failures in 30 scenarios: want each", http, waiters, replays, failures)
		}
	}
}
