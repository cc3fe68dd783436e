package sim

import "testing"

// The optimistic mode runs: decorators built in it commit without a
// lease, alone and beside lease-mode decorators on one table, and its
// refusals when built are checked (the scenarios also draw WithAtMostOnce
// and WithHeartbeat with it).
func TestOptimisticScenarios(t *testing.T) {
	var all, mixed, commits, refused int
	for seed := uint64(1); seed <= 40; seed++ {
		cfg := Draw(seed, nil, "optimistic")
		res := Run(seed, cfg, nil, false)
		if res.Failed() {
			t.Fatalf("seed %d: %v\nreplay: go test ./lambdaidemtest/internal/sim -run TestSimulation -sim.seed=%d -sim.scenario='%s'",
				seed, res.Violations, seed, cfg)
		}
		switch {
		case cfg.AtMostOnce || cfg.Heartbeat > 0:
			refused++
		case cfg.Optimistic >= 1:
			all++
		default:
			mixed++
		}
		commits += res.Commits
		if res.Optimistic == 0 && !(cfg.AtMostOnce || cfg.Heartbeat > 0) && cfg.Optimistic >= 1 {
			t.Errorf("seed %d: no decorator built in the optimistic mode, with Optimistic %v", seed, cfg.Optimistic)
		}
		if res.Optimistic > 0 && (cfg.AtMostOnce || cfg.Heartbeat > 0) {
			t.Errorf("seed %d: %d decorators built in the optimistic mode with WithAtMostOnce or WithHeartbeat", seed, res.Optimistic)
		}
	}
	t.Logf("40 scenarios: %d all optimistic, %d mixed fleets, %d with options the mode refuses; %d commits applied", all, mixed, refused, commits)
	if all == 0 || mixed == 0 || refused == 0 || commits == 0 {
		t.Errorf("want scenarios of each kind and commits: %d all optimistic, %d mixed, %d refused, %d commits", all, mixed, refused, commits)
	}
}
