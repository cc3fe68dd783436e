package sim

// Mutant is one re-introduced bug: its switch name (see package
// internal/mutant), what it breaks, and generator settings that reach it
// (the known-bug knobs it needs, a config filter).
type Mutant struct {
	Name   string
	What   string
	Known  []string
	Filter string
	// Stores names the real stores that carry the switch too ("dynamo",
	// "redis"): TestMutantsOnStores runs it against them.
	Stores []string
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
	{Name: "stale-poison", What: "12: a holder that lost its lease dead-letters (and acknowledges) finished work", Filter: "poison"},
	{Name: "wrap-float-replay", What: "13: Wrap replays integers above 2^53 through float64", Filter: "wrap"},
	// Found by the simulation after issue 11's fixes.
	{Name: "refusal-after-timeout", What: "a completion refused after an earlier try timed out is taken as refused, though that try may still land", Filter: "tx,faults,late"},
	{Name: "failed-reclaimed-by-other-payload", What: "a FAILED record is claimed by a message with another payload, which runs and completes the key", Filter: "conflict,failing",
		Stores: []string{"dynamo", "redis"}},
	{Name: "anonymous-shares-caller-key", What: "httpidem stores requests without a caller under the caller string anonymous, a real caller's key space", Filter: "callers"},
	{Name: "release-force-frees-live-lease", What: "a forced release of a live lease makes the key claimable at once, beside its holder", Filter: "forget"},
	{Name: "redrive-deletes-unrun-copy", What: "redrive deletes a copy as done when its key completed with another payload (after a forget or an expiry, or a key_already_dead_lettered copy)", Filter: "redrive,conflict,forget"},
}

// Promise is one promise the README and the packages' documentation make,
// the invariant that checks it and the mutants that break it. `make
// mutants` prints the table with the seconds each row's slowest mutant
// took to be found (docs/promises.md).
type Promise struct {
	Promise   string
	Invariant Invariant
	Mutants   []string
}

// Promises is the promise table. Every row has a mutant in Mutants, and
// every mutant is in a row (TestPromisesHaveMutants).
var Promises = []Promise{
	{"Nothing is lost: every message the event source deletes had its effect or has a dead-letter copy of its own", InvLost,
		[]string{"ack-before-dlq-send"}},
	{"At most one effect per key and generation, outside the documented crash window (a crash or a lease that ran out between the effect and the completion)", InvRepeats,
		[]string{"wrap-large-fails"}},
	{"Effects committed with the completion (AddCompletionWrite) happen exactly once, crashes included", InvTxOnce,
		[]string{"complete-no-token"}},
	{"Key conflicts: a key's effect comes from the payload of its generation's first claim; another payload never runs on that generation and is dead-lettered as key_conflict", InvWhose,
		[]string{"failed-reclaimed-by-other-payload"}},
	{"At-most-once (WithAtMostOnce): never two effects in a generation; an uncertain attempt is dead-lettered as outcome_unknown", InvAMO,
		[]string{"amo-cancel-retry"}},
	{"Every dead-letter copy has a reason, and the reason is true; finished work never goes to the DLQ", InvReasons,
		[]string{"stale-poison", "refusal-after-timeout"}},
	{"Redrive resets only a record its own copy dead-lettered", InvRedriveReset,
		[]string{"redrive-reset-any"}},
	{"Redrive never deletes a copy whose payload never ran", InvRedriveKeeps,
		[]string{"redrive-deletes-unrun-copy"}},
	{"Redrive ends: a run handles each key once, and every reset counts against MaxRedrives", InvRedriveEnds,
		[]string{"redrive-endless", "redrive-uncounted"}},
	{"The warm container's cache never answers for a key that is not completed, nor past the key's or the result's retention", InvCache,
		[]string{"cache-non-completed", "cache-outlives-retention"}},
	{"Never two live handlers on one key; a lease an operator revokes (release --force, forget --force) stops its handler at its heartbeat's next extension", InvTwoHandlers,
		[]string{"claim-no-expiry", "heartbeat-unbounded", "release-force-frees-live-lease"}},
	{"httpidem: one caller's stored response never reaches another caller", InvCallers,
		[]string{"anonymous-shares-caller-key"}},
	{"Wrap and httpidem replays return what the first call returned", InvReplay,
		[]string{"wrap-float-replay"}},
	{"No success is acknowledged (SQS record, Wrap result, HTTP 2xx) whose committed effect did not commit", InvAckEffect,
		[]string{"http-2xx-uncommitted"}},
	{"A completion that could not be recorded is written on the next delivery to the same container, never run again there", InvUnrecorded,
		[]string{"unrecorded-rerun"}},
	{"Progress: a handler always gets a live context after its claim; one record's bad key never crashes its batch", InvProgress,
		[]string{"lease-margin-unchecked", "key-panic-crash"}},
}
