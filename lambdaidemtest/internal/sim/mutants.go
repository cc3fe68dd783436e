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
	// The bugs of issue 11, by scenario number.
	{Name: "http-2xx-uncommitted", What: "1: httpidem answers the handler's 2xx although its completion writes did not commit", Filter: "wrap,tx"},
	{Name: "redrive-reset-any", What: "2: redrive resets whatever record the key has (COMPLETED, another copy's)", Filter: "redrive"},
	{Name: "redrive-endless", What: "3: a redrive run sends back the new copies of messages it sent back", Filter: "redrive"},
	{Name: "redrive-uncounted", What: "3: a reset starts the record's attempts over without counting the redrive", Filter: "redrive"},
	{Name: "heartbeat-unbounded", What: "4: with a heartbeat, the handler's context outlives a lease whose extension failed", Filter: "heartbeat,faults"},
	{Name: "cache-outlives-retention", What: "5, 6: a completion is cached past the record's retention and result retention", Filter: "cache"},
	{Name: "amo-cancel-retry", What: "7: at-most-once makes an attempt cancelled at its deadline retryable", Filter: "amo"},
	{Name: "unrecorded-rerun", What: "8: a container runs again a completion it acknowledged unrecorded", Filter: "failany,faults"},
	{Name: "lease-margin-unchecked", What: "9: a lease no longer than the deadline margin is accepted; handlers start dead"},
	{Name: "key-panic-crash", What: "10: a panicking key function crashes the whole batch"},
	{Name: "wrap-large-fails", What: "11: Wrap records FAILED after a success whose result cannot be stored", Filter: "wrap"},
	{Name: "stale-poison", What: "12: a holder that lost its lease dead-letters (and acknowledges) finished work"},
	{Name: "wrap-float-replay", What: "13: Wrap replays integers above 2^53 through float64", Filter: "wrap"},
	// Found by the simulation after issue 11's fixes.
	{Name: "refusal-after-timeout", What: "a completion refused after an earlier try timed out is taken as refused, though that try may still land", Filter: "tx,faults,late"},
	{Name: "release-force-frees-live-lease", What: "a forced release of a live lease makes the key claimable at once, beside its holder", Filter: "forget"},
	{Name: "completion-writes-unfenced", What: "the in-memory store applies a completion's writes outside its lease-fenced step (a stale holder's or a retried completion's writes land)", Filter: "tx"},
	{Name: "redrive-deletes-unrun-copy", What: "redrive deletes a copy as done when its key completed with another payload (after a forget or an expiry, or a key_already_dead_lettered copy)", Filter: "redrive,conflict,forget"},
}
