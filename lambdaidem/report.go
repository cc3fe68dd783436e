package lambdaidem

import "time"

// Outcome is what happened to one record.
type Outcome string

// The outcomes of a record. Acknowledged outcomes are reported to Lambda as
// done; the others as failed, so SQS keeps the message.
const (
	// OutcomeProcessed: the handler ran and its completion was recorded.
	OutcomeProcessed Outcome = "processed"
	// OutcomeDuplicate: the key completed before with the same payload.
	OutcomeDuplicate Outcome = "duplicate"
	// OutcomeCachedDuplicate: as OutcomeDuplicate, answered from the local
	// cache without a store request.
	OutcomeCachedDuplicate Outcome = "duplicate_cached"
	// OutcomeLateReplay: a duplicate of a completed key whose result had
	// expired; acknowledged without running, counted as suspicious.
	OutcomeLateReplay Outcome = "late_replay"
	// OutcomeDeadLetteredDuplicate: a redelivery of the very message that
	// was dead-lettered.
	OutcomeDeadLetteredDuplicate Outcome = "duplicate_dead_lettered"
	// OutcomeDeadLettered: sent to the dead-letter queue (see Reason).
	OutcomeDeadLettered Outcome = "dead_lettered"
	// OutcomeUnrecorded: the handler succeeded but its completion could not
	// be written; the record stays IN_PROGRESS until its lease runs out. The
	// message is acknowledged, since its effect happened. (With completion
	// writes, whose effect is the completion's transaction, the outcome is
	// OutcomeStoreError and the message is kept instead.)
	OutcomeUnrecorded Outcome = "completion_unrecorded"

	// OutcomeLeaseLost: the handler succeeded but its lease had been taken
	// over; the new holder records the outcome. Reported failed, so the
	// redelivery sees that outcome and nothing depends on the new holder
	// succeeding.
	OutcomeLeaseLost Outcome = "lease_lost"
	// OutcomeFailed: the handler failed; retried by SQS.
	OutcomeFailed Outcome = "failed"
	// OutcomeConflict: same key, different payload, and no dead-letter sink.
	OutcomeConflict Outcome = "conflict"
	// OutcomeInProgress: another holder has a valid lease on the key.
	OutcomeInProgress Outcome = "in_progress"
	// OutcomeDeadLetterFailed: should have been dead-lettered, but the send
	// failed (or no sink is configured); SQS keeps the message.
	OutcomeDeadLetterFailed Outcome = "dead_letter_failed"
	// OutcomeStoreError: the store could not be reached; nothing recorded.
	OutcomeStoreError Outcome = "store_error"
	// OutcomeNotStarted: too little time was left to claim the record.
	OutcomeNotStarted Outcome = "not_started"
	// OutcomeSkippedGroup: an earlier record of its FIFO group, or an
	// earlier copy of its key in the same batch, was not acknowledged, so
	// this one did not run.
	OutcomeSkippedGroup Outcome = "skipped_fifo_group"
	// OutcomeMissingKey: no key could be derived and no sink is configured.
	OutcomeMissingKey Outcome = "missing_key"
	// OutcomeMalformedBody: the body is malformed for the key or payload
	// hash options (ErrMalformedBody) and no sink is configured.
	OutcomeMalformedBody Outcome = "malformed_body"
)

// RecordReport is what happened to one record of an invocation, or to one
// call of a function made idempotent by Wrap (as observers see it; see
// Observer). For a Wrap call, MessageID and MessageGroupID are empty, Acked
// reports that the call returned without an error, and Outcome is the
// nearest SQS outcome: processed (fn ran and its completion was recorded),
// duplicate (a stored result replayed, or ErrResultNotStored), late_replay,
// duplicate_dead_lettered (ErrDeadLettered, ErrOutcomeUnknown for a key
// marked before), in_progress, conflict, failed (fn's error, or writes the
// store refused), dead_lettered with ReasonOutcomeUnknown (WithAtMostOnce
// marked the key now), completion_unrecorded, lease_lost, store_error,
// not_started, missing_key or malformed_body.
type RecordReport struct {
	MessageID string
	Key       string
	Outcome   Outcome
	// Acked reports whether the record was reported to Lambda as done.
	Acked bool
	// Reason is set for dead-letter outcomes.
	Reason  Reason
	Attempt int
	Err     error
	// HandlerRan and HandlerDuration describe the handler call, if any.
	HandlerRan      bool
	HandlerDuration time.Duration
	// Takeover reports that the claim took over an abandoned lease.
	Takeover bool
	// StoreCalls counts the Store methods called for this record.
	StoreCalls int
	// StoreErrors counts store calls for this record that failed, including
	// failure and dead-letter marks that could not be written.
	StoreErrors int
	// VisibilityErr is set when the decorator tried to change the record's
	// visibility (RetryAfter, backoff, waiting for another holder's lease)
	// and the change failed: the message then comes back when the queue's
	// own visibility timeout ends, not when asked. The record's outcome is
	// unchanged.
	VisibilityErr error
	// Waited is the time the record spent waiting rather than working:
	// between retries of a store write that found the store unavailable,
	// and, for a call that waits (WithWaitForCompletion), for another
	// holder's run of its key to end.
	Waited time.Duration
	// RetryDelay is how long the message was made invisible before its
	// next delivery, when the decorator asked: another holder's lease to
	// run out, RetryAfter, or the backoff. Zero when the queue's own
	// visibility timeout applies (no VisibilityChanger, or the change
	// failed: see VisibilityErr).
	RetryDelay time.Duration
	// MessageGroupID is the record's SQS MessageGroupId, if it has one: the
	// group of a FIFO queue, or the tenant of a fair queue (a standard
	// queue whose producers set a group; no order is imposed there).
	MessageGroupID string
}

// InvocationReport is what happened in one SQS invocation, for metrics.
type InvocationReport struct {
	// Namespace is the idempotency namespace of the decorated handler.
	Namespace string
	// RequestID is the Lambda request ID, when the context carries one.
	RequestID string
	Records   []RecordReport
	Failed    int
}
