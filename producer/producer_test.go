package producer_test

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
	"github.com/lambdaidem/go-lambdaidem/producer"
)

// newQueue creates a uniquely named queue on the emulator (FIFO when fifo
// is set) and returns its URL and ARN.
func newQueue(t *testing.T, client *sqs.Client, fifo bool) (url, arn string) {
	t.Helper()
	name := testenv.Name("producer")
	attrs := map[string]string{}
	if fifo {
		name += ".fifo"
		attrs["FifoQueue"] = "true"
	}
	out, err := client.CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatalf("create queue %s: %v", name, err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl})
	})
	qa, err := client.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{
		QueueUrl: out.QueueUrl, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.QueueUrl), qa.Attributes["QueueArn"]
}

// receiveN receives until n messages arrived (long polls: a short poll may
// answer empty while messages are there; testenv.Patience only bounds a
// broken run), then checks with a long poll that the queue has nothing
// more: on a standard queue nothing beyond the copies the SDK's retried
// sends may have added (see testenv.Resends), on a FIFO queue nothing at
// all.
func receiveN(t *testing.T, client *sqs.Client, rs *testenv.Resends, url string, n int) []types.Message {
	t.Helper()
	var got []types.Message
	deadline := time.Now().Add(testenv.Patience)
	for len(got) < n && time.Now().Before(deadline) {
		got = append(got, receive(t, client, url)...)
	}
	if len(got) < n {
		t.Fatalf("received %d messages in %s, want %d", len(got), testenv.Patience, n)
	}
	for more := receive(t, client, url); len(more) > 0; more = receive(t, client, url) {
		got = append(got, more...)
	}
	if extra := len(got) - n; extra > rs.Allowed(url) {
		t.Fatalf("received %d more messages than the %d expected (the SDK retried %d sends)", extra, n, rs.Count())
	}
	return got
}

// receive long-polls for a second: its empty answer means the queue holds
// no visible message.
func receive(t *testing.T, client *sqs.Client, url string) []types.Message {
	t.Helper()
	out, err := client.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(url),
		MaxNumberOfMessages:         10,
		VisibilityTimeout:           300,
		WaitTimeSeconds:             1,
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
	})
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	return out.Messages
}

// toEvent turns a received message into the record Lambda delivers.
func toEvent(m types.Message, arn string) events.SQSMessage {
	ev := events.SQSMessage{
		MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
		Attributes: m.Attributes, EventSource: "aws:sqs", EventSourceARN: arn,
		MessageAttributes: map[string]events.SQSMessageAttribute{},
	}
	for name, a := range m.MessageAttributes {
		ev.MessageAttributes[name] = events.SQSMessageAttribute{DataType: aws.ToString(a.DataType), StringValue: a.StringValue}
	}
	return ev
}

func keyOf(m types.Message) string {
	return aws.ToString(m.MessageAttributes[producer.DefaultKeyAttribute].StringValue)
}

func TestDeduplicationIDFitsSQS(t *testing.T) {
	t.Parallel()
	allowed := regexp.MustCompile(`^[0-9A-Za-z!"#$%&'()*+,\-./:;<=>?@\[\\\]^_` + "`" + `{|}~]{1,128}$`)
	for _, key := range []string{"o-1", strings.Repeat("x", 1000), "ключ with spaces\n", "\x00"} {
		id := producer.DeduplicationID(key)
		if !allowed.MatchString(id) {
			t.Errorf("DeduplicationID(%q) = %q: not a valid MessageDeduplicationId", key, id)
		}
		if id != producer.DeduplicationID(key) {
			t.Errorf("DeduplicationID(%q) is not stable", key)
		}
	}
	if producer.DeduplicationID("a") == producer.DeduplicationID("b") {
		t.Error("different keys share a deduplication ID")
	}
}

func TestInvalidMessagesAreRefusedBeforeSending(t *testing.T) {
	t.Parallel()
	// Nothing may reach the client: it is nil, and would panic.
	std := producer.New(nil, "https://sqs.us-east-1.example/1/orders")
	fifo := producer.New(nil, "https://sqs.us-east-1.example/1/orders.fifo")
	ctx := t.Context()
	cases := []struct {
		name string
		p    *producer.Producer
		m    producer.Message
		want error
	}{
		{"no key", std, producer.Message{Body: "b"}, producer.ErrMissingKey},
		{"reserved attribute", std, producer.Message{Key: "k", Attributes: map[string]types.MessageAttributeValue{
			producer.DefaultKeyAttribute: {DataType: aws.String("String"), StringValue: aws.String("x")}}}, producer.ErrReservedAttribute},
		{"fifo without group", fifo, producer.Message{Key: "k"}, producer.ErrMissingGroup},
		{"fifo with delay", fifo, producer.Message{Key: "k", GroupID: "g", Delay: time.Second}, producer.ErrDelayOnFIFO},
	}
	for _, c := range cases {
		if _, err := c.p.Send(ctx, c.m); !errors.Is(err, c.want) {
			t.Errorf("%s: Send error = %v, want %v", c.name, err, c.want)
		}
	}
	for _, n := range []int{0, producer.MaxBatch + 1} {
		if _, err := std.SendBatch(ctx, make([]producer.Message, n)); !errors.Is(err, producer.ErrBatchSize) {
			t.Errorf("SendBatch of %d: error = %v, want ErrBatchSize", n, err)
		}
	}
}

func TestFIFORetriedSendIsDeduplicatedBySQS(t *testing.T) {
	t.Parallel()
	client, rs := testenv.SQSWithResends(t)
	url, _ := newQueue(t, client, true)
	p := producer.New(client, url)
	m := producer.Message{Key: "order-42", Body: `{"order_id":"42"}`, GroupID: "customer-7"}
	for range 2 { // the producer's retry after a lost response
		if _, err := p.Send(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	got := receiveN(t, client, rs, url, 1)
	if k := keyOf(got[0]); k != "order-42" {
		t.Errorf("key attribute = %q", k)
	}
	if id := got[0].Attributes["MessageDeduplicationId"]; id != producer.DeduplicationID("order-42") {
		t.Errorf("MessageDeduplicationId = %q, want the key's", id)
	}
	if g := got[0].Attributes["MessageGroupId"]; g != "customer-7" {
		t.Errorf("MessageGroupId = %q", g)
	}
}

func TestStandardQueueDuplicateRunsHandlerOnce(t *testing.T) {
	t.Parallel()
	client, rs := testenv.SQSWithResends(t)
	url, arn := newQueue(t, client, false)
	p := producer.New(client, url)
	m := producer.Message{Key: "order-42", Body: `{"order_id":"42"}`}
	for range 2 { // a scheduler firing twice
		if _, err := p.Send(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	got := receiveN(t, client, rs, url, 2) // standard queues do not deduplicate

	var runs atomic.Int32
	handle := lambdaidem.SQS(memstore.New(), func(ctx context.Context, msg events.SQSMessage) error {
		runs.Add(1)
		return nil
	}, lambdaidem.WithKeyAttribute(producer.DefaultKeyAttribute), lambdaidem.WithNamespace("orders"))
	// Once in one batch, and once more in a later one.
	for _, batch := range [][]types.Message{got, got[1:]} {
		ev := events.SQSEvent{}
		for _, m := range batch {
			ev.Records = append(ev.Records, toEvent(m, arn))
		}
		resp, err := handle(t.Context(), ev)
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("handler = %+v, %v; want every record acknowledged", resp, err)
		}
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

func TestSendBatchReportsPerEntry(t *testing.T) {
	t.Parallel()
	client, rs := testenv.SQSWithResends(t)
	url, _ := newQueue(t, client, false)
	p := producer.New(client, url, producer.WithKeyAttribute("op-key"))
	msgs := []producer.Message{
		{Key: "a", Body: "1", Attributes: map[string]types.MessageAttributeValue{"kind": {DataType: aws.String("String"), StringValue: aws.String("x")}}},
		{Body: "no key"},
		{Key: "c", Body: "3", Delay: 0},
	}
	results, err := p.SendBatch(t.Context(), msgs)
	var be *producer.BatchError
	if !errors.As(err, &be) || len(be.Failed) != 1 || be.Failed[0] != 1 || !errors.Is(err, producer.ErrMissingKey) {
		t.Fatalf("SendBatch error = %v, want a BatchError for message 1", err)
	}
	if len(results) != 3 || results[0].MessageID == "" || results[2].MessageID == "" || !errors.Is(results[1].Err, producer.ErrMissingKey) {
		t.Fatalf("results = %+v", results)
	}
	got := receiveN(t, client, rs, url, 2)
	keys := map[string]string{}
	for _, m := range got {
		keys[aws.ToString(m.MessageAttributes["op-key"].StringValue)] = aws.ToString(m.Body)
	}
	if keys["a"] != "1" || keys["c"] != "3" {
		t.Errorf("received keys and bodies %v", keys)
	}
}

func TestSendBatchFIFODeduplicates(t *testing.T) {
	// receiveN reads the group's five messages with one receive.
	testenv.SkipOn(t, testenv.FauxqsOneMessagePerFIFOGroup)
	t.Parallel()
	client, rs := testenv.SQSWithResends(t)
	url, _ := newQueue(t, client, true)
	p := producer.New(client, url)
	var msgs []producer.Message
	for i := range producer.MaxBatch {
		msgs = append(msgs, producer.Message{Key: "k" + strconv.Itoa(i%5), Body: strconv.Itoa(i % 5), GroupID: "g"})
	}
	if _, err := p.SendBatch(t.Context(), msgs); err != nil {
		t.Fatal(err)
	}
	// The whole batch again, as a producer retrying after a timeout would.
	if _, err := p.SendBatch(t.Context(), msgs); err != nil {
		t.Fatal(err)
	}
	got := receiveN(t, client, rs, url, 5)
	for i, m := range got {
		if keyOf(m) != "k"+strconv.Itoa(i) {
			t.Errorf("message %d has key %q: FIFO order lost", i, keyOf(m))
		}
	}
}

func TestSendBatchRequestFailureFailsEveryEntry(t *testing.T) {
	t.Parallel()
	client := testenv.SQS(t)
	p := producer.New(client, testenv.Endpoint(t, testenv.SQSEndpointVar)+"/123456789012/"+testenv.Name("absent"))
	results, err := p.SendBatch(t.Context(), []producer.Message{{Key: "a"}, {Key: "b"}})
	var be *producer.BatchError
	if !errors.As(err, &be) || len(be.Failed) != 2 {
		t.Fatalf("error = %v, want a BatchError for both messages", err)
	}
	for i, r := range results {
		if r.Err == nil || r.MessageID != "" {
			t.Errorf("result %d = %+v, want the request's error", i, r)
		}
	}
	if _, err := p.Send(t.Context(), producer.Message{Key: "a"}); err == nil {
		t.Error("Send to a missing queue succeeded")
	}
}
