// Package esm is a small in-process stand-in for Lambda's SQS event source
// mapping, for the examples' tests. It receives from a real queue (the SQS
// emulator), builds the event Lambda would send, calls the handler, and
// settles the batch the way Lambda does with ReportBatchItemFailures: the
// records not listed as failed are deleted, nothing is deleted after a
// function error.
//
// One liberty is taken: failed messages are made visible again at once
// (ChangeMessageVisibility 0) instead of after their visibility timeout,
// so tests run in milliseconds. The real timing is exercised by
// cmd/lambdaidem-local.
//
//	q := esm.NewQueue(t, testenv.SQS(t), "orders", false)
//	q.Send(t, `{"order_id":"o-1"}`, "", "")
//	stats := q.Drain(t, handler, 10)
package esm

import (
	"context"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
)

// Handler is the shape lambdaidem.SQS returns.
type Handler func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)

// InvocationTimeout is the deadline each invocation gets, like a function
// timeout: the library derives its lease from it.
const InvocationTimeout = 20 * time.Second

// maxRounds bounds Drain, so a message that is never settled fails the
// test instead of hanging it.
const maxRounds = 50

// Queue is a queue on the SQS emulator, deleted when the test ends.
type Queue struct {
	Client *sqs.Client
	URL    string
	ARN    string
	Region string
}

// NewQueue creates a uniquely named queue (FIFO when fifo is set).
func NewQueue(t testing.TB, client *sqs.Client, prefix string, fifo bool) Queue {
	t.Helper()
	ctx := context.Background()
	name := testenv.Name(prefix)
	attrs := map[string]string{"VisibilityTimeout": "30"}
	if fifo {
		name += ".fifo"
		attrs["FifoQueue"] = "true"
	}
	out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatalf("create queue %s: %v", name, err)
	}
	q := Queue{Client: client, URL: aws.ToString(out.QueueUrl), Region: client.Options().Region}
	t.Cleanup(func() {
		_, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(q.URL)})
	})
	got, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(q.URL), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		t.Fatalf("queue ARN of %s: %v", name, err)
	}
	q.ARN = got.Attributes[string(types.QueueAttributeNameQueueArn)]
	return q
}

// Send sends body; group and dedup are set on FIFO queues only when
// non-empty. It returns the message ID.
func (q Queue) Send(t testing.TB, body, group, dedup string) string {
	t.Helper()
	in := &sqs.SendMessageInput{QueueUrl: aws.String(q.URL), MessageBody: aws.String(body)}
	if group != "" {
		in.MessageGroupId = aws.String(group)
	}
	if dedup != "" {
		in.MessageDeduplicationId = aws.String(dedup)
	}
	out, err := q.Client.SendMessage(context.Background(), in)
	if err != nil {
		t.Fatalf("send to %s: %v", q.URL, err)
	}
	return aws.ToString(out.MessageId)
}

// ReceiveRaw receives up to n visible messages with all their attributes,
// waiting up to wait seconds for the first.
func (q Queue) ReceiveRaw(t testing.TB, n int, wait int32) []types.Message {
	t.Helper()
	out, err := q.Client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(q.URL),
		MaxNumberOfMessages:         int32(n),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
		VisibilityTimeout:           30,
		WaitTimeSeconds:             wait,
	})
	if err != nil {
		t.Fatalf("receive from %s: %v", q.URL, err)
	}
	return out.Messages
}

// Collect receives until it holds want messages, then long-polls once more
// to catch extras, and returns them all. A message sent a moment ago may
// not be visible to the emulator's first receive, so it polls, up to
// testenv.Patience for messages that never come.
func (q Queue) Collect(t testing.TB, want int) []types.Message {
	t.Helper()
	var got []types.Message
	deadline := time.Now().Add(testenv.Patience)
	for len(got) < want && time.Now().Before(deadline) {
		got = append(got, q.ReceiveRaw(t, 10, 1)...)
	}
	return append(got, q.ReceiveRaw(t, 10, 1)...)
}

// Receive receives up to n messages as the event Lambda would build,
// waiting up to wait seconds for the first.
func (q Queue) Receive(t testing.TB, n int, wait int32) events.SQSEvent {
	t.Helper()
	var ev events.SQSEvent
	for _, m := range q.ReceiveRaw(t, n, wait) {
		rec := events.SQSMessage{
			MessageId:              aws.ToString(m.MessageId),
			ReceiptHandle:          aws.ToString(m.ReceiptHandle),
			Body:                   aws.ToString(m.Body),
			Md5OfBody:              aws.ToString(m.MD5OfBody),
			Md5OfMessageAttributes: aws.ToString(m.MD5OfMessageAttributes),
			Attributes:             maps.Clone(m.Attributes),
			MessageAttributes:      map[string]events.SQSMessageAttribute{},
			EventSource:            "aws:sqs",
			EventSourceARN:         q.ARN,
			AWSRegion:              q.Region,
		}
		for k, v := range m.MessageAttributes {
			rec.MessageAttributes[k] = events.SQSMessageAttribute{
				DataType: aws.ToString(v.DataType), StringValue: v.StringValue, BinaryValue: v.BinaryValue,
			}
		}
		ev.Records = append(ev.Records, rec)
	}
	return ev
}

// Stats counts what Drain did.
type Stats struct {
	Invocations int
	// Deleted counts records deleted after an invocation.
	Deleted int
	// Failed counts records that came back (reported failed, or their
	// invocation returned an error).
	Failed int
	// Errors counts invocations that returned an error.
	Errors int
}

// Invoke runs one invocation on ev and settles it. It returns the
// handler's response and error.
func (q Queue) Invoke(t testing.TB, h Handler, ev events.SQSEvent, st *Stats) (events.SQSEventResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), InvocationTimeout)
	defer cancel()
	resp, err := h(ctx, ev)
	st.Invocations++
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	if err != nil {
		// A function error fails the whole batch, whatever it reported.
		st.Errors++
		for _, r := range ev.Records {
			failed[r.MessageId] = true
		}
	}
	for _, r := range ev.Records {
		if failed[r.MessageId] {
			st.Failed++
			q.makeVisible(t, r.ReceiptHandle)
			continue
		}
		st.Deleted++
		if _, derr := q.Client.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{
			QueueUrl: aws.String(q.URL), ReceiptHandle: aws.String(r.ReceiptHandle),
		}); derr != nil {
			t.Fatalf("delete %s: %v", r.MessageId, derr)
		}
	}
	return resp, err
}

// makeVisible stands in for the visibility timeout running out.
func (q Queue) makeVisible(t testing.TB, receipt string) {
	t.Helper()
	_, err := q.Client.ChangeMessageVisibility(context.Background(), &sqs.ChangeMessageVisibilityInput{
		QueueUrl: aws.String(q.URL), ReceiptHandle: aws.String(receipt), VisibilityTimeout: 0,
	})
	if err != nil {
		t.Fatalf("make message visible: %v", err)
	}
}

// ReceiveSome is Receive for a test that has just sent messages: an
// emulator may answer a receive empty although they are there, so it asks
// again until at least one arrives, failing the test after
// testenv.Patience.
func (q Queue) ReceiveSome(t testing.TB, n int) events.SQSEvent {
	t.Helper()
	deadline := time.Now().Add(testenv.Patience)
	for {
		ev := q.Receive(t, n, 1)
		if len(ev.Records) > 0 {
			return ev
		}
		if time.Now().After(deadline) {
			t.Fatalf("no message arrived in %s within %s", q.URL, testenv.Patience)
		}
	}
}

// Drain invokes h on batches of up to batchSize until the queue is empty,
// and fails the test if it is not empty after maxRounds invocations.
func (q Queue) Drain(t testing.TB, h Handler, batchSize int) Stats {
	t.Helper()
	var st Stats
	var wait int32
	for range maxRounds {
		ev := q.Receive(t, batchSize, wait)
		if len(ev.Records) == 0 {
			if q.Count(t) == 0 {
				return st
			}
			// Every message was settled, so what is left is visible but
			// was not returned yet: ask again, long-polling.
			wait = 1
			continue
		}
		wait = 0
		_, _ = q.Invoke(t, h, ev, &st)
	}
	t.Fatalf("queue %s not drained after %d invocations: %+v", q.URL, maxRounds, st)
	return st
}

// Count returns the messages in the queue, visible or in flight.
func (q Queue) Count(t testing.TB) int {
	t.Helper()
	out, err := q.Client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(q.URL),
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		},
	})
	if err != nil {
		t.Fatalf("count %s: %v", q.URL, err)
	}
	n := 0
	for _, v := range out.Attributes {
		k, _ := strconv.Atoi(v)
		n += k
	}
	return n
}

// IdempotencyTable creates a store table with TTL off (DynamoDB Local's TTL
// deletes within seconds) and deletes it when the test ends.
func IdempotencyTable(t testing.TB, client *dynamodb.Client) string {
	t.Helper()
	name := testenv.Name("idem")
	if err := dynamo.CreateTable(context.Background(), client, name, dynamo.TableOptions{NoTTL: true}); err != nil {
		t.Fatalf("create idempotency table: %v", err)
	}
	t.Cleanup(func() { deleteTable(client, name) })
	return name
}

// EffectsTable creates an effects table (string partition key "pk", as in
// localstack/resources.json) and deletes it when the test ends.
func EffectsTable(t testing.TB, client *dynamodb.Client) string {
	t.Helper()
	ctx := context.Background()
	name := testenv.Name("effects")
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          dbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []dbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: dbtypes.ScalarAttributeTypeS}},
		KeySchema:            []dbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: dbtypes.KeyTypeHash}},
	})
	if err != nil {
		t.Fatalf("create effects table: %v", err)
	}
	t.Cleanup(func() { deleteTable(client, name) })
	w := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 50*time.Millisecond, 200*time.Millisecond
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, 30*time.Second); err != nil {
		t.Fatalf("effects table %s not active: %v", name, err)
	}
	return name
}

func deleteTable(client *dynamodb.Client, name string) {
	_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
}

// Scan returns every item of a table.
func Scan(t testing.TB, client *dynamodb.Client, table string) []map[string]dbtypes.AttributeValue {
	t.Helper()
	var items []map[string]dbtypes.AttributeValue
	p := dynamodb.NewScanPaginator(client, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("scan %s: %v", table, err)
		}
		items = append(items, page.Items...)
	}
	return items
}

// Str returns a string attribute of an item, "" when absent.
func Str(item map[string]dbtypes.AttributeValue, name string) string {
	if v, ok := item[name].(*dbtypes.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// Num returns a number attribute of an item, -1 when absent.
func Num(item map[string]dbtypes.AttributeValue, name string) int {
	if v, ok := item[name].(*dbtypes.AttributeValueMemberN); ok {
		if n, err := strconv.Atoi(v.Value); err == nil {
			return n
		}
	}
	return -1
}

// SetVisibility sets the queue's visibility timeout, for tests that run a
// function under the real timing (cmd/lambdaidem-local's runner).
func (q Queue) SetVisibility(t testing.TB, seconds int) {
	t.Helper()
	_, err := q.Client.SetQueueAttributes(context.Background(), &sqs.SetQueueAttributesInput{
		QueueUrl:   aws.String(q.URL),
		Attributes: map[string]string{string(types.QueueAttributeNameVisibilityTimeout): strconv.Itoa(seconds)},
	})
	if err != nil {
		t.Fatalf("set visibility of %s: %v", q.URL, err)
	}
}
