package idemstore

import "time"

// Status is the stored state of a key. "Expired" is never stored: a record
// whose ExpiresAt has passed is treated as absent everywhere.
type Status string

// The states of a record.
const (
	// StatusInProgress: someone holds a lease on the key.
	StatusInProgress Status = "IN_PROGRESS"
	// StatusCompleted: the handler succeeded and its outcome is recorded.
	StatusCompleted Status = "COMPLETED"
	// StatusFailed: the last attempt failed; the key may be claimed again.
	StatusFailed Status = "FAILED"
	// StatusDeadLettered: the message was sent to the dead-letter queue.
	StatusDeadLettered Status = "DEAD_LETTERED"
)

// Reason says why a message was dead-lettered.
type Reason string

// The reasons a message is dead-lettered.
const (
	ReasonMaxAttempts     Reason = "max_attempts"
	ReasonPoison          Reason = "poison"
	ReasonKeyConflict     Reason = "key_conflict"
	ReasonKeyDeadLettered Reason = "key_already_dead_lettered"
	ReasonOutcomeUnknown  Reason = "outcome_unknown"
	// ReasonMissingKey: no idempotency key could be derived (a missing or
	// empty field or attribute, a key function's error or panic); the
	// message can never be processed.
	ReasonMissingKey Reason = "missing_key"
	// ReasonMalformedBody: the body is not what the key or payload hash
	// options read (not one JSON value, a field given twice, a string that
	// is not valid Unicode; see ErrMalformedBody); the message can never
	// be processed.
	ReasonMalformedBody Reason = "malformed_body"
)

// SchemaVersion is the version of the stored record layout.
const SchemaVersion = 1

// Record is one key's stored state. Field names of the stored item are the
// Store's business; these are the fields every Store keeps.
type Record struct {
	Namespace     string
	Key           string
	SchemaVersion int
	Status        Status
	// LeaseToken is the token of the latest claim. It stays on the record
	// after complete, fail and dead-letter so a retried write can recognise
	// its own success.
	LeaseToken string
	LeaseUntil time.Time
	// Attempts counts claims in this generation, including claims whose
	// holder crashed or timed out before recording an outcome.
	Attempts int
	// Takeovers counts claims that took over an expired lease: attempts that
	// were abandoned rather than failed by the handler.
	Takeovers int
	// Fence is the (generation, claim) fencing number of the latest claim.
	Fence       Fence
	PayloadHash string
	// MessageID is the message that made the latest claim.
	MessageID string
	Result    []byte
	// ResultUntil is when the result stops being replayable; zero means as
	// long as the record is kept.
	ResultUntil time.Time
	// ExpiresAt is when the record counts as absent (the table's TTL).
	ExpiresAt time.Time
	LastError string
	// DeadLetterReason and DeadLetteredMessageID are set when dead-lettered:
	// the ID is the source message's, DeadLetterMessageID the DLQ copy's.
	DeadLetterReason      Reason
	DeadLetteredMessageID string
	DeadLetterMessageID   string
	FirstAttemptAt        time.Time
	UpdatedAt             time.Time
	// Redrives counts the times a redrive reset this record after it was
	// dead-lettered (each reset starts Attempts again from zero), and
	// RedrivenFrom is the dead-letter copy the latest reset was for. A
	// redrive that finds them set knows it sent that copy back before.
	Redrives     int
	RedrivenFrom string
}

// Lease returns the lease of the record's latest claim: the one its
// LeaseToken fences (a claim hands it out; an operator or a holder that
// lost its answer rebuilds it from the record).
func (r Record) Lease() Lease {
	return Lease{Namespace: r.Namespace, Key: r.Key, Token: r.LeaseToken, Until: r.LeaseUntil, Fence: r.Fence, Attempt: r.Attempts}
}

// Expired reports whether the record counts as absent at now.
func (r Record) Expired(now time.Time) bool {
	return !r.ExpiresAt.IsZero() && r.ExpiresAt.Before(now)
}

// LeaseExpired reports whether the lease may be taken over at now.
func (r Record) LeaseExpired(now time.Time, grace time.Duration) bool {
	return r.LeaseUntil.Before(now.Add(-grace))
}

// ResultExpired reports whether the stored result may no longer be replayed.
func (r Record) ResultExpired(now time.Time) bool {
	return !r.ResultUntil.IsZero() && r.ResultUntil.Before(now)
}
