//go:build !lambdaidem_mutants

package mutant

// Enabled reports whether this build carries the mutant switches.
const Enabled = false

// On reports whether the named mutant is active: never, in this build.
func On(string) bool { return false }

// Set activates one mutant ("" for none); a no-op in this build.
func Set(string) {}
