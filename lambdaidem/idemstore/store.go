package idemstore

import (
	"context"
	"strconv"
	"time"

	"github.com/lambdaidem/go-lambdaidem/internal/mutant"
)

// Store keeps one [Record] per (namespace, key) and moves it between states
// with conditional writes. Every method takes a request struct so that new
// fields can be added without breaking implementations.
//
// A Store must treat a record whose ExpiresAt is before the request's Now as
// absent, whatever its status: TTL deletion is late by design.
//
// Every Store must pass the conformance suite in package storetest.
type Store interface {
	// Claim takes the lease on a key. It succeeds (Claimed is true) when the
	// key is absent or expired, FAILED with the same payload hash, or
	// IN_PROGRESS with LeaseUntil < Now-Grace and the same payload hash
	// (unless NoTakeover is set). On success the record is IN_PROGRESS with a
	// new lease token, Attempts and Claim are one higher than before (Attempts
	// and Claim restart at 1 in a fresh generation), and Previous tells what
	// the claim replaced. On a refused claim, Claimed is false and Record is
	// the unexpired record that refused it; the error is nil. Its Result
	// must be present when the record is COMPLETED with the request's
	// payload hash and its result has not expired (a replay); otherwise a
	// Store may leave it out. An error is returned only when the store could not answer (wrapped
	// ErrStoreUnavailable) or the request is invalid.
	Claim(ctx context.Context, req ClaimRequest) (ClaimResult, error)

	// Complete moves a record the caller still leases to COMPLETED, storing
	// the result, and commits any extra Writes atomically with it. A lease
	// that was taken over, or a record that is no longer IN_PROGRESS, yields
	// ErrLeaseLost. A retried write that already applied is a success.
	// A Store must hold results of at least MinResultBytes; one it
	// cannot hold yields ErrResultTooLarge and records nothing. How a
	// result is kept (on the record or apart from it) is the Store's
	// business: Claim and Get return it as stored.
	Complete(ctx context.Context, req CompleteRequest) error

	// Fail moves a leased record to FAILED (retryable), keeping the token.
	// It clears a pending dead-letter mark (its reason and message ID):
	// the dead-lettering the mark stood for did not happen, and a later
	// claim's holder must not finish it.
	Fail(ctx context.Context, req FailRequest) error

	// DeadLetter moves a leased record to DEAD_LETTERED with its reason.
	// With Pending set it only confirms the lease before the dead-letter
	// copy is sent: it records the reason, error and message ID, and the
	// record stays IN_PROGRESS under the same token (a refused pending mark
	// yields ErrLeaseLost, and no copy is sent). A claim that takes such a
	// record over keeps the pending mark's reason, error and message ID on
	// the record it returns, so the new holder finishes the dead-lettering
	// instead of running the handler again.
	DeadLetter(ctx context.Context, req DeadLetterRequest) error

	// Extend moves LeaseUntil of a record the caller still leases
	// (heartbeat), and ExpiresAt when the request sets one. A refused
	// extension yields ErrLeaseLost. It never moves LeaseUntil back: an
	// extension whose LeaseUntil is before the record's (one held in the
	// network that lands after a later one) changes nothing and succeeds.
	Extend(ctx context.Context, req ExtendRequest) error

	// Get reads a record. An absent or expired record yields ErrNotFound.
	Get(ctx context.Context, req GetRequest) (Record, error)

	// Delete removes a record unconditionally (tests, tools). It is not a
	// redrive's reset: deleting a COMPLETED record, or one under a valid
	// lease, runs work twice; redrive uses DeadLetterResetter. Deleting an
	// absent record is not an error.
	Delete(ctx context.Context, req DeleteRequest) error
}

// ClaimRequest asks for the lease on one key.
type ClaimRequest struct {
	Namespace string
	Key       string
	// PayloadHash identifies the message's content; a different hash on an
	// existing record is a key conflict, never a duplicate.
	PayloadHash string
	// MessageID is the ID of the message claiming the key (SQS messageId),
	// kept on the record for operators and dead-letter bookkeeping.
	MessageID string
	// Now is the caller's clock; all conditions compare against it.
	Now time.Time
	// LeaseUntil is when the lease runs out if nobody records an outcome.
	LeaseUntil time.Time
	// Grace is how long past LeaseUntil a lease must be before another
	// claimer may take it over (clock skew between instances).
	Grace time.Duration
	// ExpiresAt is when the whole record may be forgotten (key retention).
	ExpiresAt time.Time
	// NoTakeover refuses to take over an expired IN_PROGRESS lease
	// (at-most-once mode): the claim is refused and the old record returned.
	NoTakeover bool
}

// ClaimResult is what a claim found and did.
type ClaimResult struct {
	// Claimed reports whether the caller now holds the lease.
	Claimed bool
	// Lease identifies the caller's lease when Claimed.
	Lease Lease
	// Previous is the status the claim replaced: "" for an absent or
	// expired record (a fresh generation), StatusFailed, or
	// StatusInProgress for a takeover of an expired lease.
	Previous Status
	// Record is the record as it is now: after the claim when Claimed, or
	// the record that refused the claim.
	Record Record
}

// Lease identifies one claim of a key. Its Token fences every later write:
// a write whose token no longer matches the record is refused.
type Lease struct {
	Namespace string
	Key       string
	Token     string
	Until     time.Time
	// Fence is the fencing number of this claim.
	Fence Fence
	// Attempt is the number of claims of this key in this generation,
	// including this one.
	Attempt int
}

// Fence is a fencing number: it rises with every claim of a key within a
// generation. Compare two fences only when their Generation is equal.
type Fence struct {
	Generation string
	Claim      int64
}

// CompleteRequest records success.
type CompleteRequest struct {
	Lease Lease
	Now   time.Time
	// Result is the stored outcome (JSON for Wrap; nil for SQS).
	Result []byte
	// ResultUntil is when the result may no longer be replayed; zero means
	// as long as the key is kept.
	ResultUntil time.Time
	// ExpiresAt is when the completed key may be forgotten.
	ExpiresAt time.Time
	// Writes are committed atomically with the completion. Their concrete
	// types are the Store's own; a Store that cannot commit them returns
	// ErrUnsupportedWrite and records nothing.
	Writes []any
}

// FailRequest records a retryable failure.
type FailRequest struct {
	Lease Lease
	Now   time.Time
	// Error is the failure's text, truncated by the store if needed.
	Error     string
	ExpiresAt time.Time
}

// DeadLetterRequest records that the message was sent to the dead-letter
// queue.
type DeadLetterRequest struct {
	Lease     Lease
	Now       time.Time
	Reason    Reason
	Error     string
	MessageID string // the source message that was dead-lettered
	// DeadLetterMessageID is the ID the dead-letter queue gave the copy.
	DeadLetterMessageID string
	ExpiresAt           time.Time
	// Pending marks the record as being dead-lettered before the copy is
	// sent: a write fenced by the lease token that records Reason, Error and
	// MessageID but leaves the record IN_PROGRESS, its lease, expiry and
	// DeadLetterMessageID unchanged. Only a holder whose pending mark
	// applied sends the copy, so a holder that lost its lease never does.
	Pending bool
}

// ExtendRequest moves a lease's end.
type ExtendRequest struct {
	Lease      Lease
	Now        time.Time
	LeaseUntil time.Time
	// ExpiresAt, when not zero, becomes the record's expiry, so a record
	// whose lease is extended is never forgotten while it is held. Callers
	// pass a time after LeaseUntil plus the grace.
	ExpiresAt time.Time
}

// GetRequest reads one record.
type GetRequest struct {
	Namespace string
	Key       string
	Now       time.Time
}

// DeleteRequest removes one record.
type DeleteRequest struct {
	Namespace string
	Key       string
}

// DeadLetterResetter is implemented by stores that can undo a dead-letter
// mark for a redrive. Redrive (package sqsqueue) and the operator CLI need
// it; the decorator does not. It is a separate interface so that a Store
// written before it still compiles; the in-memory, DynamoDB and Redis
// stores implement it, and the conformance suite checks every store that
// does.
type DeadLetterResetter interface {
	// ResetDeadLetter makes a dead-lettered key claimable again, in one
	// conditional write that applies only when the record is
	// DEAD_LETTERED, its DeadLetterMessageID is req.DeadLetterMessageID
	// (the dead-letter copy being redriven), it has not expired, no
	// operator abandoned it (Resolution is not ResolutionAbandoned), and,
	// with req.MaxRedrives set, it was redriven fewer times than that.
	//
	// On success the record is FAILED with Attempts 0, Redrives one higher,
	// RedrivenFrom set to the copy's ID, the dead-letter fields cleared and
	// a new lease token; the payload hash, fence and first attempt stay. It
	// returns the record as written.
	//
	// A refusal returns the record that refused it, read by the same
	// write, with an error wrapping ErrResetRefused; an absent or expired
	// record returns ErrNotFound. A retried write that already applied is a
	// success.
	ResetDeadLetter(ctx context.Context, req ResetRequest) (Record, error)
}

// ResetRequest asks to reset one dead-lettered record for a redrive.
type ResetRequest struct {
	Namespace string
	Key       string
	// DeadLetterMessageID is the ID of the dead-letter copy being redriven,
	// as the dead-letter queue reports it (not a value read from the copy's
	// own metadata, which anyone able to send to the queue can write).
	// Required.
	DeadLetterMessageID string
	// Now is the caller's clock; the expiry is judged by it.
	Now time.Time
	// MaxRedrives, when positive, refuses the reset of a record already
	// redriven that many times.
	MaxRedrives int
	// Note is stored as the record's LastError so the record says why it
	// changed. Default "redriven from the dead-letter queue".
	Note string
}

// DefaultResetNote is the LastError a reset stores when its request has no
// Note.
const DefaultResetNote = "redriven from the dead-letter queue"

// ResetRefusal says why a reset would be refused by the record r, or ""
// when it applies. Stores use it to explain a refusal in the same words;
// it is also the reference the conformance suite holds them to.
func ResetRefusal(r Record, req ResetRequest) string {
	if mutant.On("redrive-resets-any-record") {
		return "" // the bug: reset whatever record the key has
	}
	abandonedRedrivable := mutant.On("resolve-abandoned-redrivable")
	switch {
	case r.Status != StatusDeadLettered:
		return "the record is " + string(r.Status) + ", not DEAD_LETTERED"
	case r.DeadLetterMessageID != req.DeadLetterMessageID:
		return "it was dead-lettered by another copy (" + r.DeadLetterMessageID + ")"
	case r.Resolution == ResolutionAbandoned && !abandonedRedrivable:
		return "an operator abandoned it (" + r.ResolutionNote + ")"
	case req.MaxRedrives > 0 && r.Redrives >= req.MaxRedrives:
		return "it was redriven " + strconv.Itoa(r.Redrives) + " times already, the limit"
	}
	return ""
}
