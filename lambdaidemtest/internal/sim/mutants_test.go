//go:build lambdaidem_mutants

package sim

import (
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/lambdaidem/go-lambdaidem/internal/mutant"
)

var flagMutant = flag.String("sim.mutant", "", "run only this mutant (with -sim.seed, replay its failure)")

// TestMutants runs the simulator against each mutant until the first
// failure and prints the table: mutant, seconds to the first failure,
// seed. A mutant not found within the budget fails the test.
func TestMutants(t *testing.T) {
	budget := *flagBudget
	var table strings.Builder
	fmt.Fprintf(&table, "| mutant | what it breaks | found after (s) | scenarios | seed |\n|---|---|---|---|---|\n")
	for _, m := range Mutants {
		if *flagMutant != "" && m.Name != *flagMutant {
			continue
		}
		mutant.Set(m.Name)
		seed := freshSeed()
		if *flagSeed != 0 {
			seed = *flagSeed
		}
		st := Explore(Options{Budget: budget, Seed: seed, Known: append(known(), m.Known...), Filter: m.Filter})
		mutant.Set("")
		if st.Failure == nil {
			t.Errorf("mutant %s not found in %s (%d scenarios from seed %d)", m.Name, budget, st.Scenarios, seed)
			fmt.Fprintf(&table, "| %s | %s | not found in %s | %d | from %d |\n", m.Name, m.What, budget, st.Scenarios, seed)
			continue
		}
		fmt.Fprintf(&table, "| %s | %s | %.2f | %d | %d |\n", m.Name, m.What, st.Elapsed.Seconds(), st.Scenarios, st.Failure.Seed)
		t.Logf("%s: %s", m.Name, st.Failure.Violations[0])
	}
	t.Logf("budget %s per mutant\n%s", budget, table.String())
}
