package lambdaidem

import (
	"errors"

	"github.com/lambdaidem/go-lambdaidem/internal/mutant"
)

// verdict is what a failed attempt comes to, once its error is read.
type verdict int

const (
	// verdictRetry: recorded FAILED, the key retryable (max_attempts on
	// the last attempt).
	verdictRetry verdict = iota
	// verdictPoison: dead-lettered as poison at once (SQS; Wrap, which
	// has no dead-letter queue, retries it).
	verdictPoison
	// verdictUnknown: dead-lettered as outcome unknown, never run again.
	verdictUnknown
)

// judge reads a failed attempt's error: the handler's, or a completion
// refused for what it carried (refused). ctxEnded says the handler
// returned after its context had ended. why says, for verdictUnknown, why
// the outcome is unknown.
//
// The order: OutcomeUnknown anywhere in the chain decides, in either
// mode. Then Poison. In at-least-once mode everything else is retried.
// In at-most-once mode only a declaration that the effect did not happen
// is retried — NotApplied, or RetryAfter, which asks for the attempt to
// run again — and every other failure may have come after the effect: a
// plain error, a panic, an error after the context ended, a completion
// refused after the handler succeeded (whatever the handler did besides
// its completion writes happened).
func (c *config) judge(err error, ctxEnded, refused bool) (v verdict, why string) {
	var unknown *OutcomeUnknownError
	var poison *PoisonError
	var notApplied *NotAppliedError
	var retryAfter *RetryAfterError
	var panicked *PanicError
	retryDeclared := mutant.On("declared-unknown-retried")        // the bug: a handler's OutcomeUnknown is a failure like any other
	retryCancelled := mutant.On("at-most-once-retries-cancelled") // the bug: an attempt cut off at its deadline counts as a plain failure
	retryLive := mutant.On("amo-error-after-effect-retried")      // the bug: an error while the context was live counts as the handler's own report that nothing happened
	switch {
	case errors.As(err, &unknown) && !retryDeclared:
		return verdictUnknown, "the handler declared its outcome unknown"
	case errors.As(err, &poison):
		return verdictPoison, ""
	case !c.atMostOnce, errors.As(err, &notApplied), errors.As(err, &retryAfter):
		return verdictRetry, ""
	case errors.As(err, &panicked):
		return verdictUnknown, "it panicked"
	case ctxEnded && retryCancelled, !ctxEnded && !refused && retryLive:
		return verdictRetry, ""
	case refused:
		return verdictUnknown, "its completion was refused after the handler succeeded; what the handler did besides its completion writes happened"
	case ctxEnded:
		return verdictUnknown, "it returned after its context ended"
	default:
		return verdictUnknown, "it returned an error without declaring that its effect did not happen (NotApplied)"
	}
}
