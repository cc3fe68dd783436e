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
	// the ID is the source message's, DeadLetterMessageID the DLQ copy's
	// (NoCopy for a key dead-lettered without one; see CopyID).
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
	// Resolution is the latest operator decision on an unknown outcome
	// (Admin.Resolve), "" when there was none; ResolutionNote says who
	// took it, when, why and about which dead-letter copy
	// (ResolveRequest.StoredNote). Later writes of the generation keep
	// both (a key resolved not_applied keeps them while it runs again),
	// so the record shows its history; only the next Resolve replaces
	// them, and a fresh generation starts without.
	Resolution     Resolution
	ResolutionNote string
}

// Resolution is an operator's decision on a record whose outcome is
// unknown: DEAD_LETTERED with ReasonOutcomeUnknown, its at-most-once
// attempt having ended (a crash, a timeout, a panic, a return after its
// context ended) without a recorded outcome. Only a person who looked
// at the effect's target (the payment provider, the mailbox, the next
// queue) can say whether it happened; Admin.Resolve records what they
// found.
type Resolution string

// The decisions of Admin.Resolve.
const (
	// ResolutionApplied: the effect happened. The record becomes
	// COMPLETED and the key is never run again in this generation; its
	// dead-letter copy is done work (redrive deletes it).
	ResolutionApplied Resolution = "applied"
	// ResolutionNotApplied: the effect did not happen. The record is
	// reset as a redrive resets it (FAILED, attempts 0, one more
	// redrive, RedrivenFrom the copy), so the key may run once more: its
	// dead-letter copy is sent back.
	ResolutionNotApplied Resolution = "not_applied"
	// ResolutionAbandoned: nobody will run it. The record stays
	// DEAD_LETTERED, marked abandoned; no reset applies to it, so no
	// redrive ever sends its copy back, and a later message with the key
	// never runs (the decorator dead-letters it as
	// key_already_dead_lettered).
	ResolutionAbandoned Resolution = "abandoned"
)

// NoCopy is the DeadLetterMessageID of a record dead-lettered without a
// copy in any queue: a Wrap or HTTP key whose outcome is unknown.
const NoCopy = "none"

// CopyID returns the ID of the record's dead-letter copy, or "" when it
// has none (never dead-lettered, or dead-lettered without one: NoCopy).
func (r Record) CopyID() string {
	if r.DeadLetterMessageID == NoCopy {
		return ""
	}
	return r.DeadLetterMessageID
}

// Uncertain reports whether the record waits for an operator's decision:
// DEAD_LETTERED with ReasonOutcomeUnknown and not abandoned.
func (r Record) Uncertain() bool {
	return r.Status == StatusDeadLettered && r.DeadLetterReason == ReasonOutcomeUnknown && r.Resolution != ResolutionAbandoned
}

// Abandoned reports whether an operator abandoned the record: it stays
// DEAD_LETTERED and is never reset.
func (r Record) Abandoned() bool {
	return r.Status == StatusDeadLettered && r.Resolution == ResolutionAbandoned
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
