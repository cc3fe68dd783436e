// Package mutant holds test-only switches that re-introduce known bugs
// ("mutants") into the library, so the simulator's power to find each one
// can be measured. Without the build tag lambdaidem_mutants, On is a
// constant false the compiler removes: production pays nothing.
//
// A mutant is one line of its own at the place the bug would be, named by
// the behaviour it breaks:
//
//	if mutant.On("complete-ignores-lease-token") { ... the buggy behaviour ... }
//
// or, where the bug removes one part of a condition, a flag on its own line
// that the condition below reads:
//
//	acceptDeadLease := mutant.On("lease-margin-unchecked")
//
// never a call inside a compound condition. Each switch has one row in the
// simulator's mutant table (sim.Mutants) naming its file; a test of the sim
// package holds the two to each other.
package mutant
