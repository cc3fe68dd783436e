package sim

import (
	"flag"
	"testing"
)

var flagCoverage = flag.Int("sim.coverage", 0, "TestCoverageScenarios: run this many scenarios without a config filter from seed 1, and a tenth as many with each config word (simcover measures what they cover)")

// TestCoverageScenarios runs a fixed set of scenarios, the same on every
// run: -sim.coverage scenarios without a config filter, from seed 1, and a
// tenth as many with each word of Filters and each of coverageCombos, from
// seed 1. Each scenario depends on
// its seed alone, so the statements they run are the same every time, and
// the list of what the simulator leaves unrun (docs/simulation.md, written
// by `make sim-coverage` with the simcover tool) cannot drift. It skips
// without -sim.coverage.
func TestCoverageScenarios(t *testing.T) {
	n := *flagCoverage
	if n <= 0 {
		t.Skip("run with -sim.coverage=N (make sim-coverage)")
	}
	runs := []struct {
		filter string
		n      int
	}{{"", n}}
	words := make([]string, 0, len(Filters)+len(coverageCombos))
	for _, f := range Filters {
		words = append(words, f.Name)
	}
	for _, w := range append(words, coverageCombos...) {
		runs = append(runs, struct {
			filter string
			n      int
		}{w, max(n/10, 1)})
	}
	total := 0
	for _, r := range runs {
		st := Explore(Options{Seed: 1, Max: r.n, Filter: r.filter})
		if st.Failure != nil {
			t.Fatalf("config %q: %s", r.filter, st.Report())
		}
		total += st.Scenarios
	}
	t.Logf("%d scenarios: %d without a config filter, %d with each of %d config words and %d combinations", total, n, max(n/10, 1), len(Filters), len(coverageCombos))
}

// coverageCombos are combinations of config words TestCoverageScenarios
// runs besides each word alone: inputs that meet only under two options.
var coverageCombos = []string{
	"keyattr,hashfields,keyforms", "keyid,hashfields,keyforms", "keyfield,keyforms",
	"http,badkeys", "rest,badkeys", "wrap,badkeys",
}
