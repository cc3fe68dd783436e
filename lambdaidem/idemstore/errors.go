package idemstore

import (
	"errors"
	"strings"
)

// Named errors callers and operators must tell apart. Test with errors.Is.
var (
	// ErrInProgress: another holder has a valid lease on the key.
	ErrInProgress = errors.New("lambdaidem: key is in progress elsewhere")
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
)

// ErrResetRefused: a redrive's reset did not apply because the record is
// not DEAD_LETTERED by the dead-letter copy being redriven (it completed,
// is being processed, was dead-lettered by another copy, or reached the
// redrive limit). The record that refused it comes with the error.
var ErrResetRefused = errors.New("lambdaidem: record was not dead-lettered by this copy")

var (
	// ErrWriteRefused: the store refused a completion write for good, most
	// often because that write's own condition did not hold; nothing of
	// the completion was written. A Store reports it by wrapping this
	// error (the DynamoDB store's TransactionError matches it when a
	// write's condition failed).
	ErrWriteRefused = errors.New("lambdaidem: completion write refused")
)

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
	// ErrNotOutcomeUnknown: Resolve applies only to a record whose
	// outcome is unknown (DEAD_LETTERED with ReasonOutcomeUnknown); this
	// one is in another state, or was dead-lettered for another reason
	// (redrive handles those).
	ErrNotOutcomeUnknown = errors.New("lambdaidem: record is not DEAD_LETTERED as outcome_unknown")
	// ErrResolved: an operator abandoned the record already, and that
	// decision is final: no other decision applies to it. (Forget it to
	// let the key run as a new one.)
	ErrResolved = errors.New("lambdaidem: record was resolved already")
)

// ErrInvalidRequest: a store request the store cannot act on whatever the
// record holds (a commit without a token, a status a commit cannot
// write); nothing was sent. It is a caller's bug, never
// ErrStoreUnavailable.
var ErrInvalidRequest = errors.New("lambdaidem: invalid store request")

// Errors of construction. lambdaidem.SQS, lambdaidem.Wrap and the handlers
// built on them (the httpidem handlers, the test kit) check their options,
// and their options against the store, when they are built: a refusal
// panics with a
// [*ConfigError] wrapping one of these, so a function that cannot work
// fails at its cold start, never one message at a time. The constructors
// of the stores and of package sqsqueue refuse unusable settings (an
// empty table name, a DLQ URL that is not a queue URL) the same way.
// lambdaidem.Check turns such a panic into an error.
var (
	// ErrInvalidOption: an option's value, or a combination of options,
	// that could never work (an empty namespace, a backoff without a
	// visibility changer to apply it, two options that both set the key).
	ErrInvalidOption = errors.New("lambdaidem: invalid option")
	// ErrUnsupportedOption: an option the handler being built does not use
	// (an SQS option given to Wrap), or one that needs something the store
	// does not declare it can do (completion writes of a type it does not
	// commit, results larger than it keeps).
	ErrUnsupportedOption = errors.New("lambdaidem: option not supported")
)

// ConfigError is the value lambdaidem.SQS, lambdaidem.Wrap and the
// constructors built on them panic with when their settings cannot work
// together. Its Err wraps
// ErrInvalidOption or ErrUnsupportedOption, and sometimes a more specific
// named error besides (ErrUnsupportedWrite for completion writes a store
// cannot commit; a package's own, such as dynamo.ErrInvalidTableName).
type ConfigError struct {
	// Handler is the constructor that refused: "lambdaidem.SQS",
	// "lambdaidem.Wrap", "httpidem.HTTP", "dynamo.New", "sqsqueue.NewSink".
	Handler string
	// Option is what was refused: an option ("WithCache"), a pair of them
	// ("WithBackoff without WithVisibility"), or a setting ("table name").
	Option string
	// Store names the store when what it can do is the reason
	// ("Redis"); empty otherwise.
	Store string
	// Err is the named error, with the reason in its text.
	Err error
}

func (e *ConfigError) Error() string {
	return e.Handler + ": " + e.Option + ": " + strings.TrimPrefix(e.Err.Error(), "lambdaidem: ")
}

// Unwrap returns Err.
func (e *ConfigError) Unwrap() error { return e.Err }
