package lambdaidem

import (
	"errors"
	"fmt"
	"time"
)

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
