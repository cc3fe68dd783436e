// Package mutant holds test-only switches that re-introduce known bugs
// ("mutants") into the library, so the simulator's power to find each one
// can be measured. Without the build tag lambdaidem_mutants, On is a
// constant false the compiler removes: production pays nothing.
//
// A mutant is one line at the place the bug would be:
//
//	if mutant.On("complete-no-token") { ... the buggy behaviour ... }
//
// and one row in the simulator's mutant table (sim.Mutants).
package mutant
