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
	// Stores, when set, names the real stores whose code holds the switch
	// ("dynamo", "redis"): TestMutantsOnStores runs it against them, and
	// TestMutants, on the in-memory store, leaves it out.
	Stores []string
}

// Mutants is the table `make mutants` runs: each must be found within the
// budget. To add one, put `if mutant.On("name") { ... }` (or
// `name := mutant.On("name")` on a line of its own) where the bug would
// be, and add a row here naming that file.
var Mutants = []Mutant{
	{Name: "commit-over-live-lease", Where: "lambdaidem/idemstore/memstore/commit.go", Filter: "optimistic",
		What: "a commit without a lease (WithOptimisticCommit) replaces a record held under a live lease"},
	{Name: "complete-ignores-lease-token", Where: "lambdaidem/idemstore/memstore/store.go",
		What: "Complete applies without the lease-token condition"},
	{Name: "claim-takes-live-lease", Where: "lambdaidem/idemstore/memstore/store.go",
		What: "Claim takes over an IN_PROGRESS lease before it expired"},
	{Name: "completion-writes-unfenced", Where: "lambdaidem/idemstore/memstore/store.go", Filter: "tx",
		What: "the in-memory store applies a completion's writes outside its lease-fenced step (a stale holder's or a retried completion's writes land)"},
	{Name: "ack-failed-dead-letter-send", Where: "lambdaidem/deadletter.go",
		What: "a failed dead-letter send is acknowledged as dead-lettered"},
	{Name: "final-mark-failure-acknowledged", Where: "lambdaidem/deadletter.go", Filter: "marks",
		What: "a message whose dead-letter copy was sent but whose final mark could not be written is acknowledged, leaving the record with only the pending mark and the copy stranded"},
	{Name: "cache-in-progress-key", Where: "lambdaidem/sqsrecord.go",
		What: "the cache remembers a key that is still IN_PROGRESS"},
	{Name: "batched-completion-unanswered-acked", Where: "lambdaidem/batched.go", Filter: "batched,tx,faults",
		What: "a batched completion the store did not answer counts as written: the record is acknowledged although its effect never committed"},
	{Name: "http-answers-uncommitted-writes", Where: "httpidem/httpidem.go", Filter: "wrap,tx",
		What: "httpidem answers the handler's 2xx although its completion writes did not commit"},
	{Name: "redrive-resets-any-record", Where: "lambdaidem/idemstore/store.go", Filter: "redrive",
		What: "redrive resets whatever record the key has (COMPLETED, another copy's)"},
	{Name: "redrive-resends-its-own-copies", Where: "sqsqueue/redrive.go", Filter: "redrive",
		What: "a redrive run sends back the new copies of messages it sent back"},
	{Name: "redrive-reset-uncounted", Where: "lambdaidem/idemstore/memstore/reset.go", Filter: "redrive",
		What: "a reset starts the record's attempts over without counting the redrive"},
	{Name: "heartbeat-handler-outlives-lease", Where: "lambdaidem/handler.go", Filter: "heartbeat,faults",
		What: "with a heartbeat, the handler's context outlives a lease whose extension failed"},
	{Name: "cache-outlives-retention", Where: "lambdaidem/sqsrecord.go", Filter: "cache",
		What: "a completion is cached past the record's retention and result retention"},
	{Name: "at-most-once-retries-cancelled", Where: "lambdaidem/verdict.go", Filter: "amo",
		What: "at-most-once makes an attempt cancelled at its deadline retryable"},
	{Name: "amo-error-after-effect-retried", Where: "lambdaidem/verdict.go", Filter: "amo",
		What: "at-most-once retries a handler error returned while its context was live (the old behaviour): an error after the effect runs the effect again"},
	{Name: "declared-unknown-retried", Where: "lambdaidem/verdict.go", Filter: "declared",
		What: "a handler's OutcomeUnknown is retried in at-least-once mode as a plain failure"},
	{Name: "takeover-ignores-pending-mark", Where: "lambdaidem/sqsrecord.go", Filter: "declared",
		What: "a takeover of a lease whose holder was dead-lettering its message (a pending mark: outcome unknown without a sink, a copy not sent) runs the handler again"},
	{Name: "unrecorded-completion-reruns", Where: "lambdaidem/sqsrecord.go", Filter: "failany,faults",
		What: "a container runs again a completion it acknowledged unrecorded"},
	{Name: "lease-margin-unchecked", Where: "lambdaidem/check.go",
		What: "a lease no longer than the deadline margin is accepted; handlers start dead"},
	{Name: "key-panic-crashes-batch", Where: "lambdaidem/sqs.go",
		What: "a panicking key function crashes the whole batch"},
	{Name: "wrap-fails-unstorable-result", Where: "lambdaidem/wrap.go", Filter: "wrap",
		What: "Wrap records FAILED after a success whose result cannot be stored"},
	{Name: "dead-letter-without-lease", Where: "lambdaidem/deadletter.go", Filter: "poison",
		What: "a holder that lost its lease dead-letters (and acknowledges) finished work"},
	{Name: "wrap-replays-through-float64", Where: "lambdaidem/wrap.go", Filter: "wrap",
		What: "Wrap replays integers above 2^53 through float64"},
	{Name: "refusal-after-timeout-trusted", Where: "lambdaidem/retry.go", Filter: "tx,faults,late",
		What: "a completion refused after an earlier try timed out is taken as refused, though that try may still land"},
	{Name: "release-force-frees-live-lease", Where: "lambdaidem/idemstore/memstore/admin.go", Filter: "forget",
		What: "a forced release of a live lease makes the key claimable at once, beside its holder"},
	{Name: "waiter-answers-failed-run-as-success", Where: "lambdaidem/wait.go", Filter: "wait",
		What: "a call waiting for a run in progress takes the run's failure for success and answers with a result nobody stored"},
	{Name: "late-extension-moves-lease-back", Where: "lambdaidem/idemstore/memstore/store.go", Filter: "wait,heartbeat,faults,late",
		What: "a heartbeat's extension held in the network lands after a later one and moves the lease's end back: a waiter takes the key over beside its live holder"},
	{Name: "observed-handler-shares-invocation-context", Where: "lambdaidem/handler.go", Filter: "observe",
		What: "with an observer, handlers run under the invocation's shared context instead of their record's"},
	{Name: "redrive-deletes-unrun-copy", Where: "sqsqueue/redrive.go", Filter: "redrive,conflict,forget",
		What: "redrive deletes a copy as done when its key completed with another payload (after a forget or an expiry, or a key_already_dead_lettered copy)"},
	{Name: "fifo-continues-after-failure", Where: "lambdaidem/sqs.go", Filter: "ordered",
		What: "a FIFO group runs and acknowledges the records after one that was not acknowledged"},
	{Name: "heartbeat-refusal-ignored", Where: "lambdaidem/heartbeat.go", Filter: "force,heartbeat",
		What: "a refused lease extension (the lease revoked by an operator) does not cancel the handler"},
	{Name: "bad-input-reason-poison", Where: "lambdaidem/deadletter.go",
		What: "a message whose key cannot be derived is dead-lettered as poison"},
	{Name: "failed-reclaimed-by-other-payload", Where: "lambdaidem/idemstore/memstore/store.go", Filter: "conflict,failing",
		What: "a FAILED record is claimed by a message with another payload, which runs and completes the key"},
	{Name: "dynamo-failed-reclaimed-by-other-payload", Where: "dynamo/store.go", Filter: "conflict,failing", Stores: []string{"dynamo"},
		What: "the DynamoDB store's claim takes a FAILED record for a message with another payload"},
	{Name: "redis-failed-reclaimed-by-other-payload", Where: "redisstore/store.go", Filter: "conflict,failing", Stores: []string{"redis"},
		What: "the Redis store's claim script takes a FAILED record for a message with another payload"},
	{Name: "anonymous-shares-caller-key", Where: "httpidem/httpidem.go", Filter: "callers",
		What: "httpidem stores requests without a caller under the caller string anonymous, a real caller's key space"},
	{Name: "fail-keeps-pending-mark", Where: "lambdaidem/idemstore/memstore/store.go",
		What: "a failure recorded after a dead-letter send failed keeps the pending mark: a later holder abandoned under at-most-once is dead-lettered with the stale reason (poison), not outcome_unknown, and a default redrive sends it back"},
	{Name: "redrive-sends-outcome-unknown", Where: "sqsqueue/redrive.go", Filter: "resolve",
		What: "redrive sends outcome_unknown copies back without being asked by name, and their effect happens again"},
	{Name: "resolve-applied-left-claimable", Where: "lambdaidem/idemstore/memstore/admin.go", Filter: "resolve",
		What: "an operator's decision that the effect happened (applied) leaves the record FAILED, so a duplicate runs the key again"},
	{Name: "effect-key-per-claim", Where: "lambdaidem/context.go", Filter: "keyed",
		What: "the effect key changes with every claim of a generation: a takeover's or a retry's request is new work downstream"},
	{Name: "resolve-abandoned-redrivable", Where: "lambdaidem/idemstore/store.go", Filter: "resolve",
		What: "a redrive's reset applies to a record an operator abandoned, and its copy runs"},
	// Every answer checked.
	{Name: "replay-answers-other-payload", Where: "lambdaidem/wrap.go", Filter: "replays",
		What: "Wrap answers a call with the stored result of a completion of another payload under its key, instead of a key conflict"},
	{Name: "duplicate-of-other-payload", Where: "lambdaidem/sqsrecord.go", Filter: "conflict",
		What: "an SQS message whose key completed with another payload is acknowledged as a duplicate, instead of dead-lettered as a key conflict"},
	{Name: "late-replay-answered", Where: "lambdaidem/wrap.go", Filter: "replays",
		What: "Wrap replays a result past its retention (WithResultRetention) instead of answering ErrLateReplay"},
	{Name: "waiter-answers-expired-result", Where: "lambdaidem/wait.go", Filter: "replays,wait",
		What: "a call waiting for a run in progress answers with the run's result although its retention ended before the call read it"},

	// Liveness.
	{Name: "heartbeat-stops-after-error", Where: "lambdaidem/heartbeat.go", Filter: "liveness",
		What: "a heartbeat stops extending the lease after one failed extension: the lease runs out under a handler that could have gone on"},
	{Name: "heartbeat-never-moves-lease", Where: "lambdaidem/heartbeat.go", Filter: "liveness",
		What: "a heartbeat's extensions ask for the end the claim granted: the handler's context ends with the first lease, however many extensions were granted"},
	{Name: "retry-counts-two-attempts", Where: "lambdaidem/idemstore/memstore/store.go", Filter: "healthy",
		What: "the in-memory store counts two attempts for a retry after a failure: a message is dead-lettered before the last attempt WithMaxAttempts allows"},
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
		[]string{"ack-failed-dead-letter-send"}},
	{"At most one effect per key and generation, outside the documented crash window (a crash or a lease that ran out between the effect and the completion) and a retry the handler asked for by failing after its effect; a handler's OutcomeUnknown is never retried", InvRepeats,
		[]string{"wrap-fails-unstorable-result", "declared-unknown-retried"}},
	{"Effects committed with the completion (AddCompletionWrite) happen exactly once, crashes included", InvTxOnce,
		[]string{"completion-writes-unfenced"}},
	{"A handler whose lease was taken over cannot record its outcome: every write after the claim is fenced by the lease token", InvStaleOutcome,
		[]string{"complete-ignores-lease-token"}},
	{"FIFO: within a message group no message runs or is acknowledged while an earlier-sent message of its group is unfinished; a group runs in send order", InvFIFO,
		[]string{"fifo-continues-after-failure"}},
	{"Key conflicts: a key's effect comes from the payload of its generation's first claim; another payload never runs on that generation and is dead-lettered as key_conflict", InvWhose,
		[]string{"failed-reclaimed-by-other-payload", "dynamo-failed-reclaimed-by-other-payload", "redis-failed-reclaimed-by-other-payload"}},
	{"At-most-once (WithAtMostOnce): never two effects in a generation, handler errors after the effect included; an uncertain attempt is dead-lettered as outcome_unknown, redrive sends its copy back only when asked by name, and an attempt recorded as outcome unknown (in either mode: OutcomeUnknown) never runs again short of an operator's decision", InvAMO,
		[]string{"at-most-once-retries-cancelled", "amo-error-after-effect-retried", "takeover-ignores-pending-mark", "redrive-sends-outcome-unknown"}},
	{"An operator's decision on an unknown outcome holds: a key resolved as applied or abandoned never runs again in its generation, one resolved as not applied runs at most once more", InvResolve,
		[]string{"resolve-applied-left-claimable", "resolve-abandoned-redrivable"}},
	{"Every dead-letter copy has a reason, and the reason is true; finished work never goes to the DLQ", InvReasons,
		[]string{"bad-input-reason-poison", "dead-letter-without-lease", "refusal-after-timeout-trusted", "fail-keeps-pending-mark"}},
	{"Redrive resets only a record its own copy dead-lettered", InvRedriveReset,
		[]string{"redrive-resets-any-record"}},
	{"Redrive never strands a dead-letter copy (a copy whose final mark could not be written keeps its source message until the mark is written) nor deletes one whose payload never ran", InvRedriveKeeps,
		[]string{"redrive-deletes-unrun-copy", "final-mark-failure-acknowledged"}},
	{"Redrive ends: a run handles each key once, and every reset counts against MaxRedrives", InvRedriveEnds,
		[]string{"redrive-resends-its-own-copies", "redrive-reset-uncounted"}},
	{"The warm container's cache never answers for a key that is not completed, nor past the key's or the result's retention", InvCache,
		[]string{"cache-in-progress-key", "cache-outlives-retention"}},
	{"Never two live handlers on one key; a lease an operator revokes (release --force, forget --force) stops its handler at its heartbeat's next extension; a late extension never moves a lease's end back", InvTwoHandlers,
		[]string{"claim-takes-live-lease", "heartbeat-handler-outlives-lease", "release-force-frees-live-lease", "heartbeat-refusal-ignored", "late-extension-moves-lease-back"}},
	{"httpidem: one caller's stored response never reaches another caller", InvCallers,
		[]string{"anonymous-shares-caller-key"}},
	{"Wrap and httpidem replays return what the first call returned", InvReplay,
		[]string{"wrap-replays-through-float64"}},
	{"A call that waits for a run in progress (WithWaitForCompletion) answers only with what the store holds: the stored result of a completion of its key and payload, or the failure recorded for the run it waited for", InvWaiters,
		[]string{"waiter-answers-failed-run-as-success"}},
	{"No success is acknowledged (SQS record, Wrap result, HTTP 2xx) whose committed effect did not commit", InvAckEffect,
		[]string{"http-answers-uncommitted-writes", "batched-completion-unanswered-acked"}},
	{"The effect key (lambdaidem.EffectKey) is one per key and generation: every retry, takeover and redrive of a generation gives the downstream the key it gave before, so a system keyed by it applies the effect once", InvKeyed,
		[]string{"effect-key-per-claim"}},
	{"A completion that could not be recorded is written on the next delivery to the same container, never run again there", InvUnrecorded,
		[]string{"unrecorded-completion-reruns"}},
	{"Progress: a handler always gets a live context after its claim; one record's bad key never crashes its batch", InvProgress,
		[]string{"lease-margin-unchecked", "key-panic-crashes-batch"}},
	{"The optimistic mode (WithOptimisticCommit): a commit without a lease applies only where a claim would (never over a live lease, a finished key, another payload or an abandoned lease whose holder was dead-lettering), so lease-mode and optimistic consumers on one table never both commit an effect", InvCommit,
		[]string{"commit-over-live-lease"}},
	{"Observers (WithObserver, otelidem) see every record once, with the outcome it is reported with, and its handler runs under the context the observer returned", InvObserver,
		[]string{"observed-handler-shares-invocation-context"}},
	{"A success (a Wrap result, an HTTP 2xx, an SQS duplicate acknowledged) answers only a completion of the caller's own payload; another payload under the key gets a key conflict", InvOwnPayload,
		[]string{"replay-answers-other-payload", "duplicate-of-other-payload"}},
	{"No replay after its result's retention ended (WithResultRetention, WithRetention): the call gets ErrLateReplay (HTTP 422 idempotency-key-expired), waiters included", InvLateReplay,
		[]string{"late-replay-answered", "waiter-answers-expired-result"}},
	{"Liveness: with a heartbeat, a handler that honours its context keeps its lease until the invocation's deadline while extensions are granted; a failed extension is retried at the next tick, and only a refusal stops the heartbeat", InvHeartbeat,
		[]string{"heartbeat-stops-after-error", "heartbeat-never-moves-lease"}},
	{"Liveness: in a world without faults, every message that can succeed does, within the attempts WithMaxAttempts allows", InvSucceeds,
		[]string{"retry-counts-two-attempts"}},
}
