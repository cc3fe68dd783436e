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
