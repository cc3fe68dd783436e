package sim

// Mutant is one re-introduced bug: its switch name (see package
// internal/mutant), what it breaks, the file that holds its switch, and
// generator settings that reach it (the known-bug knobs it needs, a config
// filter).
type Mutant struct {
	Name string
	What string
	// Where is the module-relative path of the one production file whose
	// mutant.On(Name) switches the bug on; TestMutantTableMatchesSwitches
	// holds the table and the sources to each other.
	Where  string
	Known  []string
	Filter string
}

// Mutants is the table `make mutants` runs: each must be found within the
// budget. To add one, put `if mutant.On("name") { ... }` (or
// `name := mutant.On("name")` on a line of its own) where the bug would
// be, and add a row here naming that file.
var Mutants = []Mutant{
	{Name: "complete-ignores-lease-token", Where: "lambdaidem/memstore/store.go",
		What: "Complete applies without the lease-token condition"},
	{Name: "claim-takes-live-lease", Where: "lambdaidem/memstore/store.go",
		What: "Claim takes over an IN_PROGRESS lease before it expired"},
	{Name: "ack-failed-dead-letter-send", Where: "lambdaidem/deadletter.go",
		What: "a failed dead-letter send is acknowledged as dead-lettered"},
	{Name: "cache-in-progress-key", Where: "lambdaidem/sqsrecord.go",
		What: "the cache remembers a key that is still IN_PROGRESS"},
	{Name: "http-answers-uncommitted-writes", Where: "httpidem/httpidem.go", Filter: "wrap,tx",
		What: "httpidem answers the handler's 2xx although its completion writes did not commit"},
	{Name: "redrive-resets-any-record", Where: "lambdaidem/store.go", Filter: "redrive",
		What: "redrive resets whatever record the key has (COMPLETED, another copy's)"},
	{Name: "redrive-resends-its-own-copies", Where: "sqsqueue/redrive.go", Filter: "redrive",
		What: "a redrive run sends back the new copies of messages it sent back"},
	{Name: "redrive-reset-uncounted", Where: "lambdaidem/memstore/reset.go", Filter: "redrive",
		What: "a reset starts the record's attempts over without counting the redrive"},
	{Name: "heartbeat-handler-outlives-lease", Where: "lambdaidem/handler.go", Filter: "heartbeat,faults",
		What: "with a heartbeat, the handler's context outlives a lease whose extension failed"},
	{Name: "cache-outlives-retention", Where: "lambdaidem/sqsrecord.go", Filter: "cache",
		What: "a completion is cached past the record's retention and result retention"},
	{Name: "at-most-once-retries-cancelled", Where: "lambdaidem/sqsrecord.go", Filter: "amo",
		What: "at-most-once makes an attempt cancelled at its deadline retryable"},
	{Name: "unrecorded-completion-reruns", Where: "lambdaidem/sqsrecord.go", Filter: "failany,faults",
		What: "a container runs again a completion it acknowledged unrecorded"},
	{Name: "lease-margin-unchecked", Where: "lambdaidem/options.go",
		What: "a lease no longer than the deadline margin is accepted; handlers start dead"},
	{Name: "key-panic-crashes-batch", Where: "lambdaidem/sqs.go",
		What: "a panicking key function crashes the whole batch"},
	{Name: "wrap-fails-unstorable-result", Where: "lambdaidem/wrap.go", Filter: "wrap",
		What: "Wrap records FAILED after a success whose result cannot be stored"},
	{Name: "dead-letter-without-lease", Where: "lambdaidem/deadletter.go",
		What: "a holder that lost its lease dead-letters (and acknowledges) finished work"},
	{Name: "wrap-replays-through-float64", Where: "lambdaidem/wrap.go", Filter: "wrap",
		What: "Wrap replays integers above 2^53 through float64"},
	{Name: "refusal-after-timeout-trusted", Where: "lambdaidem/retry.go", Filter: "tx,faults,late",
		What: "a completion refused after an earlier try timed out is taken as refused, though that try may still land"},
	{Name: "release-force-frees-live-lease", Where: "lambdaidem/memstore/admin.go", Filter: "forget",
		What: "a forced release of a live lease makes the key claimable at once, beside its holder"},
	{Name: "observed-handler-shares-invocation-context", Where: "lambdaidem/sqs.go", Filter: "observe",
		What: "with an observer, handlers run under the invocation's shared context instead of their record's"},
	{Name: "redrive-deletes-unrun-copy", Where: "sqsqueue/redrive.go", Filter: "redrive,conflict,forget",
		What: "redrive deletes a copy as done when its key completed with another payload (after a forget or an expiry, or a key_already_dead_lettered copy)"},
}
