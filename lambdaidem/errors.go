package lambdaidem

import (
	"errors"
	"fmt"
	"strings"
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
	// Waited is how long the call waited for the run in progress
	// (WithWaitForCompletion) before it gave up; zero without the option.
	Waited time.Duration
}

func (e *InProgressError) Error() string {
	if e.Waited > 0 {
		return fmt.Sprintf("%v after waiting %s; retry after %s", ErrInProgress, e.Waited.Round(time.Millisecond), e.RetryAfter.Round(time.Millisecond))
	}
	return fmt.Sprintf("%v; retry after %s", ErrInProgress, e.RetryAfter.Round(time.Millisecond))
}

// Unwrap returns ErrInProgress.
func (e *InProgressError) Unwrap() error { return ErrInProgress }

// ErrRunFailed: with WithWaitForCompletion, the run of the same key that a
// call waited for failed. Wrap returns it as a *RunFailedError.
var ErrRunFailed = errors.New("lambdaidem: the run this call waited for failed")

// RunFailedError is returned by Wrap, with WithWaitForCompletion, when the
// run of the same key and payload that the call waited for failed: the call
// answers with that failure, as the store recorded it, instead of running
// the function itself. The key stays retryable: the next call runs the
// function again. It wraps ErrRunFailed.
type RunFailedError struct {
	// Key is the stored key.
	Key string
	// Attempt is the attempt that failed (its claim's number).
	Attempt int
	// Message is the failure as the store recorded it (Record.LastError):
	// the text of the error the failed call returned, shortened by the
	// store if it was long.
	Message string
}

func (e *RunFailedError) Error() string {
	return fmt.Sprintf("%v: key %q, attempt %d: %s", ErrRunFailed, e.Key, e.Attempt, e.Message)
}

// Unwrap returns ErrRunFailed.
func (e *RunFailedError) Unwrap() error { return ErrRunFailed }

// ErrWaitUnsupported: WithWaitForCompletion was given to the SQS handler,
// which panics with an error wrapping it when built. A message whose key is
// held elsewhere is reported failed and made visible again when that lease
// ends: the queue waits, and a Lambda invocation spent waiting would hold
// its whole batch. Wrap and httpidem take the option.
var ErrWaitUnsupported = errors.New("lambdaidem: WithWaitForCompletion is for Wrap and httpidem; the SQS handler leaves a held key to the queue")

// ErrResetRefused: a redrive's reset did not apply because the record is
// not DEAD_LETTERED by the dead-letter copy being redriven (it completed,
// is being processed, was dead-lettered by another copy, or reached the
// redrive limit). The record that refused it comes with the error.
var ErrResetRefused = errors.New("lambdaidem: record was not dead-lettered by this copy")

// ErrMalformedBody: the key or payload hash needs JSON from a body that is
// not exactly one JSON value, or whose key or hashed field is ambiguous
// (given twice) or not valid Unicode; for Wrap, an input that has no JSON
// encoding or holds a string that is not valid UTF-8. It wraps
// ErrMissingKey. SQS dead-letters such a message with ReasonMalformedBody
// (without a sink, reports it failed as OutcomeMalformedBody); Wrap returns
// the error to its caller. A WithKeyFunc function may wrap it to say the
// same of a body it cannot parse.
var ErrMalformedBody = fmt.Errorf("%w: malformed JSON body", ErrMissingKey)

// Errors of Wrap's completion. Test with errors.Is.
var (
	// ErrResultNotStored: a repeat of a key whose call succeeded but whose
	// result could not be stored (not JSON-encodable, or larger than
	// WithMaxResultBytes or than the store can hold). The key is complete
	// and the function is not run again; the result cannot be replayed.
	ErrResultNotStored = errors.New("lambdaidem: the call succeeded but its result was not stored")

	// ErrWritesNotCommitted: the function succeeded but the completion
	// writes it added with AddCompletionWrite did not commit, or it is
	// not known whether they did. Its effect must not be taken for done.
	// When the store refused the writes for good (a condition of the
	// caller's own write failed, or the store cannot commit them) the key
	// is left retryable; a failed condition also matches ErrWriteRefused.
	ErrWritesNotCommitted = errors.New("lambdaidem: completion writes not committed")

	// ErrWriteRefused: the store refused a completion write for good, most
	// often because that write's own condition did not hold; nothing of
	// the completion was written. A Store reports it by wrapping this
	// error (the DynamoDB store's TransactionError matches it when a
	// write's condition failed).
	ErrWriteRefused = errors.New("lambdaidem: completion write refused")
)

// ErrHandlerReturned is returned by AddCompletionWrite once the handler it
// belongs to has returned.
var ErrHandlerReturned = errors.New("lambdaidem: AddCompletionWrite called after the handler returned")

// PoisonError marks a handler error that will never succeed on retry: the
// message is dead-lettered at once. Create it with Poison.
type PoisonError struct{ Err error }

// Poison wraps err so that the decorator dead-letters the message now
// instead of retrying it. Without a dead-letter sink the record is failed and
// SQS's own redrive policy takes over.
func Poison(err error) error {
	if err == nil {
		err = errors.New("poison message")
	}
	return &PoisonError{Err: err}
}

func (e *PoisonError) Error() string { return "poison: " + e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *PoisonError) Unwrap() error { return e.Err }

// RetryAfterError asks for the message to become visible again after Delay.
// Create it with RetryAfter.
type RetryAfterError struct {
	Delay time.Duration
	Err   error
}

// RetryAfter wraps err so that the decorator records the failure, makes the
// message visible again after d (ChangeMessageVisibility, clamped to SQS's
// limits) and reports it failed. It needs a VisibilityChanger
// (WithVisibility); without one the queue's visibility timeout applies.
func RetryAfter(d time.Duration, err error) error {
	if err == nil {
		err = errors.New("retry later")
	}
	return &RetryAfterError{Delay: d, Err: err}
}

func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("retry after %s: %v", e.Delay, e.Err)
}

// Unwrap returns the wrapped error.
func (e *RetryAfterError) Unwrap() error { return e.Err }

// PanicError is a handler panic turned into that record's failure.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("handler panicked: %v\n\n%s", e.Value, e.Stack)
}

// BatchError is returned by the SQS handler when every record of a batch
// failed (so alarms on function errors see it), or, with
// WithFailBatchOnAnyFailure, when any record failed.
type BatchError struct {
	Failed int
	Total  int
}

func (e *BatchError) Error() string {
	return fmt.Sprintf("lambdaidem: %d of %d records failed", e.Failed, e.Total)
}

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

// ErrInvalidRequest: a store request the store cannot act on whatever the
// record holds (a commit without a token, a status a commit cannot
// write); nothing was sent. It is a caller's bug, never
// ErrStoreUnavailable.
var ErrInvalidRequest = errors.New("lambdaidem: invalid store request")

// ErrNeedsLease: an option that only a lease taken before the handler runs
// can serve (WithAtMostOnce, WithHeartbeat) given together with
// WithOptimisticCommit, which takes none for a first delivery. SQS refuses
// the pair when it is built.
var ErrNeedsLease = errors.New("lambdaidem: the option needs a lease, and WithOptimisticCommit takes none")

// ErrCommitUnsupported: WithOptimisticCommit given with a store that
// cannot commit a run's outcome without a lease (it does not implement
// Committer). SQS refuses it when built.
var ErrCommitUnsupported = errors.New("lambdaidem: the store cannot commit a run without a lease, as WithOptimisticCommit needs")

// ErrBatchUnsupported: WithBatchedWrites given with a store that cannot
// claim or complete several keys in one request (it does not implement
// Batcher). SQS refuses it when built.
var ErrBatchUnsupported = errors.New("lambdaidem: the store cannot claim or complete several keys in one request, as WithBatchedWrites needs")

// Errors of construction. SQS, Wrap and the handlers built on them (the
// httpidem handlers, the test kit) check their options, and their options
// against the store, when they are built: a refusal panics with a
// [*ConfigError] wrapping one of these, so a function that cannot work
// fails at its cold start, never one message at a time. The constructors
// of the stores and of package sqsqueue refuse unusable settings (an
// empty table name, a DLQ URL that is not a queue URL) the same way.
// [Check] turns such a panic into an error.
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

// ConfigError is the value SQS, Wrap and the constructors built on them
// panic with when their settings cannot work together. Its Err wraps
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

// reason is an error with one text that matches several named errors.
type reason struct {
	text  string
	named []error
}

func (r *reason) Error() string   { return r.text }
func (r *reason) Unwrap() []error { return r.named }

// Unwrap returns Err.
func (e *ConfigError) Unwrap() error { return e.Err }

// Check calls build, typically one call of SQS, Wrap, httpidem.HTTP or a
// store's constructor, and returns the *ConfigError it panicked with, or
// nil when it returned. Any other panic is passed on. Use it where a
// refusal must be an error rather than a panic: a tool that builds
// handlers from its flags, a test of the refusals.
func Check(build func()) (err error) {
	defer func() {
		if v := recover(); v != nil {
			ce, ok := v.(*ConfigError)
			if !ok {
				panic(v)
			}
			err = ce
		}
	}()
	build()
	return nil
}
