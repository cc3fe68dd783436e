package producer

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// DefaultKeyAttribute is the message attribute carrying the key: what a
// consumer reads with lambdaidem.WithKeyAttribute(DefaultKeyAttribute).
const DefaultKeyAttribute = "idempotency-key"

// MaxBatch is SQS's limit of entries per SendMessageBatch.
const MaxBatch = 10

// MaxAttributes is SQS's limit of message attributes per message.
const MaxAttributes = 10

// MaxRequestBytes is SQS's limit on one message and on the messages of one
// SendMessageBatch together (bodies plus attribute names, types and
// values): 1 MiB since SQS raised it from 256 KiB in 2025. A queue may be
// configured smaller (MaximumMessageSize); SQS then refuses larger ones.
const MaxRequestBytes = 1 << 20

// Named errors for input that is refused before anything is sent.
var (
	// ErrMissingKey: the message has no idempotency key.
	ErrMissingKey = errors.New("producer: missing idempotency key")
	// ErrMissingGroup: a message for a FIFO queue has no MessageGroupId.
	ErrMissingGroup = errors.New("producer: FIFO queue needs a message group ID")
	// ErrReservedAttribute: the message's own attributes use the key
	// attribute's name.
	ErrReservedAttribute = errors.New("producer: attribute name is reserved for the idempotency key")
	// ErrBatchSize: a batch is empty or has more than MaxBatch messages.
	ErrBatchSize = errors.New("producer: batch must hold 1 to 10 messages")
	// ErrDelayOnFIFO: FIFO queues refuse per-message delays.
	ErrDelayOnFIFO = errors.New("producer: FIFO queues do not take per-message delays")
	// ErrTooLarge: the message, with its attributes and the key, is over
	// MaxRequestBytes.
	ErrTooLarge = errors.New("producer: message over SQS's 1 MiB limit")
)

// API is the part of *sqs.Client the Producer uses.
type API interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

var _ API = (*sqs.Client)(nil)

// Message is one message to send.
type Message struct {
	// Key identifies the business operation, stable across the producer's
	// retries (an order ID, a scheduler's run ID): two sends with one key
	// are one operation to the consumer. Required.
	Key string
	// Body is the message body.
	Body string
	// GroupID is the MessageGroupId: required on FIFO queues, ignored on
	// standard ones.
	GroupID string
	// Attributes are further message attributes. The key attribute's name
	// is reserved. SQS allows ten attributes per message, the key's
	// included.
	Attributes map[string]types.MessageAttributeValue
	// Delay postpones delivery (standard queues only; whole seconds, at
	// most 15 minutes).
	Delay time.Duration
}

// Option configures a Producer.
type Option func(*Producer)

// WithKeyAttribute sets the name of the key attribute (default
// DefaultKeyAttribute). Consumers must read the same name.
func WithKeyAttribute(name string) Option { return func(p *Producer) { p.attr = name } }

// TraceInjector writes the trace context of ctx as fields, by calling set
// once per field (name, value). otelidem.TraceInjector makes one from an
// OpenTelemetry propagator; this package has no tracing dependency.
type TraceInjector func(ctx context.Context, set func(field, value string))

// WithTraceContext adds the trace context of the context Send is given to
// each message, as String message attributes written by inject:
// otelidem.TraceInjector(propagation.TraceContext{}) writes traceparent
// (and tracestate when there is one), which package otelidem reads on the
// consuming side to link the record's span to the sender's. The fields
// take only the attributes SQS has left (MaxAttributes, the key's and the
// message's own counted first; traceparent before the others): a message
// whose attributes leave no room is sent without them, never refused, and
// a field never replaces an attribute of the message's own. A context
// without a span adds nothing.
func WithTraceContext(inject TraceInjector) Option {
	return func(p *Producer) { p.inject = inject }
}

// Producer sends messages to one queue with a stable idempotency key. It
// is safe for concurrent use.
type Producer struct {
	client   API
	queueURL string
	fifo     bool
	attr     string
	inject   TraceInjector
}

// New returns a Producer for the queue at queueURL. A URL ending in ".fifo"
// is a FIFO queue: its messages get a MessageDeduplicationId derived from
// the key and need a GroupID.
func New(client API, queueURL string, opts ...Option) *Producer {
	p := &Producer{client: client, queueURL: queueURL, fifo: strings.HasSuffix(queueURL, ".fifo"), attr: DefaultKeyAttribute}
	for _, o := range opts {
		o(p)
	}
	return p
}

// DeduplicationID is the MessageDeduplicationId used for a key on FIFO
// queues: the hex SHA-256 of the key, 64 characters, always within SQS's
// 128-character limit and alphabet whatever the key holds. A consumer
// keyed by lambdaidem.WithKeyDeduplicationID sees this value as the key.
func DeduplicationID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// Sent identifies a message SQS accepted.
type Sent struct {
	MessageID string
	// SequenceNumber is set on FIFO queues.
	SequenceNumber string
}

// Send sends one message. Retrying Send with the same Message after an
// error or a lost response is safe: on a FIFO queue SQS drops the copy
// within its five-minute deduplication window; on a standard queue, and
// after that window, the consumer's decorator recognises the key.
func (p *Producer) Send(ctx context.Context, m Message) (Sent, error) {
	e, err := p.entry(ctx, m)
	if err != nil {
		return Sent{}, err
	}
	out, err := p.client.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:               aws.String(p.queueURL),
		MessageBody:            e.MessageBody,
		MessageAttributes:      e.MessageAttributes,
		MessageGroupId:         e.MessageGroupId,
		MessageDeduplicationId: e.MessageDeduplicationId,
		DelaySeconds:           e.DelaySeconds,
	})
	if err != nil {
		return Sent{}, fmt.Errorf("producer: send key %q: %w", m.Key, err)
	}
	return Sent{MessageID: aws.ToString(out.MessageId), SequenceNumber: aws.ToString(out.SequenceNumber)}, nil
}

// Result is the outcome of one message of a batch.
type Result struct {
	Sent
	// Err is the entry's failure (an *EntryError from SQS, or a named
	// error of this package for a message refused before sending), nil
	// when SQS accepted it.
	Err error
}

// EntryError is SQS's refusal of one batch entry.
type EntryError struct {
	Code        string
	Message     string
	SenderFault bool // true: the message itself is wrong, a retry fails again
}

func (e *EntryError) Error() string {
	return fmt.Sprintf("producer: SQS refused the message: %s: %s (sender fault %t)", e.Code, e.Message, e.SenderFault)
}

// BatchError reports the messages of a batch that were not sent. Retry
// exactly those (Failed); the others were accepted.
type BatchError struct {
	// Failed holds the indexes, into the batch, of the messages not sent.
	Failed []int
	// Errs holds each failed message's error, in the order of Failed.
	Errs []error
}

func (e *BatchError) Error() string {
	return fmt.Sprintf("producer: %d message(s) of the batch not sent, first: %v", len(e.Failed), e.Errs[0])
}

// Unwrap returns the entries' errors.
func (e *BatchError) Unwrap() []error { return e.Errs }

// SendBatch sends up to MaxBatch messages, in one request when they fit in
// MaxRequestBytes together and otherwise in as few consecutive requests as
// do (ten messages of 1 MiB take ten). Results are in the order of msgs. When some messages were not sent, the error is a
// *BatchError naming them and the results say why; a message refused
// before sending (a missing key) does not stop the others. When the
// request itself failed, every result carries that error. Retrying the
// failed messages with the same keys is safe, as for Send.
func (p *Producer) SendBatch(ctx context.Context, msgs []Message) ([]Result, error) {
	if len(msgs) == 0 || len(msgs) > MaxBatch {
		return nil, fmt.Errorf("%w: got %d", ErrBatchSize, len(msgs))
	}
	results := make([]Result, len(msgs))
	entries := make([]types.SendMessageBatchRequestEntry, 0, len(msgs))
	for i, m := range msgs {
		e, err := p.entry(ctx, m)
		if err != nil {
			results[i].Err = err
			continue
		}
		// Entry IDs only need to be unique within the request: the index
		// maps answers back to messages.
		e.Id = aws.String(strconv.Itoa(i))
		entries = append(entries, e)
	}
	for len(entries) > 0 {
		n, size := 0, 0
		for n < len(entries) && (n == 0 || size+entrySize(entries[n]) <= MaxRequestBytes) {
			size += entrySize(entries[n])
			n++
		}
		p.sendEntries(ctx, entries[:n], results)
		entries = entries[n:]
	}
	var be BatchError
	for i, r := range results {
		if r.Err != nil {
			be.Failed = append(be.Failed, i)
			be.Errs = append(be.Errs, r.Err)
		}
	}
	if len(be.Failed) > 0 {
		return results, &be
	}
	return results, nil
}

// sendEntries sends entries in one SendMessageBatch request and records
// each one's outcome in results, by the index in its Id.
func (p *Producer) sendEntries(ctx context.Context, entries []types.SendMessageBatchRequestEntry, results []Result) {
	out, err := p.client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(p.queueURL), Entries: entries})
	if err != nil {
		err = fmt.Errorf("producer: send batch: %w", err)
		for _, e := range entries {
			results[index(e.Id)].Err = err
		}
	} else {
		answered := make(map[int]bool, len(entries))
		for _, s := range out.Successful {
			i := index(s.Id)
			if i < 0 || i >= len(results) {
				continue
			}
			answered[i] = true
			results[i].Sent = Sent{MessageID: aws.ToString(s.MessageId), SequenceNumber: aws.ToString(s.SequenceNumber)}
		}
		for _, f := range out.Failed {
			i := index(f.Id)
			if i < 0 || i >= len(results) {
				continue
			}
			answered[i] = true
			results[i].Err = &EntryError{Code: aws.ToString(f.Code), Message: aws.ToString(f.Message), SenderFault: f.SenderFault}
		}
		// An entry SQS said nothing about was not confirmed: report it
		// failed, so it is retried rather than assumed sent.
		for _, e := range entries {
			if i := index(e.Id); !answered[i] {
				results[i].Err = errors.New("producer: SQS did not report on the message")
			}
		}
	}
}

// entrySize is what SQS counts of an entry against its size limit: the
// body plus each attribute's name, data type and value.
func entrySize(e types.SendMessageBatchRequestEntry) int {
	n := len(aws.ToString(e.MessageBody))
	for name, a := range e.MessageAttributes {
		n += len(name) + len(aws.ToString(a.DataType)) + len(aws.ToString(a.StringValue)) + len(a.BinaryValue)
		for _, s := range a.StringListValues {
			n += len(s)
		}
		for _, b := range a.BinaryListValues {
			n += len(b)
		}
	}
	return n
}

func index(id *string) int {
	i, err := strconv.Atoi(aws.ToString(id))
	if err != nil {
		return -1
	}
	return i
}

// entry validates m and builds its batch entry (without Id).
func (p *Producer) entry(ctx context.Context, m Message) (types.SendMessageBatchRequestEntry, error) {
	var e types.SendMessageBatchRequestEntry
	if m.Key == "" {
		return e, ErrMissingKey
	}
	if _, ok := m.Attributes[p.attr]; ok {
		return e, fmt.Errorf("%w: %q", ErrReservedAttribute, p.attr)
	}
	attrs := make(map[string]types.MessageAttributeValue, len(m.Attributes)+1)
	for k, v := range m.Attributes {
		attrs[k] = v
	}
	attrs[p.attr] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(m.Key)}
	if p.inject != nil {
		c := &traceFields{}
		p.inject(ctx, c.set)
		// traceparent, which names the span, before what qualifies it.
		slices.SortStableFunc(c.fields, func(a, b [2]string) int {
			return cmp.Compare(rank(a[0]), rank(b[0]))
		})
		for _, f := range c.fields {
			if _, taken := attrs[f[0]]; taken || len(attrs) >= MaxAttributes || f[1] == "" {
				continue
			}
			attrs[f[0]] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(f[1])}
		}
	}
	e.MessageBody = aws.String(m.Body)
	e.MessageAttributes = attrs
	if p.fifo {
		if m.GroupID == "" {
			return e, fmt.Errorf("%w (key %q)", ErrMissingGroup, m.Key)
		}
		if m.Delay != 0 {
			return e, ErrDelayOnFIFO
		}
		e.MessageGroupId = aws.String(m.GroupID)
		e.MessageDeduplicationId = aws.String(DeduplicationID(m.Key))
	} else if m.Delay > 0 {
		// Rounded up: a delay is a minimum.
		e.DelaySeconds = int32((m.Delay + time.Second - 1) / time.Second)
	}
	if n := entrySize(e); n > MaxRequestBytes {
		return e, fmt.Errorf("%w: key %q: %d bytes", ErrTooLarge, m.Key, n)
	}
	return e, nil
}

// rank orders the trace fields for the attributes left: the W3C
// traceparent first, then the rest in the order written.
func rank(field string) int {
	if field == "traceparent" {
		return 0
	}
	return 1
}

// traceFields collects what an injector writes, in its order.
type traceFields struct{ fields [][2]string }

func (c *traceFields) set(key, value string) {
	for i, f := range c.fields {
		if f[0] == key {
			c.fields[i][1] = value
			return
		}
	}
	c.fields = append(c.fields, [2]string{key, value})
}
