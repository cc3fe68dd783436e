package sim

// Mutant is one re-introduced bug: its switch name (see package
// internal/mutant), what it breaks, and generator settings that reach it
// (the known-bug knobs it needs, a config filter).
type Mutant struct {
	Name   string
	What   string
	Known  []string
	Filter string
}

// Mutants is the table `make mutants` runs: each must be found within the
// budget. To add one, put `if mutant.On("name") { ... }` where the bug
// would be, and add a row here.
var Mutants = []Mutant{
	{Name: "complete-no-token", What: "Complete applies without the lease-token condition"},
	{Name: "claim-no-expiry", What: "Claim takes over an IN_PROGRESS lease before it expired"},
	{Name: "ack-before-dlq-send", What: "a failed dead-letter send is acknowledged as dead-lettered"},
	{Name: "cache-non-completed", What: "the cache remembers a key that is still IN_PROGRESS"},
}
