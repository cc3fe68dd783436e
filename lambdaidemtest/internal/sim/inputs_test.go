package sim

import "testing"

// TestInputsReachTheQueue holds the generator to the inputs a queue may
// send that a plain draw never made: without any filter word, a share of
// the scenarios must deliver one key twice in a batch, in more than one
// FIFO group, in a batched claim that names it twice, and bodies near the
// size limit, some of whose dead-letter copies fit only cut and some not
// at all; and every scenario stays green. A generator that stopped making
// one of them would check nothing of it while every scenario passed.
func TestInputsReachTheQueue(t *testing.T) {
	const n = 300
	var twice, shared, claims, large, copies, tooLarge int
	var sTwice, sShared, sClaims, sLarge int
	for seed := uint64(1); seed <= n; seed++ {
		cfg := Draw(seed, nil, "")
		res := Run(seed, cfg, nil, false)
		if res.Failed() {
			t.Fatalf("seed %d: %v\nreplay: go test ./lambdaidemtest/internal/sim -run TestSimulation -sim.seed=%d", seed, res.Violations, seed)
		}
		twice += res.KeyTwiceBatches
		shared += res.SharedKeys
		claims += res.KeyTwiceClaims
		large += res.LargeDeliveries
		copies += res.LargeCopies
		tooLarge += res.TooLarge
		if res.KeyTwiceBatches > 0 {
			sTwice++
		}
		if res.SharedKeys > 0 {
			sShared++
		}
		if res.KeyTwiceClaims > 0 {
			sClaims++
		}
		if res.LargeDeliveries > 0 {
			sLarge++
		}
	}
	share := func(k int) float64 { return float64(k) / n }
	switch {
	case share(sTwice) < 0.2, share(sShared) < 0.05, share(sClaims) < 0.01, share(sLarge) < 0.03, copies == 0, tooLarge == 0:
		t.Errorf("too rare: want a key twice in a batch in 20%% of the scenarios, keys in several FIFO groups in 5%%, batched claims naming a key twice in 1%%, bodies near the limit in 3%%, and their dead-letter copies both sent and refused")
	}
	t.Logf("%d scenarios: a key twice in a batch in %d (%d batches), keys in several FIFO groups in %d (%d keys), batched claims naming a key twice in %d (%d claims), bodies near the limit in %d (%d deliveries; %d dead-letter copies sent, %d too large)",
		n, sTwice, twice, sShared, shared, sClaims, claims, sLarge, large, copies, tooLarge)
}
