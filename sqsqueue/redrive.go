package sqsqueue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// RedriveAPI is the part of *sqs.Client that Redrive uses.
type RedriveAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	SendMessageAPI
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ChangeMessageVisibilityAPI
}

// ErrInvalidOptions: Redrive was called without a client, a DLQ URL or (for
// a real run) a Reset function.
var ErrInvalidOptions = errors.New("sqsqueue: invalid redrive options")

// Defaults of RedriveOptions.
const (
	DefaultRedriveVisibility = time.Minute
	DefaultRedriveWait       = 2 * time.Second
)

// RedriveOptions configures Redrive.
type RedriveOptions struct {
	// Client talks to SQS. Required.
	Client RedriveAPI
	// DeadLetterQueueURL is the DLQ to drain. Required.
	DeadLetterQueueURL string
	// TargetQueueURL, when set, receives every message; otherwise each goes
	// back to its source queue, the metadata's source ARN turned into a URL
	// (see Endpoint, QueueURLs, QueueURLFunc).
	TargetQueueURL string
	// Reset clears a message's idempotency record before it is sent back,
	// so the decorator will run it again (pass the Store's Delete). Required
	// unless DryRun. Not called for a message whose metadata has no key.
	Reset func(ctx context.Context, namespace, key string) error
	// Max is the most messages to handle (moved, failed or skipped). Zero
	// means no limit: run until the DLQ has no message this run has not
	// seen.
	Max int
	// DryRun lists what would move, and changes nothing but the messages'
	// receive counts (receiving is how SQS lists messages). Listed messages
	// are made visible again when the run ends.
	DryRun bool
	// VisibilityTimeout hides each received message from other consumers
	// (and from this run's later receives) while it is handled. Zero means
	// DefaultRedriveVisibility (one minute).
	VisibilityTimeout time.Duration
	// WaitTime is each receive's long-poll wait. Zero means
	// DefaultRedriveWait (2 s): without long polling SQS samples a subset
	// of its servers and may answer "empty" while messages remain. A
	// negative value uses short polling (emulators, tests).
	WaitTime time.Duration
	// Progress, when set, is called once per handled message, in order,
	// from the calling goroutine.
	Progress func(RedriveEvent)
	// Endpoint, QueueURLs and QueueURLFunc turn source ARNs into URLs, as
	// WithEndpoint, WithQueueURLs and WithQueueURLFunc do for
	// VisibilityChanger.
	Endpoint     string
	QueueURLs    map[string]string
	QueueURLFunc func(arn string) (string, error)
}

// RedriveOutcome says what happened to one message.
type RedriveOutcome string

// The outcomes of one message.
const (
	// RedriveMoved: reset, sent to the target and deleted from the DLQ.
	RedriveMoved RedriveOutcome = "moved"
	// RedriveWouldMove: DryRun; the message would have moved.
	RedriveWouldMove RedriveOutcome = "would_move"
	// RedriveFailed: a step failed (Step and Err say which and why); the
	// message stays in the DLQ.
	RedriveFailed RedriveOutcome = "failed"
	// RedriveSkipped: not a lambdaidem dead-letter copy (no metadata, e.g.
	// moved here by SQS's own redrive policy); left in the DLQ.
	RedriveSkipped RedriveOutcome = "skipped"
)

// The steps of moving one message, in order.
const (
	StepParse  = "parse"
	StepTarget = "target"
	StepReset  = "reset"
	StepSend   = "send"
	StepDelete = "delete"
)

// RedriveEvent reports one handled message.
type RedriveEvent struct {
	// DeadLetterMessageID is the message's ID in the DLQ.
	DeadLetterMessageID string
	// Metadata is the decoded metadata (zero when skipped).
	Metadata Metadata
	// TargetQueueURL is where the message goes (or would go).
	TargetQueueURL string
	// NewMessageID is the ID of the copy sent to the target (moved only).
	NewMessageID string
	Outcome      RedriveOutcome
	// Step is the step that failed (failed and skipped only).
	Step string
	Err  error
}

// RedriveSummary counts the handled messages.
type RedriveSummary struct {
	// Moved counts moved messages, or in a DryRun the ones that would move.
	Moved   int
	Failed  int
	Skipped int
}

// Redrive moves dead-letter copies from a DLQ back to their source queue
// (or TargetQueueURL). For each message, in this order: reset its
// idempotency record, send the original body and original attributes (the
// idempotency key attribute included; FIFO targets get the original
// MessageGroupId and a new deduplication ID), then delete it from the DLQ.
// A failure at any step stops that message, which stays in the DLQ and is
// reported (Progress, Summary.Failed); the run goes on with the next one.
//
// A message that fails after its send (the delete failed) exists in both
// queues; the next redrive sends it again, and the decorator acknowledges
// that copy as a duplicate once the first has completed.
//
// Redrive returns an error, with the summary so far, when the options are
// invalid, a receive fails, or ctx ends.
func Redrive(ctx context.Context, opts RedriveOptions) (RedriveSummary, error) {
	var sum RedriveSummary
	switch {
	case opts.Client == nil:
		return sum, fmt.Errorf("%w: no Client", ErrInvalidOptions)
	case opts.DeadLetterQueueURL == "":
		return sum, fmt.Errorf("%w: no DeadLetterQueueURL", ErrInvalidOptions)
	case opts.Reset == nil && !opts.DryRun:
		return sum, fmt.Errorf("%w: no Reset (it must clear the idempotency record, or the decorator would acknowledge the message as dead-lettered)", ErrInvalidOptions)
	case opts.Max < 0:
		return sum, fmt.Errorf("%w: negative Max", ErrInvalidOptions)
	}
	r := &redriver{
		opts:     opts,
		resolver: newResolver(opts.Client, opts.Endpoint, opts.QueueURLs, opts.QueueURLFunc),
		seen:     make(map[string]bool),
	}
	err := r.run(ctx, &sum)
	// Messages left behind come back now rather than when the receive's
	// visibility timeout ends, so an operator can look at them at once.
	r.release()
	return sum, err
}

type redriver struct {
	opts     RedriveOptions
	resolver resolver
	seen     map[string]bool
	// left holds receipt handles of messages that stay in the DLQ.
	left []string
}

func (r *redriver) run(ctx context.Context, sum *RedriveSummary) error {
	vis := r.opts.VisibilityTimeout
	if vis == 0 {
		vis = DefaultRedriveVisibility
	}
	wait := r.opts.WaitTime
	switch {
	case wait == 0:
		wait = DefaultRedriveWait
	case wait < 0:
		wait = 0
	}
	handled := 0
	for r.opts.Max == 0 || handled < r.opts.Max {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := int32(10)
		if r.opts.Max > 0 {
			n = int32(min(10, r.opts.Max-handled))
		}
		out, err := r.opts.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    &r.opts.DeadLetterQueueURL,
			MaxNumberOfMessages:         n,
			VisibilityTimeout:           int32(ClampVisibility(vis) / time.Second),
			WaitTimeSeconds:             int32(min(ClampVisibility(wait), 20*time.Second) / time.Second),
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		if err != nil {
			return wrap(err, "receive from dead-letter queue %s", r.opts.DeadLetterQueueURL)
		}
		fresh := 0
		for _, m := range out.Messages {
			id := deref(m.MessageId)
			if r.seen[id] {
				// Back after its visibility ended (a run longer than
				// VisibilityTimeout): handled already, leave it.
				continue
			}
			r.seen[id] = true
			fresh++
			if r.opts.Max > 0 && handled >= r.opts.Max {
				r.left = append(r.left, deref(m.ReceiptHandle))
				continue
			}
			handled++
			ev := r.one(ctx, m)
			switch ev.Outcome {
			case RedriveMoved, RedriveWouldMove:
				sum.Moved++
			case RedriveFailed:
				sum.Failed++
			case RedriveSkipped:
				sum.Skipped++
			}
			if ev.Outcome != RedriveMoved {
				r.left = append(r.left, deref(m.ReceiptHandle))
			}
			if r.opts.Progress != nil {
				r.opts.Progress(ev)
			}
		}
		if fresh == 0 {
			return nil
		}
	}
	return nil
}

// one moves one message: reset, send, delete.
func (r *redriver) one(ctx context.Context, m types.Message) RedriveEvent {
	ev := RedriveEvent{DeadLetterMessageID: deref(m.MessageId)}
	fail := func(step string, outcome RedriveOutcome, err error) RedriveEvent {
		ev.Step, ev.Outcome, ev.Err = step, outcome, err
		return ev
	}
	dm, err := Parse(m)
	if err != nil {
		return fail(StepParse, RedriveSkipped, err)
	}
	ev.Metadata = dm.Metadata
	target := r.opts.TargetQueueURL
	if target == "" {
		if target, err = r.resolver.queueURL(dm.Metadata.SourceARN); err != nil {
			return fail(StepTarget, RedriveFailed, err)
		}
	}
	ev.TargetQueueURL = target
	if r.opts.DryRun {
		ev.Outcome = RedriveWouldMove
		return ev
	}

	if dm.Metadata.Key != "" {
		if err := r.opts.Reset(ctx, dm.Metadata.Namespace, dm.Metadata.Key); err != nil {
			return fail(StepReset, RedriveFailed, fmt.Errorf("sqsqueue: reset %s/%s: %w", dm.Metadata.Namespace, dm.Metadata.Key, err))
		}
	}

	in := &sqs.SendMessageInput{
		QueueUrl:          &target,
		MessageBody:       &dm.Body,
		MessageAttributes: dm.Attributes,
	}
	if isFIFO(target) {
		group := dm.Metadata.GroupID
		if group == "" {
			group = dm.Metadata.MessageID
		}
		in.MessageGroupId = &group
		// New, so the source queue does not drop it as a duplicate of the
		// original; stable per DLQ message, so a redrive repeated after a
		// failed delete is dropped within SQS's five-minute window.
		in.MessageDeduplicationId = ptr(DeduplicationID("redrive", ev.DeadLetterMessageID))
	}
	out, err := r.opts.Client.SendMessage(ctx, in)
	if err != nil {
		return fail(StepSend, RedriveFailed, wrap(err, "send message %s to %s", ev.DeadLetterMessageID, target))
	}
	ev.NewMessageID = deref(out.MessageId)

	if _, err := r.opts.Client.DeleteMessage(ctx, &sqs.DeleteMessageInput{
		QueueUrl:      &r.opts.DeadLetterQueueURL,
		ReceiptHandle: m.ReceiptHandle,
	}); err != nil {
		return fail(StepDelete, RedriveFailed, wrap(err, "delete message %s from %s", ev.DeadLetterMessageID, r.opts.DeadLetterQueueURL))
	}
	ev.Outcome = RedriveMoved
	return ev
}

// release makes the messages left in the DLQ visible again. Best effort:
// a handle that expired belongs to a message that is visible already. It
// uses a fresh context so a cancelled run still releases what it held.
func (r *redriver) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, h := range r.left {
		_, _ = r.opts.Client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
			QueueUrl:          &r.opts.DeadLetterQueueURL,
			ReceiptHandle:     &h,
			VisibilityTimeout: 0,
		})
	}
}
