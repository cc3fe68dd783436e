package sim

import (
	"strings"
	"testing"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// TestUnkeyableMessagesGoWithTheirReason draws many messages that cannot
// be keyed (a panicking key function, a body that is not JSON) with a
// dead-letter sink: every invariant must hold, the sink's check of each
// copy's reason included, and both reasons must actually be sent.
func TestUnkeyableMessagesGoWithTheirReason(t *testing.T) {
	sent := map[idemstore.Reason]int{}
	for seed := uint64(1); seed <= 20; seed++ {
		cfg := Draw(seed, nil, "nofaults")
		cfg.BadKey, cfg.Sink, cfg.SinkFail = 0.6, true, 0
		res := Run(seed, cfg, nil, true)
		if res.Failed() {
			t.Fatalf("seed %d: %v\nreplay: go test ./lambdaidemtest/internal/sim -run TestSimulation -sim.seed=%d -sim.scenario='%s'", seed, res.Violations, seed, cfg)
		}
		for _, r := range []idemstore.Reason{idemstore.ReasonMissingKey, idemstore.ReasonMalformedBody} {
			sent[r] += strings.Count(res.Trace, "("+string(r)+") as ")
		}
	}
	if sent[idemstore.ReasonMissingKey] == 0 || sent[idemstore.ReasonMalformedBody] == 0 {
		t.Fatalf("dead-letter copies by reason %v in 20 scenarios: want both missing_key and malformed_body", sent)
	}
	t.Logf("dead-letter copies by reason: %v", sent)
}
