//go:build lambdaidem_mutants

package mutant

import "sync/atomic"

// Enabled reports whether this build carries the mutant switches.
const Enabled = true

var active atomic.Pointer[string]

// On reports whether the named mutant is active.
func On(name string) bool {
	p := active.Load()
	return p != nil && *p == name
}

// Set activates one mutant ("" for none).
func Set(name string) { active.Store(&name) }
