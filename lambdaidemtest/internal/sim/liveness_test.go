package sim

import "testing"

// TestLivenessIsChecked holds the generator to reaching what the liveness
// invariants judge: heartbeat handlers whose lease ran out before the
// deadline (liveness: transient store errors under a heartbeat), and
// messages held to succeeding in a world without faults (healthy), with
// every scenario green. Checks that never met their case would pass every
// scenario and prove nothing.
func TestLivenessIsChecked(t *testing.T) {
	const n = 60
	var ended, early, held, healthy int
	for seed := uint64(1); seed <= n; seed++ {
		for _, filter := range []string{"liveness", "healthy"} {
			cfg := Draw(seed, nil, filter)
			res := Run(seed, cfg, nil, false)
			if res.Failed() {
				t.Fatalf("seed %d (%s): %v\nreplay: go test ./lambdaidemtest/internal/sim -run TestSimulation -sim.seed=%d -sim.config=%s", seed, filter, res.Violations, seed, filter)
			}
			ended += res.HeartbeatEnded
			early += res.HeartbeatEarly
			held += res.Succeeds
			if filter == "healthy" && cfg.healthy() {
				healthy++
			}
		}
	}
	t.Logf("%d scenarios each: %d heartbeat handlers saw their context end, %d before the deadline less the margin; %d of the healthy ones had no fault, %d messages held to succeeding",
		n, ended, early, healthy, held)
	if early == 0 || healthy < n/2 || held < n {
		t.Errorf("want heartbeat leases that ran out early, most healthy scenarios without a fault, and messages held to succeeding")
	}
}
