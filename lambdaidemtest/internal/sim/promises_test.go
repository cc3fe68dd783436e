package sim

import (
	"slices"
	"testing"
)

// Every promise has a mutant that breaks it, every mutant breaks a
// promise, and no name is unknown or listed twice.
func TestPromisesHaveMutants(t *testing.T) {
	inRow := map[string]int{}
	for _, p := range Promises {
		if len(p.Mutants) == 0 {
			t.Errorf("promise %q has no mutant", p.Promise)
		}
		if p.Invariant == "" {
			t.Errorf("promise %q names no invariant", p.Promise)
		}
		for _, m := range p.Mutants {
			if !slices.ContainsFunc(Mutants, func(x Mutant) bool { return x.Name == m }) {
				t.Errorf("promise %q names mutant %s, which is not in Mutants", p.Promise, m)
			}
			inRow[m]++
		}
	}
	seen := map[string]bool{}
	for _, m := range Mutants {
		if seen[m.Name] {
			t.Errorf("mutant %s is listed twice", m.Name)
		}
		seen[m.Name] = true
		if inRow[m.Name] != 1 {
			t.Errorf("mutant %s is in %d promise rows, want 1", m.Name, inRow[m.Name])
		}
	}
}
