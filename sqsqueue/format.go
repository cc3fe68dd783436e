package sqsqueue

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// AttributeName is the message attribute that carries the library's
// metadata (and, when needed, the packed original attributes) on a
// dead-letter copy. Its data type is "String" and its value compact JSON;
// see the package documentation for the format.
const AttributeName = "lambdaidem"

// FormatVersion is the version of the metadata format written by Sink.
const FormatVersion = 1

// SQS limits the format is built around.
const (
	// MaxAttributes is how many message attributes SQS accepts per message.
	MaxAttributes = 10
	// DefaultMaxMessageSize is the message size Sink assumes (body plus
	// attribute names, types and values) until it has read the DLQ's own
	// MaximumMessageSize: 256 KiB, the size every queue accepts.
	DefaultMaxMessageSize = 256 * 1024
	// MaxMessageSizeLimit is the largest MaximumMessageSize SQS allows a
	// queue: 1 MiB.
	MaxMessageSizeLimit = 1024 * 1024
	// DefaultErrorLimit is how many bytes of error text Sink keeps.
	DefaultErrorLimit = 4096
)

// Metadata is what the library records about a dead-lettered message.
type Metadata struct {
	// Version is the format version (FormatVersion when written).
	Version int
	Reason  idemstore.Reason
	// Error is the last error's text, possibly truncated; ErrorTruncated
	// says so.
	Error          string
	ErrorTruncated bool
	Attempts       int
	// SourceARN is the queue the message was consumed from.
	SourceARN string
	// MessageID is the source message's ID.
	MessageID string
	// GroupID is the source message's MessageGroupId (FIFO sources only).
	GroupID string
	// FirstAttemptAt and LastAttemptAt are zero when unknown.
	FirstAttemptAt time.Time
	LastAttemptAt  time.Time
	Namespace      string
	Key            string
	// PayloadHash is the message's own payload hash, as the decorator
	// computes it for a claim; empty when unknown (the key or hash
	// function failed, or the copy was written by a version that did not
	// record it). Redrive deletes a copy as done only when its key
	// completed with this hash.
	PayloadHash string
	// LeaseProof is lambdaidem.LeaseProof of the lease the copy was sent
	// under (empty for a message that held no lease, or a copy written by
	// a version that did not record it). Redrive writes the final
	// dead-letter mark for this copy only when the record is still under
	// that lease with a pending mark.
	LeaseProof string
}

// DeadLetterMessage is a dead-letter copy decoded by Parse: the original
// body and attributes, and the metadata.
type DeadLetterMessage struct {
	Body string
	// Attributes are the original message attributes, as the source
	// message carried them (the lambdaidem attribute removed, packed ones
	// unpacked). Nil when the original had none.
	Attributes map[string]types.MessageAttributeValue
	Metadata   Metadata
	// Packed reports whether the originals were packed into the lambdaidem
	// attribute (see the package documentation).
	Packed bool
}

// wireMeta is the JSON form of the lambdaidem attribute. Short, stable
// field names: they count against the message size and are the format.
type wireMeta struct {
	V              int                 `json:"v"`
	Reason         string              `json:"reason"`
	Error          string              `json:"error,omitempty"`
	ErrorTruncated bool                `json:"error_truncated,omitempty"`
	Attempts       int                 `json:"attempts"`
	SourceARN      string              `json:"source_arn"`
	MessageID      string              `json:"message_id"`
	GroupID        string              `json:"group_id,omitempty"`
	FirstAttemptAt string              `json:"first_attempt_at,omitempty"`
	LastAttemptAt  string              `json:"last_attempt_at,omitempty"`
	Namespace      string              `json:"namespace"`
	Key            string              `json:"key"`
	PayloadHash    string              `json:"payload_hash,omitempty"`
	LeaseProof     string              `json:"lease_proof,omitempty"`
	Attrs          map[string]wireAttr `json:"attrs,omitempty"`
}

// wireAttr is one packed original attribute. Binary values are base64 in
// JSON (encoding/json's []byte form).
type wireAttr struct {
	Type       string   `json:"type"`
	String     *string  `json:"s,omitempty"`
	Binary     []byte   `json:"b,omitempty"`
	StringList []string `json:"sl,omitempty"`
	BinaryList [][]byte `json:"bl,omitempty"`
}

// encoded is a dead-letter copy ready to send.
type encoded struct {
	attrs map[string]types.MessageAttributeValue
	size  int
}

// encode builds the attributes of the dead-letter copy of msg. Originals
// stay as native attributes when they leave room for ours (at most nine,
// none named "lambdaidem"); otherwise all of them are packed into ours.
func encode(meta Metadata, msg events.SQSMessage) (encoded, error) {
	w := wireMeta{
		V:              FormatVersion,
		Reason:         string(meta.Reason),
		Error:          meta.Error,
		ErrorTruncated: meta.ErrorTruncated,
		Attempts:       meta.Attempts,
		SourceARN:      meta.SourceARN,
		MessageID:      meta.MessageID,
		GroupID:        meta.GroupID,
		FirstAttemptAt: formatTime(meta.FirstAttemptAt),
		LastAttemptAt:  formatTime(meta.LastAttemptAt),
		Namespace:      meta.Namespace,
		Key:            meta.Key,
		PayloadHash:    meta.PayloadHash,
		LeaseProof:     meta.LeaseProof,
	}
	_, clash := msg.MessageAttributes[AttributeName]
	pack := len(msg.MessageAttributes) > MaxAttributes-1 || clash

	attrs := make(map[string]types.MessageAttributeValue, len(msg.MessageAttributes)+1)
	if pack {
		w.Attrs = make(map[string]wireAttr, len(msg.MessageAttributes))
		for name, a := range msg.MessageAttributes {
			w.Attrs[name] = wireAttr{
				Type: a.DataType, String: a.StringValue, Binary: a.BinaryValue,
				StringList: a.StringListValues, BinaryList: a.BinaryListValues,
			}
		}
	} else {
		for name, a := range msg.MessageAttributes {
			attrs[name] = fromEvent(a)
		}
	}
	// HTML escaping would turn <, > and & into six bytes each, for nothing.
	var buf strings.Builder
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(w); err != nil {
		return encoded{}, fmt.Errorf("sqsqueue: encode metadata: %w", err)
	}
	s := strings.TrimSuffix(buf.String(), "\n")
	attrs[AttributeName] = types.MessageAttributeValue{DataType: ptr("String"), StringValue: &s}
	return encoded{attrs: attrs, size: messageSize(msg.Body, attrs)}, nil
}

// messageSize is the size SQS counts against its limit: the body plus each
// attribute's name, data type and value, in bytes.
func messageSize(body string, attrs map[string]types.MessageAttributeValue) int {
	n := len(body)
	for name, a := range attrs {
		n += len(name) + len(deref(a.DataType)) + len(deref(a.StringValue)) + len(a.BinaryValue)
		for _, s := range a.StringListValues {
			n += len(s)
		}
		for _, b := range a.BinaryListValues {
			n += len(b)
		}
	}
	return n
}

// Parse decodes a dead-letter copy received from the DLQ with
// ReceiveMessage (request MessageAttributeNames "All"). It fails with
// ErrNotDeadLetter when the message has no valid lambdaidem attribute.
func Parse(m types.Message) (DeadLetterMessage, error) {
	return decode(deref(m.Body), m.MessageAttributes)
}

// ParseEvent decodes a dead-letter copy delivered to a Lambda function
// subscribed to the DLQ.
func ParseEvent(m events.SQSMessage) (DeadLetterMessage, error) {
	attrs := make(map[string]types.MessageAttributeValue, len(m.MessageAttributes))
	for name, a := range m.MessageAttributes {
		attrs[name] = fromEvent(a)
	}
	return decode(m.Body, attrs)
}

func decode(body string, attrs map[string]types.MessageAttributeValue) (DeadLetterMessage, error) {
	a, ok := attrs[AttributeName]
	if !ok || a.StringValue == nil {
		return DeadLetterMessage{}, fmt.Errorf("%w: no %q attribute", ErrNotDeadLetter, AttributeName)
	}
	var w wireMeta
	if err := json.Unmarshal([]byte(*a.StringValue), &w); err != nil {
		return DeadLetterMessage{}, fmt.Errorf("%w: %q attribute: %w", ErrNotDeadLetter, AttributeName, err)
	}
	if w.V < 1 || w.V > FormatVersion {
		return DeadLetterMessage{}, fmt.Errorf("%w: unsupported format version %d", ErrNotDeadLetter, w.V)
	}
	if w.Attempts < 0 {
		return DeadLetterMessage{}, fmt.Errorf("%w: negative attempts %d", ErrNotDeadLetter, w.Attempts)
	}
	first, err1 := parseTime(w.FirstAttemptAt)
	last, err2 := parseTime(w.LastAttemptAt)
	if err1 != nil || err2 != nil {
		return DeadLetterMessage{}, fmt.Errorf("%w: bad attempt time: %w", ErrNotDeadLetter, firstErr(err1, err2))
	}
	dm := DeadLetterMessage{
		Body: body,
		Metadata: Metadata{
			Version: w.V, Reason: idemstore.Reason(w.Reason),
			Error: w.Error, ErrorTruncated: w.ErrorTruncated, Attempts: w.Attempts,
			SourceARN: w.SourceARN, MessageID: w.MessageID, GroupID: w.GroupID,
			FirstAttemptAt: first, LastAttemptAt: last,
			Namespace: w.Namespace, Key: w.Key, PayloadHash: w.PayloadHash,
			LeaseProof: w.LeaseProof,
		},
	}
	if w.Attrs != nil {
		dm.Packed = true
		dm.Attributes = make(map[string]types.MessageAttributeValue, len(w.Attrs))
		for name, p := range w.Attrs {
			dm.Attributes[name] = types.MessageAttributeValue{
				DataType: ptr(p.Type), StringValue: p.String, BinaryValue: p.Binary,
				StringListValues: p.StringList, BinaryListValues: p.BinaryList,
			}
		}
		return dm, nil
	}
	for name, v := range attrs {
		if name == AttributeName {
			continue
		}
		if dm.Attributes == nil {
			dm.Attributes = make(map[string]types.MessageAttributeValue, len(attrs)-1)
		}
		dm.Attributes[name] = v
	}
	return dm, nil
}

func fromEvent(a events.SQSMessageAttribute) types.MessageAttributeValue {
	return types.MessageAttributeValue{
		DataType:         ptr(a.DataType),
		StringValue:      a.StringValue,
		BinaryValue:      a.BinaryValue,
		StringListValues: a.StringListValues,
		BinaryListValues: a.BinaryListValues,
	}
}

// truncate shortens s to at most limit bytes without splitting a UTF-8
// sequence, and replaces characters SQS refuses in strings, so that any
// error text can be sent.
func truncate(s string, limit int) (string, bool) {
	s = strings.Map(func(r rune) rune {
		if sqsAllowed(r) {
			return r
		}
		return utf8.RuneError
	}, strings.ToValidUTF8(s, string(utf8.RuneError)))
	if limit < 0 {
		limit = 0
	}
	if len(s) <= limit {
		return s, false
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut], true
}

// sqsAllowed reports whether SQS accepts r in a message body or string
// attribute: #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF.
func sqsAllowed(r rune) bool {
	switch {
	case r == 0x9 || r == 0xA || r == 0xD:
		return true
	case r >= 0x20 && r <= 0xD7FF:
		return true
	case r >= 0xE000 && r <= 0xFFFD:
		return true
	case r >= 0x10000 && r <= 0x10FFFF:
		return true
	}
	return false
}

// The range of attempt times the format carries. Outside it a time is
// written as unknown and refused on read: RFC 3339 has four-digit years
// only, and an offset can push a time at its edge out of them (year 0 at
// +00:10 is year -1 in UTC, which would be written unparseable).
var (
	minMetaTime = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	maxMetaTime = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
)

func timeInRange(t time.Time) bool {
	return !t.Before(minMetaTime) && !t.After(maxMetaTime)
}

// formatTime writes t in UTC; the zero time, and a time outside the range
// the format can carry, are written as unknown ("").
func formatTime(t time.Time) string {
	if t.IsZero() || !timeInRange(t) {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// parseTime reads a time written by formatTime (any RFC 3339 offset is
// accepted) and returns it in UTC; a time outside 1970..9999 is an error.
func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, err
	}
	if !timeInRange(t) {
		return time.Time{}, fmt.Errorf("time %q is outside %d..%d", s, minMetaTime.Year(), maxMetaTime.Year())
	}
	return t.UTC(), nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
