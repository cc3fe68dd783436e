package integration_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

// Poison messages on real queues: the decorator on the DynamoDB
// store, a real source queue and DLQ on the SQS emulator, and a small
// stand-in for the event source mapping that receives, invokes, and deletes
// what the partial batch response allows. Failed messages are not made
// visible by the stand-in: only the library's own ChangeMessageVisibility
// brings them back before the queue's 60-second visibility timeout, so the
// tests also show that it works.

// source is a real source queue with a 60-second visibility timeout.
type source struct {
	client *sqs.Client
	url    string
	arn    string
}

func newSource(t *testing.T) source {
	t.Helper()
	client := testenv.SQS(t)
	out, err := client.CreateQueue(t.Context(), &sqs.CreateQueueInput{
		QueueName:  aws.String(testenv.Name("lambdaidem-it-src")),
		Attributes: map[string]string{"VisibilityTimeout": "60"},
	})
	if err != nil {
		t.Fatalf("create source queue: %v", err)
	}
	s := source{client: client, url: aws.ToString(out.QueueUrl)}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(s.url)})
	})
	attrs, err := client.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(s.url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		t.Fatalf("queue ARN: %v", err)
	}
	s.arn = attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	return s
}

func (s source) send(t *testing.T, body string) {
	t.Helper()
	if _, err := s.client.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(s.url), MessageBody: aws.String(body)}); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// deliver receives one batch (waiting up to 10 s for it: an external
// condition), invokes h and deletes the acknowledged records. It returns
// how many records the batch had, zero when none came.
func (s source) deliver(t *testing.T, h func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)) int {
	t.Helper()
	var msgs []sqstypes.Message
	deadline := time.Now().Add(10 * time.Second)
	for len(msgs) == 0 && time.Now().Before(deadline) {
		out, err := s.client.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(s.url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		msgs = out.Messages
	}
	if len(msgs) == 0 {
		return 0
	}
	ev := events.SQSEvent{}
	for _, m := range msgs {
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
			Attributes: m.Attributes, EventSource: "aws:sqs", EventSourceARN: s.arn, AWSRegion: "us-east-1",
		})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // an invocation's deadline
	defer cancel()
	resp, err := h(ctx, ev)
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	for _, r := range ev.Records {
		if err != nil || failed[r.MessageId] {
			continue // Lambda's event source mapping keeps these
		}
		if _, derr := s.client.DeleteMessage(t.Context(), &sqs.DeleteMessageInput{QueueUrl: aws.String(s.url), ReceiptHandle: aws.String(r.ReceiptHandle)}); derr != nil {
			t.Fatalf("delete: %v", derr)
		}
	}
	return len(ev.Records)
}

// left is how many messages the source queue holds, visible or in flight.
func (s source) left(t *testing.T) int {
	t.Helper()
	out, err := s.client.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(s.url),
		AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		},
	})
	if err != nil {
		t.Fatalf("queue attributes: %v", err)
	}
	n := 0
	for _, v := range out.Attributes {
		i, _ := strconv.Atoi(v)
		n += i
	}
	return n
}

// immediately is a backoff that brings a failed message back at once.
func immediately(int) time.Duration { return 0 }

func TestAlwaysFailingMessageEndsInTheDLQWithItsReason(t *testing.T) {
	t.Parallel()
	e, src, q := newEnv(t), newSource(t), newDLQ(t)
	var runs atomic.Int32
	h := lambdaidem.SQS(e.store, func(context.Context, events.SQSMessage) error {
		runs.Add(1)
		return errors.New("payments API: 503")
	}, e.opts(lambdaidem.WithMaxAttempts(3), lambdaidem.WithDeadLetterSink(q.sink()),
		lambdaidem.WithVisibility(sqsqueue.NewVisibilityChanger(src.client)), lambdaidem.WithBackoff(immediately))...)
	src.send(t, "order-1")
	for round := 0; round < 6 && src.left(t) > 0; round++ {
		if src.deliver(t, h) == 0 {
			t.Fatalf("round %d: the failed message did not come back; the library's visibility change did not reach SQS", round)
		}
	}
	if n := src.left(t); n != 0 {
		t.Fatalf("source queue still holds %d messages", n)
	}
	if runs.Load() != 3 {
		t.Fatalf("handler ran %d times, want the maximum 3", runs.Load())
	}
	msgs := q.receiveAll(t)
	if len(msgs) != 1 {
		t.Fatalf("DLQ holds %d messages, want 1", len(msgs))
	}
	dl, err := sqsqueue.Parse(msgs[0])
	if err != nil {
		t.Fatal(err)
	}
	m := dl.Metadata
	if m.Reason != lambdaidem.ReasonMaxAttempts || m.Attempts != 3 || !strings.Contains(m.Error, "503") ||
		m.SourceARN != src.arn || m.MessageID == "" || m.Key != "order-1" || m.Namespace != e.ns ||
		m.FirstAttemptAt.IsZero() || m.LastAttemptAt.IsZero() || dl.Body != "order-1" {
		t.Fatalf("dead letter metadata %+v body %q", m, dl.Body)
	}
	if r := e.record(t, "order-1"); r.Status != lambdaidem.StatusDeadLettered || r.DeadLetteredMessageID != m.MessageID {
		t.Fatalf("record %s (dead-lettered message %q)", r.Status, r.DeadLetteredMessageID)
	}
}

func TestRetryAfterChangesVisibilityOnSQS(t *testing.T) {
	t.Parallel()
	e, src := newEnv(t), newSource(t)
	var runs atomic.Int32
	h := lambdaidem.SQS(e.store, func(context.Context, events.SQSMessage) error {
		if runs.Add(1) == 1 {
			return lambdaidem.RetryAfter(0, errors.New("rate limited"))
		}
		return nil
	}, e.opts(lambdaidem.WithVisibility(sqsqueue.NewVisibilityChanger(src.client)))...)
	src.send(t, "order-2")
	src.deliver(t, h)
	// The queue would hide the message for 60 s; RetryAfter(0) brings it
	// back now.
	if src.deliver(t, h) != 1 {
		t.Fatal("the message did not come back after RetryAfter")
	}
	if runs.Load() != 2 || src.left(t) != 0 {
		t.Fatalf("runs %d, left %d", runs.Load(), src.left(t))
	}
}

func TestDLQOutageKeepsTheMessageThenDeadLettersIt(t *testing.T) {
	t.Parallel()
	e, src, q := newEnv(t), newSource(t), newDLQ(t)
	gone := newDLQ(t)
	if _, err := gone.client.DeleteQueue(t.Context(), &sqs.DeleteQueueInput{QueueUrl: aws.String(gone.url)}); err != nil {
		t.Fatal(err)
	}
	poison := func(context.Context, events.SQSMessage) error {
		return lambdaidem.Poison(errors.New("unknown currency"))
	}
	vis := lambdaidem.WithVisibility(sqsqueue.NewVisibilityChanger(src.client))
	var rep reports
	broken := lambdaidem.SQS(e.store, poison, e.opts(lambdaidem.WithDeadLetterSink(gone.sink()), vis, lambdaidem.WithBackoff(immediately), rep.hook())...)
	src.send(t, "order-3")
	src.deliver(t, broken)
	if got := rep.all(); len(got) != 1 || got[0].Outcome != lambdaidem.OutcomeDeadLetterFailed || !errors.Is(got[0].Err, sqsqueue.ErrQueueNotFound) {
		t.Fatalf("reports %+v, want dead_letter_failed with ErrQueueNotFound", got)
	}
	if src.left(t) != 1 {
		t.Fatal("the message left the source queue although the DLQ send failed")
	}
	if r := e.record(t, "order-3"); r.Status == lambdaidem.StatusDeadLettered {
		t.Fatal("record marked DEAD_LETTERED although the send failed")
	}
	// The DLQ is back: the next delivery dead-letters it.
	fixed := lambdaidem.SQS(e.store, poison, e.opts(lambdaidem.WithDeadLetterSink(q.sink()), vis)...)
	if src.deliver(t, fixed) != 1 {
		t.Fatal("the kept message did not come back")
	}
	if src.left(t) != 0 || len(q.receiveAll(t)) != 1 {
		t.Fatal("the message was not moved to the working DLQ")
	}
	if r := e.record(t, "order-3"); r.Status != lambdaidem.StatusDeadLettered {
		t.Fatalf("record %s, want DEAD_LETTERED", r.Status)
	}
}

func TestRedriveMovesBackAndRunsOnce(t *testing.T) {
	t.Parallel()
	e, src, q := newEnv(t), newSource(t), newDLQ(t)
	var fixed atomic.Bool
	var runs atomic.Int32
	h := lambdaidem.SQS(e.store, func(context.Context, events.SQSMessage) error {
		if !fixed.Load() {
			return lambdaidem.Poison(errors.New("bug #12"))
		}
		runs.Add(1)
		return nil
	}, e.opts(lambdaidem.WithDeadLetterSink(q.sink()))...)
	src.send(t, "order-4")
	src.deliver(t, h)
	if r := e.record(t, "order-4"); r.Status != lambdaidem.StatusDeadLettered {
		t.Fatalf("record %s, want DEAD_LETTERED before the redrive", r.Status)
	}
	fixed.Store(true) // the cause is fixed; send it back
	sum, err := sqsqueue.Redrive(t.Context(), sqsqueue.RedriveOptions{
		Client: q.client, DeadLetterQueueURL: q.url, WaitTime: -1,
		SourceQueues: []string{src.arn}, Resetter: e.store, Now: e.clock.Now,
	})
	if err != nil || sum.Moved != 1 {
		t.Fatalf("redrive: %+v, %v", sum, err)
	}
	if src.deliver(t, h) != 1 {
		t.Fatal("the redriven message did not arrive in the source queue")
	}
	// Redriven copies and producer duplicates after that are duplicates.
	src.send(t, "order-4")
	src.deliver(t, h)
	if runs.Load() != 1 || src.left(t) != 0 {
		t.Fatalf("handler ran %d times after the redrive (want 1), %d left", runs.Load(), src.left(t))
	}
	if r := e.record(t, "order-4"); r.Status != lambdaidem.StatusCompleted {
		t.Fatalf("record %s, want COMPLETED", r.Status)
	}
}
