package sqsqueue

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// SendMessageAPI is the part of *sqs.Client that Sink uses.
type SendMessageAPI interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// QueueAttributesAPI is the part of *sqs.Client that Sink uses, when the
// client has it, to read the DLQ's MaximumMessageSize.
type QueueAttributesAPI interface {
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// Sink sends dead-letter copies to one SQS queue. It implements
// lambdaidem.DeadLetterSink and is safe for concurrent use.
type Sink struct {
	client     SendMessageAPI
	queueURL   string
	fifo       bool
	errorLimit int

	// maxSize is the size limit a copy is checked against: set by
	// WithMaxMessageSize, else read from the queue on the first Send that
	// can (sized), else DefaultMaxMessageSize.
	mu      sync.Mutex
	maxSize int
	sized   bool
}

var _ lambdaidem.DeadLetterSink = (*Sink)(nil)

// SinkOption configures a Sink.
type SinkOption func(*Sink)

// WithMaxMessageSize sets the largest message the DLQ accepts, in bytes
// (body plus attributes), up to MaxMessageSizeLimit (1 MiB). Without it the
// Sink reads the DLQ's MaximumMessageSize attribute once (when its client
// has GetQueueAttributes, as *sqs.Client does), and until that read
// succeeds assumes DefaultMaxMessageSize (256 KiB), which every queue
// accepts. Values below 1 are ignored.
func WithMaxMessageSize(n int) SinkOption {
	return func(s *Sink) {
		if n > 0 {
			s.maxSize, s.sized = min(n, MaxMessageSizeLimit), true
		}
	}
}

// WithErrorLimit sets how many bytes of error text a copy carries (default
// DefaultErrorLimit, 4096). Longer text is cut at a character boundary and
// marked error_truncated. Negative values are treated as 0 (no error text).
func WithErrorLimit(n int) SinkOption {
	return func(s *Sink) { s.errorLimit = max(n, 0) }
}

// NewSink returns a Sink that sends to the queue at queueURL. A URL ending
// in ".fifo" is treated as a FIFO queue. A nil client, or a queueURL that
// is not a queue URL (CheckQueueURL: an unset environment variable, an ARN
// or a name where the URL belongs), is refused at once: NewSink panics
// with a *idemstore.ConfigError wrapping ErrInvalidQueueURL (or
// idemstore.ErrInvalidOption for the client), as the decorators do for
// options that could never work, rather than fail every dead-letter send.
func NewSink(client SendMessageAPI, queueURL string, opts ...SinkOption) *Sink {
	if nilClient(client) {
		refuse("sqsqueue.NewSink", "client", fmt.Errorf("%w: the SQS client is nil", idemstore.ErrInvalidOption))
	}
	if err := CheckQueueURL(queueURL); err != nil {
		refuse("sqsqueue.NewSink", "queue URL", err)
	}
	s := &Sink{
		client:     client,
		queueURL:   queueURL,
		fifo:       isFIFO(queueURL),
		maxSize:    DefaultMaxMessageSize,
		errorLimit: DefaultErrorLimit,
	}
	for _, o := range opts {
		o(s)
	}
	if _, ok := client.(QueueAttributesAPI); !ok {
		s.sized = true
	}
	return s
}

// limit returns the size a copy must fit in, reading the DLQ's
// MaximumMessageSize the first time it can. A failed read is not an error:
// the copy is checked against the size every queue accepts, and the next
// Send asks again.
func (s *Sink) limit(ctx context.Context) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sized {
		return s.maxSize
	}
	out, err := s.client.(QueueAttributesAPI).GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       &s.queueURL,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameMaximumMessageSize},
	})
	if err != nil {
		return s.maxSize
	}
	if n, err := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameMaximumMessageSize)]); err == nil && n > 0 {
		s.maxSize = min(n, MaxMessageSizeLimit)
	}
	s.sized = true
	return s.maxSize
}

// QueueURL returns the DLQ's URL.
func (s *Sink) QueueURL() string { return s.queueURL }

// Send sends a copy of dl.Message to the DLQ: the original body, the
// original attributes and the metadata, in the format described in the
// package documentation. It returns the copy's message ID.
//
// The copy is sized against the DLQ's limit (see WithMaxMessageSize).
//
// Errors: ErrTooLarge when the copy can never fit (checked before sending,
// and mapped from SQS's own refusal); ErrQueueNotFound, ErrAccessDenied and
// ErrUnreachable for the matching SQS failures, with the SDK's error kept.
func (s *Sink) Send(ctx context.Context, dl lambdaidem.DeadLetter) (string, error) {
	msg := dl.Message
	errText, truncated := truncate(dl.Error, s.errorLimit)
	meta := Metadata{
		Version: FormatVersion, Reason: dl.Reason,
		Error: errText, ErrorTruncated: truncated, Attempts: dl.Attempts,
		SourceARN: msg.EventSourceARN, MessageID: msg.MessageId,
		GroupID:        msg.Attributes["MessageGroupId"],
		FirstAttemptAt: dl.FirstAttemptAt, LastAttemptAt: dl.LastAttemptAt,
		Namespace: dl.Namespace, Key: dl.Key, PayloadHash: dl.PayloadHash,
		LeaseProof: dl.LeaseProof,
	}
	limit := s.limit(ctx)
	enc, err := encode(meta, msg)
	if err != nil {
		return "", err
	}
	if over := enc.size - limit; over > 0 && meta.Error != "" {
		// The error text is the only part we may shorten: give up as much
		// of it as needed (JSON escaping can make it count for more than its
		// length, hence the loop) before declaring the copy too large.
		for over > 0 && meta.Error != "" {
			meta.Error, _ = truncate(meta.Error, len(meta.Error)-over)
			meta.ErrorTruncated = true
			if enc, err = encode(meta, msg); err != nil {
				return "", err
			}
			over = enc.size - limit
		}
	}
	if enc.size > limit {
		return "", fmt.Errorf("%w: dead-letter copy of message %s is %d bytes, the limit is %d", ErrTooLarge, msg.MessageId, enc.size, limit)
	}

	in := &sqs.SendMessageInput{
		QueueUrl:          &s.queueURL,
		MessageBody:       &msg.Body,
		MessageAttributes: enc.attrs,
	}
	if s.fifo {
		group := meta.GroupID
		if group == "" {
			// A standard source has no group; one group per message keeps
			// the DLQ from serialising unrelated messages.
			group = msg.MessageId
		}
		in.MessageGroupId = &group
		in.MessageDeduplicationId = ptr(DeduplicationID(msg.MessageId, string(dl.Reason)))
	}
	out, err := s.client.SendMessage(ctx, in)
	if err != nil {
		return "", wrap(err, "send message %s to dead-letter queue %s", msg.MessageId, s.queueURL)
	}
	return deref(out.MessageId), nil
}

// DeduplicationID returns a stable FIFO deduplication ID for the given
// parts: the hex SHA-256 of the parts joined by NUL bytes (64 characters,
// within SQS's 128-character limit and alphabet). The Sink uses the source
// message ID and the reason, so a repeated send of the same dead-letter
// within SQS's five-minute window is dropped by SQS.
func DeduplicationID(parts ...string) string {
	h := sha256.New()
	for i, p := range parts {
		if i > 0 {
			h.Write([]byte{0})
		}
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}
