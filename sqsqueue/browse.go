package sqsqueue

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// BrowseAPI is the part of *sqs.Client that Browse uses.
type BrowseAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	ChangeMessageVisibilityAPI
}

// DefaultBrowseVisibility is how long Browse hides each message it has
// received until it hands them all back (BrowseOptions.VisibilityTimeout).
const DefaultBrowseVisibility = 30 * time.Second

// BrowseOptions configures Browse.
type BrowseOptions struct {
	// Client talks to SQS. Required.
	Client BrowseAPI
	// DeadLetterQueueURL is the queue to look into. Required.
	DeadLetterQueueURL string
	// Max is the most copies to show. Zero means every one the queue
	// lets the view receive.
	Max int
	// VisibilityTimeout hides each received message from other
	// consumers, and from the view's later receives, until the view hands
	// it back; a view that stops early (a crash, ctx ending before the
	// hand-back) leaves its messages hidden that long. Zero means
	// DefaultBrowseVisibility.
	VisibilityTimeout time.Duration
	// WaitTime is each receive's long-poll wait, as for Redrive. Zero
	// means DefaultRedriveWait; a negative value uses short polling.
	WaitTime time.Duration
}

// DeadLetterCopy is one message of a dead-letter queue as Browse saw it.
type DeadLetterCopy struct {
	// MessageID is the ID the dead-letter queue gave the copy (the one
	// RedriveOptions.CopyIDs and the records' DeadLetterMessageID name).
	MessageID string
	// Metadata is the copy's "lambdaidem" attribute, decoded; ParseErr
	// (wrapping ErrNotDeadLetter) says why it could not be, for a message
	// that is not a lambdaidem copy (moved by SQS's own redrive policy,
	// or written by hand).
	Metadata Metadata
	ParseErr error
	// Body and Attributes are the original message's, as Parse returns
	// them (the raw message's when ParseErr is set).
	Body       string
	Attributes map[string]types.MessageAttributeValue
	// SentAt is when the copy entered the queue (SQS's SentTimestamp);
	// zero when SQS did not say.
	SentAt time.Time
	// ReceiveCount is SQS's ApproximateReceiveCount, the view's own
	// receive included.
	ReceiveCount int
}

// BrowseResult is what Browse saw.
type BrowseResult struct {
	// Copies are the messages received, in the order SQS gave them.
	Copies []DeadLetterCopy
	// More reports that Max stopped the view before the queue ran out.
	More bool
	// Unreleased counts the messages the view could not make visible
	// again at once (their visibility timeout ends them instead).
	Unreleased int
}

// Browse shows what a dead-letter queue holds without moving anything:
// it receives messages until Max or until the queue shows none it has not
// seen, decodes each, and makes every one visible again at once
// (ChangeMessageVisibility to 0), whatever happens. It never deletes and
// never sends.
//
// SQS has no way to read a message without receiving it: each message
// shown has its ApproximateReceiveCount raised by one (and counts as
// received by a queue with a redrive policy of its own, whose
// maxReceiveCount it moves closer), and is hidden from other consumers
// (a redrive running at the same time) until it is handed back.
// Messages in flight (hidden by another consumer) are not shown.
//
// Browse returns an error, with what it saw so far, when the options are
// invalid, a receive fails, or ctx ends.
func Browse(ctx context.Context, opts BrowseOptions) (BrowseResult, error) {
	var res BrowseResult
	switch {
	case opts.Client == nil:
		return res, fmt.Errorf("%w: no Client", ErrInvalidOptions)
	case opts.DeadLetterQueueURL == "":
		return res, fmt.Errorf("%w: no DeadLetterQueueURL", ErrInvalidOptions)
	case opts.Max < 0:
		return res, fmt.Errorf("%w: negative Max", ErrInvalidOptions)
	}
	if err := CheckQueueURL(opts.DeadLetterQueueURL); err != nil {
		return res, fmt.Errorf("%w: DeadLetterQueueURL: %w", ErrInvalidOptions, err)
	}
	vis := opts.VisibilityTimeout
	if vis <= 0 {
		vis = DefaultBrowseVisibility
	}
	wait := receiveWait(opts.WaitTime)
	// held is the latest receipt handle of each message received (only
	// that one can hand it back), ids the messages in the order received.
	held := map[string]string{}
	var ids []string
	defer func() {
		handles := make([]string, len(ids))
		for i, id := range ids {
			handles[i] = held[id]
		}
		res.Unreleased = release(opts.Client, opts.DeadLetterQueueURL, handles)
	}()
	for {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		n := int32(10)
		if opts.Max > 0 {
			n = int32(min(10, opts.Max-len(res.Copies)+1))
		}
		out, err := opts.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    &opts.DeadLetterQueueURL,
			MaxNumberOfMessages:         n,
			VisibilityTimeout:           int32(ClampVisibility(vis) / time.Second),
			WaitTimeSeconds:             int32(min(ClampVisibility(wait), 20*time.Second) / time.Second),
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		if err != nil {
			return res, wrap(err, "receive from dead-letter queue %s", opts.DeadLetterQueueURL)
		}
		fresh := 0
		for _, m := range out.Messages {
			id := deref(m.MessageId)
			_, seen := held[id]
			held[id] = deref(m.ReceiptHandle)
			if seen {
				continue
			}
			ids = append(ids, id)
			fresh++
			if opts.Max > 0 && len(res.Copies) == opts.Max {
				res.More = true
				continue
			}
			res.Copies = append(res.Copies, copyOf(m))
		}
		if fresh == 0 || res.More {
			return res, nil
		}
	}
}

// copyOf decodes one received message.
func copyOf(m types.Message) DeadLetterCopy {
	c := DeadLetterCopy{MessageID: deref(m.MessageId), Body: deref(m.Body), Attributes: m.MessageAttributes}
	if dm, err := Parse(m); err != nil {
		c.ParseErr = err
	} else {
		c.Metadata, c.Body, c.Attributes = dm.Metadata, dm.Body, dm.Attributes
	}
	if ms, err := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
		c.SentAt = time.UnixMilli(ms).UTC()
	}
	c.ReceiveCount, _ = strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	return c
}

// release makes the messages of the receipt handles visible again at
// once, with a fresh context so that a cancelled caller still hands them
// back. It returns how many it could not.
func release(client ChangeMessageVisibilityAPI, queueURL string, handles []string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	failed := 0
	for _, h := range handles {
		if _, err := client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
			QueueUrl:          &queueURL,
			ReceiptHandle:     &h,
			VisibilityTimeout: 0,
		}); err != nil {
			failed++
		}
	}
	return failed
}
