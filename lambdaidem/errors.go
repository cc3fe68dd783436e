package lambdaidem

import (
	"errors"
	"fmt"
	"time"
)

// Named errors callers must tell apart. Test with errors.Is.
var (
	// ErrKeyConflict: the key was used before with a different payload.
	ErrKeyConflict = errors.New("lambdaidem: key conflict: same key, different payload")
	// ErrDeadLettered: the key was dead-lettered; Wrap returns it to callers
	// of a dead-lettered key.
	ErrDeadLettered = errors.New("lambdaidem: key was dead-lettered")
)

// ErrOutcomeUnknown: nobody knows whether an attempt's effect happened,
// so the function is not run again and the key is dead-lettered for
// reconciliation (ReasonOutcomeUnknown). In either mode, the handler said
// so (OutcomeUnknown); in at-most-once mode also an attempt whose lease ran
// out without a recorded outcome, one that panicked, and one that returned
// an error without declaring its effect not applied (NotApplied,
// RetryAfter). Wrap returns it for such a call and every later call of the
// key. It wraps ErrDeadLettered.
var ErrOutcomeUnknown = fmt.Errorf("%w: the outcome of an attempt is unknown", ErrDeadLettered)

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

// ErrMalformedBody: the key or payload hash needs JSON from a body that is
// not exactly one JSON value, or whose key or hashed field is ambiguous
// (given twice) or not valid Unicode; for Wrap, an input that has no JSON
// encoding or holds a string that is not valid UTF-8. It wraps
// ErrMissingKey. SQS dead-letters such a message with ReasonMalformedBody
// (without a sink, reports it failed as OutcomeMalformedBody); Wrap returns
// the error to its caller. A WithKeyFunc function may wrap it to say the
// same of a body it cannot parse.
var ErrMalformedBody error = &reason{text: "lambdaidem: malformed body", named: []error{ErrMissingKey}}

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

// NotAppliedError marks a handler error after which the handler's effect
// did not happen: the attempt may run again. Create it with NotApplied.
type NotAppliedError struct{ Err error }

// NotApplied wraps err to declare that the handler's effect did not
// happen: nothing was sent, charged or written (the payment API refused
// the request, the email was never handed over). In at-most-once mode
// (WithAtMostOnce) only such a declaration, or a RetryAfter, keeps the
// key retryable: any other error may have come after the effect, so the
// message is dead-lettered with ReasonOutcomeUnknown and never run again.
// In at-least-once mode it is a failure like any other. Declare it only
// when you know: an error whose outcome you cannot tell (a timeout, a
// 5xx, a connection reset after the request was sent) is OutcomeUnknown.
func NotApplied(err error) error {
	if err == nil {
		err = errors.New("not applied")
	}
	return &NotAppliedError{Err: err}
}

func (e *NotAppliedError) Error() string { return "not applied: " + e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *NotAppliedError) Unwrap() error { return e.Err }

// OutcomeUnknownError marks a handler error after which nobody knows
// whether the handler's effect happened. Create it with OutcomeUnknown.
type OutcomeUnknownError struct{ Err error }

// OutcomeUnknown wraps err to declare that the handler cannot tell whether
// its effect happened: the email API answered 504 after the request went
// out, a payment call timed out. In either mode the message is
// dead-lettered with ReasonOutcomeUnknown and the handler is never run
// again for the key, for a person or a reconciliation job to find out
// (Wrap marks the key and returns ErrOutcomeUnknown). It takes precedence
// over Poison, NotApplied and RetryAfter anywhere in the same chain.
//
// The record takes the mark before the copy is sent. In at-least-once
// mode an attempt that dies before the mark is written (a crash, the
// store out of reach) is an abandoned attempt like any other there, and
// its message runs again once the lease has run out; in at-most-once mode
// it is dead-lettered as outcome unknown all the same.
func OutcomeUnknown(err error) error {
	if err == nil {
		err = errors.New("outcome unknown")
	}
	return &OutcomeUnknownError{Err: err}
}

func (e *OutcomeUnknownError) Error() string { return "outcome unknown: " + e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *OutcomeUnknownError) Unwrap() error { return e.Err }

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

// reason is an error with one text that matches several named errors.
type reason struct {
	text  string
	named []error
}

func (r *reason) Error() string   { return r.text }
func (r *reason) Unwrap() []error { return r.named }

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
