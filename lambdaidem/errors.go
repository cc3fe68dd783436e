package lambdaidem

import (
	"errors"
	"fmt"
	"time"
)

// Named errors callers and operators must tell apart. Test with errors.Is.
var (
	// ErrInProgress: another holder has a valid lease on the key.
	ErrInProgress = errors.New("lambdaidem: key is in progress elsewhere")
	// ErrKeyConflict: the key was used before with a different payload.
	ErrKeyConflict = errors.New("lambdaidem: key conflict: same key, different payload")
	// ErrLeaseLost: the lease ran out and was taken over, or the record moved
	// on; a stale owner's write was refused.
	ErrLeaseLost = errors.New("lambdaidem: lease lost")
	// ErrMissingKey: no idempotency key could be derived from the input.
	ErrMissingKey = errors.New("lambdaidem: missing idempotency key")
	// ErrStoreUnavailable: the store could not be reached or throttled us;
	// nothing was recorded, so nothing is acknowledged.
	ErrStoreUnavailable = errors.New("lambdaidem: store unavailable")
	// ErrResultTooLarge: the result does not fit in the store's item.
	ErrResultTooLarge = errors.New("lambdaidem: result too large")
	// ErrNotFound: no unexpired record for the key.
	ErrNotFound = errors.New("lambdaidem: record not found")
	// ErrUnsupportedWrite: the store cannot commit that kind of extra write.
	ErrUnsupportedWrite = errors.New("lambdaidem: unsupported completion write")
	// ErrDeadLettered: the key was dead-lettered; Wrap returns it to callers
	// of a dead-lettered key.
	ErrDeadLettered = errors.New("lambdaidem: key was dead-lettered")
)

// ErrOutcomeUnknown: in at-most-once mode, a previous holder's lease ran
// out without a recorded outcome; the function is not run again and the key
// is dead-lettered for reconciliation. It wraps ErrDeadLettered.
var ErrOutcomeUnknown = fmt.Errorf("%w: outcome of an abandoned attempt is unknown", ErrDeadLettered)

// ErrLateReplay: a repeat of a completed key whose stored result has
// expired while the key is still remembered. The function is not run again;
// Wrap returns this error instead of a result.
var ErrLateReplay = errors.New("lambdaidem: late replay: result expired, key still remembered")

// InProgressError is returned by Wrap when another caller holds a valid
// lease on the key. It wraps ErrInProgress.
type InProgressError struct {
	// RetryAfter is how long until the lease runs out.
	RetryAfter time.Duration
}

func (e *InProgressError) Error() string {
	return fmt.Sprintf("%v; retry after %s", ErrInProgress, e.RetryAfter.Round(time.Millisecond))
}

// Unwrap returns ErrInProgress.
func (e *InProgressError) Unwrap() error { return ErrInProgress }

// ErrResetRefused: a redrive's reset did not apply because the record is
// not DEAD_LETTERED by the dead-letter copy being redriven (it completed,
// is being processed, was dead-lettered by another copy, or reached the
// redrive limit). The record that refused it comes with the error.
var ErrResetRefused = errors.New("lambdaidem: record was not dead-lettered by this copy")

// Named errors of the operator calls (Admin). A refusal comes with the
// record that refused it, unchanged; a live lease is refused with
// ErrInProgress.
var (
	// ErrRecordChanged: the record no longer carries the lease token the
	// operator read (another claim took it, or its holder recorded an
	// outcome), so a release based on the old view was not applied.
	ErrRecordChanged = errors.New("lambdaidem: record changed since it was read")
	// ErrNotInProgress: only an IN_PROGRESS record has a lease to release.
	ErrNotInProgress = errors.New("lambdaidem: record is not IN_PROGRESS")
	// ErrWouldAbandonCopy: the record is DEAD_LETTERED. Redrive sends its
	// dead-letter copy back only after resetting the record that copy
	// dead-lettered, so forgetting it would leave the copy in the
	// dead-letter queue for good; Forget does it only with AbandonCopy.
	ErrWouldAbandonCopy = errors.New("lambdaidem: forgetting a DEAD_LETTERED record abandons its dead-letter copy")
	// ErrNotIndexed: the store keeps no index of records in that status
	// (COMPLETED records, unless a scan is allowed and the store can
	// scan).
	ErrNotIndexed = errors.New("lambdaidem: no index of records in that status")
	// ErrNamespaceRequired: the store indexes each namespace apart, so
	// listing and counting need one.
	ErrNamespaceRequired = errors.New("lambdaidem: a namespace is required")
)
