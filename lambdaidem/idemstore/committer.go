package idemstore

import (
	"context"
	"fmt"
	"time"
)

// Committer is implemented by a Store that can record the outcome of a run
// that held no lease, in one conditional write: the optimistic mode
// (lambdaidem.WithOptimisticCommit) calls Commit where lease mode calls Claim before
// the handler and Complete or Fail after it. It is a separate interface so
// that a Store written before it still compiles; the in-memory, DynamoDB
// and Redis stores implement it, and the conformance suite checks every
// store that does.
//
// A commit applies on the same records a claim does, and only those:
// absent or expired (a fresh generation), FAILED with the same payload
// hash, or IN_PROGRESS with the same payload hash whose lease ended more
// than Grace ago (an abandoned lease; Takeovers rises). It never applies to
// a record IN_PROGRESS under a live lease, COMPLETED, DEAD_LETTERED, or
// holding another payload. So a commit and a lease holder's fenced writes
// exclude each other: whichever writes first, the other is refused. Nor
// does it apply to an abandoned lease that carries a pending dead-letter
// mark (DeadLetterReason set while IN_PROGRESS): its holder's decision to
// dead-letter stands, and only a claim, whose taker finishes that
// dead-lettering instead of running the handler, takes such a lease over;
// a commit comes after a run it must not have made.
type Committer interface {
	// Commit writes req.Status (COMPLETED or FAILED) on a key, with the
	// completion's Writes atomically when COMPLETED, if the record allows
	// it (see the interface). On success Committed is true and Record is
	// the record as written: LeaseToken is req.Token, Attempts and
	// Fence.Claim are one higher than before (1 in a fresh generation, whose
	// Generation is new and FirstAttemptAt is Now), LeaseUntil is Now,
	// PayloadHash, MessageID, ExpiresAt and UpdatedAt come from the request,
	// and the result and ResultUntil (COMPLETED) or LastError (FAILED) are
	// set as Complete and Fail set them. Its Result may be left out.
	//
	// A refused commit writes nothing, none of the Writes either, and
	// returns Committed false, a nil error and the unexpired record that
	// refused it, read by the same request (its Result may be left out).
	// With Status FAILED and MaxAttempts > 0, a commit that would record
	// attempt MaxAttempts or a later one is not written either: AtLimit is
	// true, and the caller claims the key to dead-letter it under a lease.
	//
	// A commit is safe to retry with the same request: a record that
	// carries req.Token and req.Status is that commit's own earlier try,
	// and is a success. A write among Writes whose own condition fails
	// refuses the commit with an error matching ErrWriteRefused; a write
	// the store cannot commit, with ErrUnsupportedWrite; a result it
	// cannot hold, with ErrResultTooLarge; nothing is written then. An
	// error wrapping ErrStoreUnavailable means the store could not answer
	// and the commit may or may not have applied.
	Commit(ctx context.Context, req CommitRequest) (CommitResult, error)
}

// CommitRequest records one run's outcome without a lease.
type CommitRequest struct {
	Namespace   string
	Key         string
	PayloadHash string
	// MessageID is the message whose run this is, kept on the record.
	MessageID string
	// Token identifies this commit: it becomes the record's LeaseToken,
	// so a retry recognises its own earlier try, and the DynamoDB store
	// derives the transaction's ClientRequestToken from it. A retry must
	// send the same request with the same Token; a new run needs a new
	// one. Required, at most 32 bytes.
	Token string
	// Now is the caller's clock; all conditions compare against it.
	Now time.Time
	// Grace is how long past its end a lease must be before a commit may
	// replace it (clock skew between instances), as for Claim.
	Grace time.Duration
	// Status is what the run came to: StatusCompleted or StatusFailed.
	Status Status
	// Result, ResultUntil and Writes, for StatusCompleted, are as in
	// CompleteRequest.
	Result      []byte
	ResultUntil time.Time
	Writes      []any
	// Error, for StatusFailed, is the failure's text.
	Error string
	// MaxAttempts, for StatusFailed and when positive, keeps the commit
	// from recording attempt MaxAttempts or a later one (see AtLimit).
	MaxAttempts int
	// ExpiresAt is when the record may be forgotten.
	ExpiresAt time.Time
}

// CommitResult is what a commit found and did.
type CommitResult struct {
	// Committed reports whether the outcome was written.
	Committed bool
	// AtLimit reports a FAILED commit not written because it would have
	// recorded attempt MaxAttempts or a later one.
	AtLimit bool
	// Record is the record as written when Committed, otherwise the record
	// that refused the commit (the zero Record for an absent key not
	// written because of AtLimit).
	Record Record
}

// MaxCommitTokenBytes bounds CommitRequest.Token: DynamoDB's
// ClientRequestToken holds 36 characters, and the store adds a suffix per
// request.
const MaxCommitTokenBytes = 32

// CheckCommit returns an error saying what is wrong with req, or nil.
// Stores call it before anything else.
func CheckCommit(req CommitRequest) error {
	switch {
	case req.Namespace == "" || req.Key == "":
		return fmt.Errorf("commit: empty namespace or key: %w", ErrMissingKey)
	case req.Token == "" || len(req.Token) > MaxCommitTokenBytes:
		return fmt.Errorf("%w: commit of %q: a token of 1 to %d bytes is required, got %d", ErrInvalidRequest, req.Key, MaxCommitTokenBytes, len(req.Token))
	case req.Status != StatusCompleted && req.Status != StatusFailed:
		return fmt.Errorf("%w: commit of %q: status %q, want COMPLETED or FAILED", ErrInvalidRequest, req.Key, req.Status)
	case req.Status == StatusFailed && (len(req.Writes) > 0 || len(req.Result) > 0):
		return fmt.Errorf("%w: commit of %q: a FAILED commit carries no writes or result", ErrInvalidRequest, req.Key)
	}
	for _, c := range req.Token {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("%w: commit of %q: the token holds %q; letters, digits and '-' only", ErrInvalidRequest, req.Key, c)
		}
	}
	return nil
}

// CommitRefusal says whether the record r, unexpired at req.Now (nil when
// the key is absent or expired), lets req apply, and what the commit would
// replace. It is the reference every Committer is held to: apply reports
// that it applies; atLimit that only MaxAttempts stands in the way; own
// that r is the commit's own earlier try; takeover that it replaces an
// abandoned lease.
func CommitRefusal(r *Record, req CommitRequest) (apply, atLimit, own, takeover bool) {
	attempts := 0
	switch {
	case r == nil:
	case r.LeaseToken == req.Token && r.Status == req.Status:
		return false, false, true, false
	case r.PayloadHash != req.PayloadHash:
		return false, false, false, false
	case r.Status == StatusFailed:
		attempts = r.Attempts
	case r.Status == StatusInProgress && r.DeadLetterReason == "" && r.LeaseExpired(req.Now, req.Grace):
		attempts, takeover = r.Attempts, true
	default:
		return false, false, false, false
	}
	if req.Status == StatusFailed && req.MaxAttempts > 0 && attempts+1 >= req.MaxAttempts {
		return false, true, false, false
	}
	return true, false, false, takeover
}
