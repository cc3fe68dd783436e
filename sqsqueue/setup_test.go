package sqsqueue

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
)

// bundle is what a service test needs.
type bundle struct {
	ctx    context.Context
	client *sqs.Client
	// resends counts the copies the SDK's retries may have added.
	resends *testenv.Resends
}

func setup(t *testing.T) bundle {
	t.Helper()
	client, rs := testenv.SQSWithResends(t)
	// A bound, not an assertion: a request the emulator never answers
	// fails the test instead of hanging the run.
	return bundle{ctx: testenv.Context(t), client: client, resends: rs}
}

type queue struct {
	url, arn string
}

// newQueue creates a uniquely named queue (FIFO when fifo is set), deleted
// when the test ends.
func (b bundle) newQueue(t *testing.T, prefix string, fifo bool, attrs map[string]string) queue {
	t.Helper()
	name := testenv.Name(prefix)
	all := map[string]string{}
	if fifo {
		name += ".fifo"
		all["FifoQueue"] = "true"
	}
	for k, v := range attrs {
		all[k] = v
	}
	out, err := b.client.CreateQueue(b.ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: all})
	if err != nil {
		t.Fatalf("create queue %s: %v", name, err)
	}
	t.Cleanup(func() {
		_, _ = b.client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl})
	})
	qa, err := b.client.GetQueueAttributes(b.ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: out.QueueUrl, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		t.Fatalf("queue ARN of %s: %v", name, err)
	}
	return queue{url: *out.QueueUrl, arn: qa.Attributes["QueueArn"]}
}

// send puts a message on q; group is used on FIFO queues.
func (b bundle) send(t *testing.T, q queue, body string, attrs map[string]types.MessageAttributeValue, group string) string {
	t.Helper()
	in := &sqs.SendMessageInput{QueueUrl: &q.url, MessageBody: &body, MessageAttributes: attrs}
	if strings.HasSuffix(q.url, ".fifo") {
		in.MessageGroupId = &group
		in.MessageDeduplicationId = ptr(DeduplicationID(body, group))
	}
	out, err := b.client.SendMessage(b.ctx, in)
	if err != nil {
		t.Fatalf("send to %s: %v", q.url, err)
	}
	return *out.MessageId
}

// receive returns up to 10 visible messages, hiding them for visibility
// seconds.
func (b bundle) receive(t *testing.T, url string, visibility int32) []types.Message {
	t.Helper()
	return b.receiveWait(t, url, visibility, 0)
}

// receiveSome is receive for a queue that must hold a message: an empty
// answer does not decide, so it long-polls until one comes, within the
// test's bound.
func (b bundle) receiveSome(t *testing.T, url string, visibility int32) []types.Message {
	t.Helper()
	for b.ctx.Err() == nil {
		if ms := b.receiveWait(t, url, visibility, 1); len(ms) > 0 {
			return ms
		}
	}
	t.Fatalf("no message received from %s: %v", url, b.ctx.Err())
	return nil
}

// receiveWait is receive with a long poll of wait seconds.
func (b bundle) receiveWait(t *testing.T, url string, visibility, wait int32) []types.Message {
	t.Helper()
	out, err := b.client.ReceiveMessage(b.ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    &url,
		MaxNumberOfMessages:         10,
		WaitTimeSeconds:             wait,
		VisibilityTimeout:           visibility,
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
	})
	if err != nil {
		t.Fatalf("receive from %s: %v", url, err)
	}
	return out.Messages
}

// drain receives until the queue answers empty and returns every message,
// all left in flight.
func (b bundle) drain(t *testing.T, url string) []types.Message {
	t.Helper()
	var all []types.Message
	for {
		ms := b.receive(t, url, 300)
		if len(ms) == 0 {
			// A short poll may answer empty while messages remain: only
			// a long poll's empty answer says the queue is drained.
			if ms = b.receiveWait(t, url, 300, 1); len(ms) == 0 {
				return all
			}
		}
		all = append(all, ms...)
	}
}

// drainOnce drains url like drain, then drops the extra copies of a body
// that the SDK's retried sends may have left (at most
// b.resends.Allowed(url) in all, none on a FIFO queue; more fails the
// test): what is left holds each body once.
func (b bundle) drainOnce(t *testing.T, url string) []types.Message {
	t.Helper()
	all := b.drain(t, url)
	allowed := b.resends.Allowed(url)
	seen := map[string]bool{}
	var once []types.Message
	for _, m := range all {
		if body := deref(m.Body); !seen[body] {
			seen[body] = true
			once = append(once, m)
		}
	}
	if extra := len(all) - len(once); extra > allowed {
		t.Fatalf("%s holds %d copies of bodies it already holds, and the SDK retried only %d sends", url, extra, allowed)
	} else if extra > 0 {
		t.Logf("%s holds %d extra copies, from the SDK's %d retried sends", url, extra, allowed)
	}
	return once
}

// toEvent turns a received message into the record Lambda would deliver.
func toEvent(m types.Message, sourceARN string) events.SQSMessage {
	ev := events.SQSMessage{
		MessageId:         deref(m.MessageId),
		ReceiptHandle:     deref(m.ReceiptHandle),
		Body:              deref(m.Body),
		Attributes:        m.Attributes,
		EventSourceARN:    sourceARN,
		EventSource:       "aws:sqs",
		MessageAttributes: map[string]events.SQSMessageAttribute{},
	}
	for name, a := range m.MessageAttributes {
		ev.MessageAttributes[name] = events.SQSMessageAttribute{
			DataType: deref(a.DataType), StringValue: a.StringValue, BinaryValue: a.BinaryValue,
		}
	}
	return ev
}

// consume sends body to src and receives it back as a Lambda record.
func (b bundle) consume(t *testing.T, src queue, body string, attrs map[string]types.MessageAttributeValue, group string) events.SQSMessage {
	t.Helper()
	id := b.send(t, src, body, attrs, group)
	// A short poll may answer empty while the message is there (SQS
	// samples its servers; fauxqs did so for a message just sent):
	// long-poll until it comes, within the test's bound.
	for b.ctx.Err() == nil {
		for _, m := range b.receiveWait(t, src.url, 300, 1) {
			if deref(m.MessageId) == id {
				return toEvent(m, src.arn)
			}
		}
	}
	t.Fatalf("message %s not received from %s", id, src.url)
	return events.SQSMessage{}
}

// typedAttrs returns n attributes of every data type.
func typedAttrs(n int) map[string]types.MessageAttributeValue {
	return toTypes(eventAttrs(n))
}
