package sqsqueue

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// attrOpt compares SDK attribute values by their exported fields.
var attrOpt = cmpopts.IgnoreUnexported(types.MessageAttributeValue{})

func sampleMeta() Metadata {
	return Metadata{
		Version: FormatVersion, Reason: idemstore.ReasonMaxAttempts,
		Error: "boom <&>", Attempts: 3,
		SourceARN: "arn:aws:sqs:us-east-1:123456789012:src", MessageID: "m-1", GroupID: "g",
		FirstAttemptAt: time.Date(2024, 5, 1, 10, 0, 0, 123456789, time.UTC),
		LastAttemptAt:  time.Date(2024, 5, 1, 10, 5, 0, 0, time.UTC),
		Namespace:      "orders", Key: "order-42",
	}
}

func eventAttrs(n int) map[string]events.SQSMessageAttribute {
	attrs := make(map[string]events.SQSMessageAttribute, n)
	for i := range n {
		switch i % 3 {
		case 0:
			attrs[fmt.Sprintf("s%d", i)] = events.SQSMessageAttribute{DataType: "String", StringValue: ptr(fmt.Sprintf("v%d", i))}
		case 1:
			attrs[fmt.Sprintf("n%d", i)] = events.SQSMessageAttribute{DataType: "Number.int", StringValue: ptr(fmt.Sprint(i))}
		case 2:
			attrs[fmt.Sprintf("b%d", i)] = events.SQSMessageAttribute{DataType: "Binary", BinaryValue: []byte{0, byte(i), 0xff}}
		}
	}
	return attrs
}

// roundTrip encodes and decodes through the wire attributes, as SQS would
// hand them back.
func roundTrip(t *testing.T, meta Metadata, msg events.SQSMessage) (encoded, DeadLetterMessage) {
	t.Helper()
	enc, err := encode(meta, msg)
	if err != nil {
		t.Fatal(err)
	}
	dm, err := Parse(types.Message{Body: &msg.Body, MessageAttributes: enc.attrs})
	if err != nil {
		t.Fatal(err)
	}
	return enc, dm
}

func TestFormatRoundTrip(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 9, 10} {
		t.Run(fmt.Sprint(n, " attributes"), func(t *testing.T) {
			t.Parallel()
			msg := events.SQSMessage{Body: `{"id":42}`, MessageAttributes: eventAttrs(n)}
			enc, dm := roundTrip(t, sampleMeta(), msg)
			if len(enc.attrs) > MaxAttributes {
				t.Fatalf("%d attributes sent, SQS allows %d", len(enc.attrs), MaxAttributes)
			}
			wantPacked := n == MaxAttributes
			if dm.Packed != wantPacked {
				t.Errorf("Packed = %v, want %v", dm.Packed, wantPacked)
			}
			if wantPacked && len(enc.attrs) != 1 {
				t.Errorf("packed copy has %d attributes, want 1", len(enc.attrs))
			}
			if diff := cmp.Diff(sampleMeta(), dm.Metadata); diff != "" {
				t.Errorf("metadata (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(toTypes(msg.MessageAttributes), dm.Attributes, attrOpt); diff != "" {
				t.Errorf("attributes (-want +got):\n%s", diff)
			}
			if dm.Body != msg.Body {
				t.Errorf("body = %q", dm.Body)
			}
		})
	}
}

func TestFormatPacksOnNameClash(t *testing.T) {
	t.Parallel()
	attrs := map[string]events.SQSMessageAttribute{
		AttributeName: {DataType: "String", StringValue: ptr(`{"v":1,"reason":"poison"}`)},
		"other":       {DataType: "String", StringValue: ptr("x")},
	}
	enc, dm := roundTrip(t, sampleMeta(), events.SQSMessage{Body: "b", MessageAttributes: attrs})
	if !dm.Packed || len(enc.attrs) != 1 {
		t.Fatalf("Packed = %v with %d attributes, want packed into 1", dm.Packed, len(enc.attrs))
	}
	if diff := cmp.Diff(toTypes(attrs), dm.Attributes, attrOpt); diff != "" {
		t.Errorf("attributes (-want +got):\n%s", diff)
	}
}

func TestFormatExactJSON(t *testing.T) {
	t.Parallel()
	meta := sampleMeta()
	meta.FirstAttemptAt = time.Time{}
	enc, err := encode(meta, events.SQSMessage{Body: "b"})
	if err != nil {
		t.Fatal(err)
	}
	// The documented format, byte for byte: change it only with
	// FormatVersion and the package documentation.
	const want = `{"v":1,"reason":"max_attempts","error":"boom <&>","attempts":3,"source_arn":"arn:aws:sqs:us-east-1:123456789012:src","message_id":"m-1","group_id":"g","last_attempt_at":"2024-05-01T10:05:00Z","namespace":"orders","key":"order-42"}`
	if got := deref(enc.attrs[AttributeName].StringValue); got != want {
		t.Errorf("lambdaidem attribute:\n got %s\nwant %s", got, want)
	}
	if got := deref(enc.attrs[AttributeName].DataType); got != "String" {
		t.Errorf("data type = %q", got)
	}
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	tests := map[string]map[string]types.MessageAttributeValue{
		"no attribute":   {"x": {DataType: ptr("String"), StringValue: ptr("y")}},
		"not JSON":       {AttributeName: {DataType: ptr("String"), StringValue: ptr("nope")}},
		"future version": {AttributeName: {DataType: ptr("String"), StringValue: ptr(`{"v":99}`)}},
		"bad time":       {AttributeName: {DataType: ptr("String"), StringValue: ptr(`{"v":1,"last_attempt_at":"yesterday"}`)}},
	}
	for name, attrs := range tests {
		if _, err := Parse(types.Message{Body: ptr("b"), MessageAttributes: attrs}); !errors.Is(err, ErrNotDeadLetter) {
			t.Errorf("%s: err = %v, want ErrNotDeadLetter", name, err)
		}
	}
}

func TestParseEvent(t *testing.T) {
	t.Parallel()
	orig := events.SQSMessage{Body: "b", MessageAttributes: eventAttrs(4)}
	enc, err := encode(sampleMeta(), orig)
	if err != nil {
		t.Fatal(err)
	}
	// The DLQ copy as a Lambda function subscribed to the DLQ sees it.
	ev := events.SQSMessage{Body: "b", MessageAttributes: map[string]events.SQSMessageAttribute{}}
	for name, a := range enc.attrs {
		ev.MessageAttributes[name] = events.SQSMessageAttribute{DataType: deref(a.DataType), StringValue: a.StringValue, BinaryValue: a.BinaryValue}
	}
	dm, err := ParseEvent(ev)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(toTypes(orig.MessageAttributes), dm.Attributes, attrOpt); diff != "" {
		t.Errorf("attributes (-want +got):\n%s", diff)
	}
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in    string
		limit int
		want  string
		cut   bool
	}{
		{"hello", 10, "hello", false},
		{"hello", 5, "hello", false},
		{"hello", 3, "hel", true},
		{"héllo", 2, "h", true}, // never split the two bytes of é
		{"a\x00b", 10, "a\uFFFDb", false},
		{"a\xffb", 10, "a\uFFFDb", false},
		{"a\uFFFEb", 10, "a\uFFFDb", false},
		{"x", -1, "", true},
	}
	for _, tt := range tests {
		got, cut := truncate(tt.in, tt.limit)
		if got != tt.want || cut != tt.cut {
			t.Errorf("truncate(%q, %d) = %q, %v; want %q, %v", tt.in, tt.limit, got, cut, tt.want, tt.cut)
		}
		if !utf8.ValidString(got) {
			t.Errorf("truncate(%q, %d) is not valid UTF-8", tt.in, tt.limit)
		}
	}
}

func TestMessageSize(t *testing.T) {
	t.Parallel()
	attrs := map[string]types.MessageAttributeValue{
		"ab": {DataType: ptr("String"), StringValue: ptr("xyz")},   // 2+6+3
		"c":  {DataType: ptr("Binary"), BinaryValue: []byte{1, 2}}, // 1+6+2
	}
	if got, want := messageSize(strings.Repeat("x", 100), attrs), 100+11+9; got != want {
		t.Errorf("messageSize = %d, want %d", got, want)
	}
}

func TestClampVisibility(t *testing.T) {
	t.Parallel()
	tests := map[time.Duration]time.Duration{
		-time.Second:            0,
		0:                       0,
		time.Millisecond:        time.Second,
		1500 * time.Millisecond: 2 * time.Second,
		30 * time.Second:        30 * time.Second,
		13 * time.Hour:          MaxVisibility,
	}
	for in, want := range tests {
		if got := ClampVisibility(in); got != want {
			t.Errorf("ClampVisibility(%v) = %v, want %v", in, got, want)
		}
	}
}

func TestJitter(t *testing.T) {
	t.Parallel()
	for range 1000 {
		got := Jitter(10*time.Second, 0.5)
		if got < 10*time.Second || got > 15*time.Second {
			t.Fatalf("Jitter(10s, 0.5) = %v, outside [10s, 15s]", got)
		}
	}
	if got := Jitter(10*time.Second, 0); got != 10*time.Second {
		t.Errorf("Jitter with no spread = %v", got)
	}
}

func TestDeduplicationID(t *testing.T) {
	t.Parallel()
	a := DeduplicationID("m-1", "poison")
	if len(a) != 64 || a != DeduplicationID("m-1", "poison") {
		t.Fatalf("DeduplicationID not stable or wrong length: %q", a)
	}
	if a == DeduplicationID("m-1", "max_attempts") || a == DeduplicationID("m-1p", "oison") {
		t.Error("different parts give the same ID")
	}
}

func toTypes(in map[string]events.SQSMessageAttribute) map[string]types.MessageAttributeValue {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]types.MessageAttributeValue, len(in))
	for name, a := range in {
		out[name] = fromEvent(a)
	}
	return out
}
