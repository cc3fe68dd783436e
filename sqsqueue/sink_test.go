package sqsqueue

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"

	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

func deadLetter(msg events.SQSMessage) lambdaidem.DeadLetter {
	return lambdaidem.DeadLetter{
		Message: msg, Namespace: "orders", Key: "order-42",
		Reason: idemstore.ReasonMaxAttempts, Error: "charge failed: card declined",
		Attempts:       5,
		FirstAttemptAt: time.Date(2024, 5, 1, 10, 0, 0, 1, time.UTC),
		LastAttemptAt:  time.Date(2024, 5, 1, 10, 9, 0, 0, time.UTC),
	}
}

// wantMeta is the metadata Send must record for deadLetter(msg).
func wantMeta(msg events.SQSMessage, group string) Metadata {
	return Metadata{
		Version: FormatVersion, Reason: idemstore.ReasonMaxAttempts,
		Error: "charge failed: card declined", Attempts: 5,
		SourceARN: msg.EventSourceARN, MessageID: msg.MessageId, GroupID: group,
		FirstAttemptAt: time.Date(2024, 5, 1, 10, 0, 0, 1, time.UTC),
		LastAttemptAt:  time.Date(2024, 5, 1, 10, 9, 0, 0, time.UTC),
		Namespace:      "orders", Key: "order-42",
	}
}

func TestSinkRoundTrip(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 3, 9, 10} {
		t.Run(map[int]string{0: "none", 3: "three", 9: "nine", 10: "all ten"}[n], func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			src := b.newQueue(t, "src", false, nil)
			dlq := b.newQueue(t, "dlq", false, nil)
			attrs := typedAttrs(n)
			msg := b.consume(t, src, `{"order":42}`, attrs, "")

			id, err := NewSink(b.client, dlq.url).Send(b.ctx, deadLetter(msg))
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			got := b.receiveSome(t, dlq.url, 300)
			if len(got) != 1 || deref(got[0].MessageId) != id {
				t.Fatalf("DLQ holds %d messages, want the one with ID %s", len(got), id)
			}
			dm, err := Parse(got[0])
			if err != nil {
				t.Fatal(err)
			}
			if dm.Body != `{"order":42}` {
				t.Errorf("body = %q", dm.Body)
			}
			if dm.Packed != (n == 10) {
				t.Errorf("Packed = %v with %d original attributes", dm.Packed, n)
			}
			if diff := cmp.Diff(attrs, dm.Attributes, attrOpt); diff != "" {
				t.Errorf("original attributes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantMeta(msg, ""), dm.Metadata); diff != "" {
				t.Errorf("metadata (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSinkFIFOKeepsGroupAndDeduplicates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	src := b.newQueue(t, "src", true, nil)
	dlq := b.newQueue(t, "dlq", true, nil)
	msg := b.consume(t, src, "body", typedAttrs(2), "group-A")
	sink := NewSink(b.client, dlq.url)

	if _, err := sink.Send(b.ctx, deadLetter(msg)); err != nil {
		t.Fatalf("first Send: %v", err)
	}
	// A redelivery dead-lettered again (the mark failed after the first
	// send) must not make a second copy.
	if _, err := sink.Send(b.ctx, deadLetter(msg)); err != nil {
		t.Fatalf("second Send: %v", err)
	}
	got := b.drain(t, dlq.url)
	if len(got) != 1 {
		t.Fatalf("DLQ holds %d copies, want 1", len(got))
	}
	if g := got[0].Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]; g != "group-A" {
		t.Errorf("DLQ copy's MessageGroupId = %q, want group-A", g)
	}
	dm, err := Parse(got[0])
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantMeta(msg, "group-A"), dm.Metadata); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
}

func TestSinkFIFOFromStandardSource(t *testing.T) {
	t.Parallel()
	b := setup(t)
	src := b.newQueue(t, "src", false, nil)
	dlq := b.newQueue(t, "dlq", true, nil)
	msg := b.consume(t, src, "body", nil, "")
	if _, err := NewSink(b.client, dlq.url).Send(b.ctx, deadLetter(msg)); err != nil {
		t.Fatalf("Send: %v", err)
	}
	got := b.drain(t, dlq.url)
	if len(got) != 1 || got[0].Attributes["MessageGroupId"] != msg.MessageId {
		t.Fatalf("got %d copies; want 1 grouped by the source message ID", len(got))
	}
}

func TestSinkTooLarge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// SQS's default size for new queues is now 1 MiB; this DLQ keeps the
	// old 256 KiB, which the sink reads from the queue.
	dlq := b.newQueue(t, "dlq", false, map[string]string{"MaximumMessageSize": strconv.Itoa(DefaultMaxMessageSize)})
	src := b.newQueue(t, "src", false, nil)
	sink := NewSink(b.client, dlq.url)

	// A body that fills the limit on its own can never be dead-lettered.
	msg := b.consume(t, src, strings.Repeat("x", DefaultMaxMessageSize), nil, "")
	if _, err := sink.Send(b.ctx, deadLetter(msg)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Send of a full-size body: err = %v, want ErrTooLarge", err)
	}

	// A body that fits only without the error text goes, with the error
	// text cut down and marked truncated.
	fits := b.consume(t, src, strings.Repeat("y", DefaultMaxMessageSize-600), nil, "")
	dl := deadLetter(fits)
	dl.Error = strings.Repeat("e", DefaultErrorLimit)
	if _, err := sink.Send(b.ctx, dl); err != nil {
		t.Fatalf("Send of a body that fits without its error text: %v", err)
	}
	got := b.receiveSome(t, dlq.url, 300)
	if len(got) != 1 {
		t.Fatalf("DLQ holds %d messages, want 1", len(got))
	}
	dm, err := Parse(got[0])
	if err != nil {
		t.Fatal(err)
	}
	if !dm.Metadata.ErrorTruncated || len(dm.Metadata.Error) >= DefaultErrorLimit {
		t.Errorf("error text kept %d bytes (truncated=%v)", len(dm.Metadata.Error), dm.Metadata.ErrorTruncated)
	}
	if size := messageSize(deref(got[0].Body), got[0].MessageAttributes); size > DefaultMaxMessageSize {
		t.Errorf("sent %d bytes, limit %d", size, DefaultMaxMessageSize)
	}
}

// TestSinkOneMiB dead-letters a message of almost 1 MiB to a DLQ that takes
// 1 MiB: the sink reads the queue's MaximumMessageSize instead of assuming
// 256 KiB.
func TestSinkOneMiB(t *testing.T) {
	// The copy fills the DLQ's 1 MiB to the byte, with a Binary attribute.
	testenv.SkipOn(t, testenv.FauxqsBinarySizeAsBase64)
	t.Parallel()
	b := setup(t)
	dlq := b.newQueue(t, "dlq", false, map[string]string{"MaximumMessageSize": strconv.Itoa(MaxMessageSizeLimit)})
	src := b.newQueue(t, "src", false, map[string]string{"MaximumMessageSize": strconv.Itoa(MaxMessageSizeLimit)})
	sink := NewSink(b.client, dlq.url)

	body := strings.Repeat("z", MaxMessageSizeLimit-2048)
	msg := b.consume(t, src, body, typedAttrs(3), "")
	dl := deadLetter(msg)
	dl.Error = strings.Repeat("e", DefaultErrorLimit)
	if _, err := sink.Send(b.ctx, dl); err != nil {
		t.Fatalf("Send of a %d-byte body to a 1 MiB DLQ: %v", len(body), err)
	}
	got := b.receiveSome(t, dlq.url, 300)
	if len(got) != 1 || deref(got[0].Body) != body {
		t.Fatalf("DLQ holds %d messages, want the 1 MiB copy", len(got))
	}
	dm, err := Parse(got[0])
	if err != nil {
		t.Fatal(err)
	}
	if size := messageSize(deref(got[0].Body), got[0].MessageAttributes); size > MaxMessageSizeLimit || !dm.Metadata.ErrorTruncated {
		t.Errorf("sent %d bytes (limit %d), error truncated %v", size, MaxMessageSizeLimit, dm.Metadata.ErrorTruncated)
	}

	// A body of the full 1 MiB leaves no room for the metadata.
	full := b.consume(t, src, strings.Repeat("z", MaxMessageSizeLimit), nil, "")
	if _, err := sink.Send(b.ctx, deadLetter(full)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Send of a full 1 MiB body: err = %v, want ErrTooLarge", err)
	}
	// An explicit size wins over the queue's.
	if _, err := NewSink(b.client, dlq.url, WithMaxMessageSize(DefaultMaxMessageSize)).Send(b.ctx, deadLetter(msg)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Send over WithMaxMessageSize: err = %v, want ErrTooLarge", err)
	}
}

func TestSinkTooLargeForQueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// The queue is configured smaller than the sink believes: SQS's own
	// refusal must map to the same named error.
	dlq := b.newQueue(t, "dlq", false, map[string]string{"MaximumMessageSize": "1024"})
	src := b.newQueue(t, "src", false, nil)
	msg := b.consume(t, src, strings.Repeat("x", 2048), nil, "")
	_, err := NewSink(b.client, dlq.url, WithMaxMessageSize(1<<20)).Send(b.ctx, deadLetter(msg))
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	var ae apiError
	if !errors.As(err, &ae) {
		t.Errorf("the SDK's error was not kept: %v", err)
	}
}

func TestSinkErrorLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dlq := b.newQueue(t, "dlq", false, nil)
	src := b.newQueue(t, "src", false, nil)
	msg := b.consume(t, src, "b", nil, "")
	dl := deadLetter(msg)
	dl.Error = strings.Repeat("é", 100) // 200 bytes
	if _, err := NewSink(b.client, dlq.url, WithErrorLimit(11)).Send(b.ctx, dl); err != nil {
		t.Fatal(err)
	}
	dm, err := Parse(b.receiveSome(t, dlq.url, 300)[0])
	if err != nil {
		t.Fatal(err)
	}
	if dm.Metadata.Error != strings.Repeat("é", 5) || !dm.Metadata.ErrorTruncated {
		t.Errorf("error = %q (truncated=%v), want 5 é, truncated", dm.Metadata.Error, dm.Metadata.ErrorTruncated)
	}
}

func TestSinkDeletedQueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dlq := b.newQueue(t, "dlq", false, nil)
	src := b.newQueue(t, "src", false, nil)
	msg := b.consume(t, src, "b", nil, "")
	if _, err := b.client.DeleteQueue(b.ctx, &sqs.DeleteQueueInput{QueueUrl: &dlq.url}); err != nil {
		t.Fatal(err)
	}
	_, err := NewSink(b.client, dlq.url).Send(b.ctx, deadLetter(msg))
	if !errors.Is(err, ErrQueueNotFound) {
		t.Fatalf("err = %v, want ErrQueueNotFound", err)
	}
	var ae apiError
	if !errors.As(err, &ae) {
		t.Errorf("the SDK's error was not kept: %v", err)
	}
}

func TestSinkClosedPort(t *testing.T) {
	t.Parallel()
	b := setup(t)
	closed := closedEndpoint(t)
	client := sqs.New(b.client.Options(), func(o *sqs.Options) {
		o.BaseEndpoint = aws.String(closed)
		o.RetryMaxAttempts = 1
	})
	msg := toEvent(types.Message{MessageId: aws.String("m"), Body: aws.String("b")}, "arn:aws:sqs:us-east-1:123456789012:src")
	_, err := NewSink(client, closed+"/123456789012/dlq").Send(b.ctx, deadLetter(msg))
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("err = %v, want ErrUnreachable", err)
	}
}

// closedEndpoint returns the URL of a loopback port nobody listens on.
func closedEndpoint(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}
