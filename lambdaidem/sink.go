package lambdaidem

import (
	"context"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// DeadLetterSink sends a message that will not be processed to a
// dead-letter queue, with the reason. Send must either deliver the copy and
// return its new message ID, or return an error; the decorator acknowledges
// the source message only after a successful Send.
type DeadLetterSink interface {
	Send(ctx context.Context, dl DeadLetter) (messageID string, err error)
}

// DeadLetter is one message on its way to the dead-letter queue, with the
// library's metadata.
type DeadLetter struct {
	// Message is the original record, body and attributes untouched.
	Message events.SQSMessage
	// Namespace and Key identify the idempotency record.
	Namespace string
	Key       string
	Reason    Reason
	// Error is the last error's text (the sink may truncate it).
	Error    string
	Attempts int
	// FirstAttemptAt and LastAttemptAt bound the attempts; zero if unknown.
	FirstAttemptAt time.Time
	LastAttemptAt  time.Time
	// PayloadHash is the message's own payload hash, as a claim stores it
	// on the record; empty when the key or the hash could not be derived.
	// A redrive deletes the copy as done only when the key completed with
	// this hash.
	PayloadHash string
	// LeaseProof is LeaseProof of the lease token the copy was sent under,
	// after its pending mark applied; empty for a message that held no
	// lease. It lets a redrive write the final mark a holder could not
	// write, for this very copy, without trusting anything else the copy
	// says about itself: only the holder and the store know the token.
	LeaseProof string
}

// VisibilityChanger changes when an SQS message becomes visible again
// (ChangeMessageVisibility). The decorator uses it for RetryAfter, for
// backoff, and to bring back a message whose key was held by another lease
// when that lease ends.
type VisibilityChanger interface {
	ChangeVisibility(ctx context.Context, msg events.SQSMessage, timeout time.Duration) error
}
