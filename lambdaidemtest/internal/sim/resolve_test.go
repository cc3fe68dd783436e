package sim

import (
	"testing"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// The resolve draws reach every decision an operator takes on an unknown
// outcome (each then held to InvResolve), and redrives that send
// outcome_unknown copies back by name.
func TestResolveReachesEveryDecision(t *testing.T) {
	for _, d := range []idemstore.Resolution{idemstore.ResolutionApplied, idemstore.ResolutionNotApplied, idemstore.ResolutionAbandoned} {
		if n := reach(t, "resolve", func(r *Result) int { return r.Decisions[d] }); n == 0 {
			t.Errorf("no %s decision in 40 scenarios drawn with the resolve filter", d)
		}
	}
}

// On DynamoDB Local and redis-server, the resolve draws reach the
// operator's decisions through those stores' own Resolve, under every
// invariant.
func TestResolveOnStores(t *testing.T) {
	for name, store := range map[string]func(*testing.T) idemstore.Store{"dynamo": dynamoStore, "redis": redisStore} {
		t.Run(name, func(t *testing.T) {
			st := store(t)
			decided := map[idemstore.Resolution]int{}
			for seed := uint64(1); seed <= 40 && len(decided) < 3; seed++ {
				cfg := Draw(seed, nil, "resolve")
				res := Run(seed, cfg, st, false)
				if res.Failed() {
					t.Fatalf("seed %d on %s: %v\nscenario: %s", seed, name, res.Violations, cfg)
				}
				for d, n := range res.Decisions {
					decided[d] += n
				}
			}
			if len(decided) < 3 {
				t.Errorf("decisions on %s: %v; want each of applied, not_applied and abandoned", name, decided)
			}
		})
	}
}
