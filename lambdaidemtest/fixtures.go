package lambdaidemtest

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// FixtureTime is when fixture messages are sent unless WithSentAt says
// otherwise: a fixed moment, so fixtures are the same on every run.
var FixtureTime = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// Region and Account are what fixture ARNs use.
const (
	Region  = "us-east-1"
	Account = "123456789012"
)

// MessageOption changes one fixture message (see Message).
type MessageOption func(*events.SQSMessage)

// Message builds an SQS record the way Lambda hands it to a function: a
// message ID, a receipt handle, the body and its MD5, the system attributes
// (ApproximateReceiveCount 1, SentTimestamp, ApproximateFirstReceiveTimestamp,
// SenderId), the event source and its queue ARN (queue "queue" unless
// WithQueue names another). WithGroup makes it a FIFO record.
func Message(body string, opts ...MessageOption) events.SQSMessage {
	sum := md5.Sum([]byte(body))
	m := events.SQSMessage{
		MessageId:     "00000000-0000-4000-8000-" + hex.EncodeToString(sum[:6]),
		ReceiptHandle: "AQEB" + hex.EncodeToString(sum[6:]),
		Body:          body,
		Md5OfBody:     hex.EncodeToString(sum[:]),
		Attributes: map[string]string{
			"ApproximateReceiveCount":          "1",
			"SentTimestamp":                    millis(FixtureTime),
			"ApproximateFirstReceiveTimestamp": millis(FixtureTime),
			"SenderId":                         "AIDAIENQZJOLO23YVJ4VO",
		},
		EventSource:    "aws:sqs",
		EventSourceARN: QueueARN("queue"),
		AWSRegion:      Region,
	}
	for _, o := range opts {
		o(&m)
	}
	if len(m.MessageAttributes) > 0 {
		m.Md5OfMessageAttributes = attributesMD5(m.MessageAttributes)
	}
	return m
}

// Event wraps records in the event Lambda passes to an SQS-triggered
// function.
func Event(records ...events.SQSMessage) events.SQSEvent {
	return events.SQSEvent{Records: records}
}

// QueueARN is the ARN of a fixture queue.
func QueueARN(name string) string { return "arn:aws:sqs:" + Region + ":" + Account + ":" + name }

func millis(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// WithID sets the message ID.
func WithID(id string) MessageOption { return func(m *events.SQSMessage) { m.MessageId = id } }

// WithReceiveCount sets ApproximateReceiveCount: n above 1 is a redelivery.
func WithReceiveCount(n int) MessageOption {
	return func(m *events.SQSMessage) { m.Attributes["ApproximateReceiveCount"] = strconv.Itoa(n) }
}

// WithSentAt sets SentTimestamp and ApproximateFirstReceiveTimestamp.
func WithSentAt(t time.Time) MessageOption {
	return func(m *events.SQSMessage) {
		m.Attributes["SentTimestamp"] = millis(t)
		m.Attributes["ApproximateFirstReceiveTimestamp"] = millis(t)
	}
}

// WithQueue names the queue the record came from (its EventSourceARN). A
// name ending in .fifo is a FIFO queue.
func WithQueue(name string) MessageOption {
	return func(m *events.SQSMessage) { m.EventSourceARN = QueueARN(name) }
}

// WithGroup makes the record a FIFO queue's: MessageGroupId group, a
// MessageDeduplicationId (the SHA-256 of the body, as content-based
// deduplication does, unless WithDedupID follows), a SequenceNumber, and the
// queue "queue.fifo" unless it already is a FIFO queue.
func WithGroup(group string) MessageOption {
	return func(m *events.SQSMessage) {
		sum := sha256.Sum256([]byte(m.Body))
		m.Attributes["MessageGroupId"] = group
		m.Attributes["MessageDeduplicationId"] = hex.EncodeToString(sum[:])
		m.Attributes["SequenceNumber"] = "18849496460467696128"
		if !strings.HasSuffix(m.EventSourceARN, ".fifo") {
			m.EventSourceARN = QueueARN("queue.fifo")
		}
	}
}

// WithDedupID sets MessageDeduplicationId (use it after WithGroup).
func WithDedupID(id string) MessageOption {
	return func(m *events.SQSMessage) { m.Attributes["MessageDeduplicationId"] = id }
}

// WithSystemAttribute sets any other system attribute (AWSTraceHeader,
// DeadLetterQueueSourceArn, ...).
func WithSystemAttribute(name, value string) MessageOption {
	return func(m *events.SQSMessage) { m.Attributes[name] = value }
}

// WithAttribute adds a String message attribute.
func WithAttribute(name, value string) MessageOption {
	return func(m *events.SQSMessage) {
		v := value
		setAttr(m, name, events.SQSMessageAttribute{DataType: "String", StringValue: &v})
	}
}

// WithNumberAttribute adds a Number message attribute.
func WithNumberAttribute(name string, value float64) MessageOption {
	return func(m *events.SQSMessage) {
		v := strconv.FormatFloat(value, 'f', -1, 64)
		setAttr(m, name, events.SQSMessageAttribute{DataType: "Number", StringValue: &v})
	}
}

// WithBinaryAttribute adds a Binary message attribute.
func WithBinaryAttribute(name string, value []byte) MessageOption {
	return func(m *events.SQSMessage) {
		setAttr(m, name, events.SQSMessageAttribute{DataType: "Binary", BinaryValue: slices.Clone(value)})
	}
}

func setAttr(m *events.SQSMessage, name string, a events.SQSMessageAttribute) {
	if m.MessageAttributes == nil {
		m.MessageAttributes = map[string]events.SQSMessageAttribute{}
	}
	m.MessageAttributes[name] = a
}

// attributesMD5 is SQS's MD5OfMessageAttributes: over the attributes
// sorted by name, each as its length-prefixed name, length-prefixed data
// type, a transport byte (1 string, 2 binary) and its length-prefixed value.
func attributesMD5(attrs map[string]events.SQSMessageAttribute) string {
	names := make([]string, 0, len(attrs))
	for n := range attrs {
		names = append(names, n)
	}
	slices.Sort(names)
	h := md5.New()
	field := func(b []byte) {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	for _, n := range names {
		a := attrs[n]
		field([]byte(n))
		field([]byte(a.DataType))
		if a.StringValue != nil {
			h.Write([]byte{1})
			field([]byte(*a.StringValue))
		} else {
			h.Write([]byte{2})
			field(a.BinaryValue)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// SNSBody is the body SNS delivers to a subscribed queue when raw message
// delivery is off: the notification JSON around message, from a topic named
// topic, with its String message attributes.
func SNSBody(topic, message string, attrs map[string]string) string {
	type attr struct {
		Type  string `json:"Type"`
		Value string `json:"Value"`
	}
	n := struct {
		Type              string          `json:"Type"`
		MessageID         string          `json:"MessageId"`
		TopicArn          string          `json:"TopicArn"`
		Message           string          `json:"Message"`
		Timestamp         string          `json:"Timestamp"`
		SignatureVersion  string          `json:"SignatureVersion"`
		Signature         string          `json:"Signature"`
		SigningCertURL    string          `json:"SigningCertURL"`
		UnsubscribeURL    string          `json:"UnsubscribeURL"`
		MessageAttributes map[string]attr `json:"MessageAttributes,omitempty"`
	}{
		Type:             "Notification",
		MessageID:        uuidOf("sns:" + topic + ":" + message),
		TopicArn:         "arn:aws:sns:" + Region + ":" + Account + ":" + topic,
		Message:          message,
		Timestamp:        FixtureTime.Format("2006-01-02T15:04:05.000Z"),
		SignatureVersion: "1",
		Signature:        "RklYVFVSRQ==",
		SigningCertURL:   "https://sns." + Region + ".amazonaws.com/SimpleNotificationService-fixture.pem",
		UnsubscribeURL:   "https://sns." + Region + ".amazonaws.com/?Action=Unsubscribe",
	}
	if len(attrs) > 0 {
		n.MessageAttributes = make(map[string]attr, len(attrs))
		for k, v := range attrs {
			n.MessageAttributes[k] = attr{Type: "String", Value: v}
		}
	}
	b, _ := json.Marshal(n)
	return string(b)
}

// EventBridgeBody is the body EventBridge delivers to a queue target: the
// event envelope around detail (marshalled as JSON), from source with
// detailType, on the default bus.
func EventBridgeBody(source, detailType string, detail any) string {
	d, err := json.Marshal(detail)
	if err != nil {
		panic("lambdaidemtest: EventBridgeBody: " + err.Error())
	}
	e := struct {
		Version    string          `json:"version"`
		ID         string          `json:"id"`
		DetailType string          `json:"detail-type"`
		Source     string          `json:"source"`
		Account    string          `json:"account"`
		Time       string          `json:"time"`
		Region     string          `json:"region"`
		Resources  []string        `json:"resources"`
		Detail     json.RawMessage `json:"detail"`
	}{
		Version: "0", ID: uuidOf("events:" + source + ":" + detailType + ":" + string(d)),
		DetailType: detailType, Source: source, Account: Account,
		Time: FixtureTime.Format(time.RFC3339), Region: Region, Resources: []string{}, Detail: d,
	}
	b, _ := json.Marshal(e)
	return string(b)
}

// uuidOf is a stable UUID-shaped ID for s.
func uuidOf(s string) string {
	h := hex.EncodeToString(func() []byte { x := sha256.Sum256([]byte(s)); return x[:16] }())
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
