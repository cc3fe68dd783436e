package integration_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/internal/faultproxy"
	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest/testclock"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

// tuning keeps the SDK's backoff short, so a fault the proxy injects on
// every try costs little wall time. The per-attempt timeout is a bound for
// a hang: an attempt DynamoDB Local answers late on a loaded machine would
// otherwise be retried, and the retry changes what a test counts.
var tuning = dynamo.Tuning{AttemptTimeout: 10 * time.Second, MaxBackoff: 20 * time.Millisecond}

// sourceARN is the queue the test messages claim to come from; the
// dead-letter metadata records it.
const sourceARN = "arn:aws:sqs:us-east-1:123456789012:integration-orders"

// clock is a fake clock the decorator, its timers and the store
// conditions follow. The few milliseconds a store write's retry waits pass
// at once.
type clock = testclock.Clock

func newClock() *clock {
	return testclock.New(time.Now().UTC().Truncate(time.Second)).PassShort(200 * time.Millisecond)
}

// env is one test's world: an idempotency table, an effects table, a
// store straight to DynamoDB Local and, for fault tests, one through a
// proxy.
type env struct {
	db      *dynamodb.Client // straight to DynamoDB Local
	table   string           // the idempotency table
	effects string           // the handler's own table, string key "pk"
	store   *dynamo.Store
	clock   *clock
	ns      string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	db := dynamoClient(t)
	e := &env{db: db, table: testenv.Name("lambdaidem-it"), clock: newClock(), ns: "it"}
	// A bound for a hang, not for a slow machine.
	ctx := testenv.Context(t)
	if err := dynamo.CreateTable(ctx, db, e.table, dynamo.TableOptions{NoTTL: true, PollInterval: 20 * time.Millisecond}); err != nil {
		t.Fatalf("create idempotency table: %v", err)
	}
	t.Cleanup(func() { deleteTable(db, e.table) })
	e.effects = e.keyedTable(t, "lambdaidem-it-effects")
	e.store = dynamo.New(db, e.table)
	return e
}

func dynamoClient(t *testing.T, opts ...func(*dynamodb.Options)) *dynamodb.Client {
	t.Helper()
	base := []func(*dynamodb.Options){dynamo.ClientOptions(tuning)}
	return testenv.DynamoDB(t, append(base, opts...)...)
}

// keyedTable creates a table with one string partition key "pk": the
// handler's effects, or a downstream ledger.
func (e *env) keyedTable(t *testing.T, prefix string) string {
	t.Helper()
	name := testenv.Name(prefix)
	_, err := e.db.CreateTable(t.Context(), &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          dbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []dbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: dbtypes.ScalarAttributeTypeS}},
		KeySchema:            []dbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: dbtypes.KeyTypeHash}},
	})
	if err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
	t.Cleanup(func() { deleteTable(e.db, name) })
	return name
}

func deleteTable(db *dynamodb.Client, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
}

// proxied returns a store whose client goes through a fault proxy in front
// of DynamoDB Local, on the same table.
func (e *env) proxied(t *testing.T) (*dynamo.Store, *faultproxy.Proxy) {
	t.Helper()
	p, err := faultproxy.New(testenv.Endpoint(t, testenv.DynamoDBEndpointVar))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	client := dynamoClient(t, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(p.URL()) })
	return dynamo.New(client, e.table), p
}

// opts are the options every test starts from: the body is the key (a
// business key, so copies with other message IDs are duplicates too), the
// fake clock, a one-minute lease (no invocation deadline in tests), a quiet
// logger.
func (e *env) opts(more ...lambdaidem.Option) []lambdaidem.Option {
	return append([]lambdaidem.Option{
		lambdaidem.WithNamespace(e.ns),
		lambdaidem.WithKeyFunc(func(m events.SQSMessage) (string, error) { return m.Body, nil }),
		lambdaidem.WithClock(e.clock),
		lambdaidem.WithLease(time.Minute),
		lambdaidem.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
	}, more...)
}

// wrapOpts are opts for Wrap: no SQS key function, which Wrap refuses.
func (e *env) wrapOpts(more ...lambdaidem.Option) []lambdaidem.Option {
	return append([]lambdaidem.Option{
		lambdaidem.WithNamespace(e.ns),
		lambdaidem.WithClock(e.clock),
		lambdaidem.WithLease(time.Minute),
		lambdaidem.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
	}, more...)
}

// record reads a key's record at the fake clock's time.
func (e *env) record(t *testing.T, key string) idemstore.Record {
	t.Helper()
	r, err := e.store.Get(t.Context(), idemstore.GetRequest{Namespace: e.ns, Key: key, Now: e.clock.Now()})
	if err != nil {
		t.Fatalf("Get(%s): %v", key, err)
	}
	return r
}

// effectWrite is a transactional effect: a new row under a fresh random ID,
// so that an effect applied twice shows as two rows. Its condition can only
// fail on an ID collision, or when the test passes a fixed pk.
func (e *env) effectWrite(t *testing.T, key, by string) dbtypes.TransactWriteItem {
	t.Helper()
	return e.effectWriteAt(key+"#"+randomID(t), key, by)
}

func (e *env) effectWriteAt(pk, key, by string) dbtypes.TransactWriteItem {
	return dbtypes.TransactWriteItem{Put: &dbtypes.Put{
		TableName: aws.String(e.effects),
		Item: map[string]dbtypes.AttributeValue{
			"pk":  &dbtypes.AttributeValueMemberS{Value: pk},
			"key": &dbtypes.AttributeValueMemberS{Value: key},
			"by":  &dbtypes.AttributeValueMemberS{Value: by},
		},
		ConditionExpression:                 aws.String("attribute_not_exists(pk)"),
		ReturnValuesOnConditionCheckFailure: dbtypes.ReturnValuesOnConditionCheckFailureAllOld,
	}}
}

// effectsOf returns the "by" attribute of every effect row of key.
func (e *env) effectsOf(t *testing.T, key string) []string {
	t.Helper()
	var by []string
	for _, it := range scan(t, e.db, e.effects) {
		if str(it, "key") == key {
			by = append(by, str(it, "by"))
		}
	}
	return by
}

func scan(t *testing.T, db *dynamodb.Client, table string) []map[string]dbtypes.AttributeValue {
	t.Helper()
	var items []map[string]dbtypes.AttributeValue
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatalf("scan %s: %v", table, err)
		}
		items = append(items, page.Items...)
	}
	return items
}

func str(item map[string]dbtypes.AttributeValue, name string) string {
	if v, ok := item[name].(*dbtypes.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func num(t *testing.T, item map[string]dbtypes.AttributeValue, name string) int64 {
	t.Helper()
	v, ok := item[name].(*dbtypes.AttributeValueMemberN)
	if !ok {
		t.Fatalf("attribute %s is not a number: %v", name, item[name])
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func randomID(t *testing.T) string {
	t.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// message is an SQS record as Lambda delivers it; receives > 1 marks a
// redelivery of the same message.
func message(id, body string, receives int) events.SQSMessage {
	return events.SQSMessage{
		MessageId:      id,
		Body:           body,
		EventSourceARN: sourceARN,
		Attributes:     map[string]string{"ApproximateReceiveCount": strconv.Itoa(receives)},
	}
}

func batch(msgs ...events.SQSMessage) events.SQSEvent { return events.SQSEvent{Records: msgs} }

// reports collects the decorator's per-record reports.
type reports struct {
	mu   sync.Mutex
	recs []lambdaidem.RecordReport
}

func (r *reports) hook() lambdaidem.Option {
	return lambdaidem.WithInvocationHook(func(rep *lambdaidem.InvocationReport) {
		r.mu.Lock()
		r.recs = append(r.recs, rep.Records...)
		r.mu.Unlock()
	})
}

func (r *reports) all() []lambdaidem.RecordReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]lambdaidem.RecordReport(nil), r.recs...)
}

// counter counts handler runs.
type counter struct {
	mu sync.Mutex
	n  int
}

func (c *counter) inc() {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
}

func (c *counter) get() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// dlq is a real SQS queue for dead letters.
type dlq struct {
	client *sqs.Client
	url    string
}

func newDLQ(t *testing.T) dlq {
	t.Helper()
	client := testenv.SQS(t)
	out, err := client.CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: aws.String(testenv.Name("lambdaidem-it-dlq"))})
	if err != nil {
		t.Fatalf("create DLQ: %v", err)
	}
	q := dlq{client: client, url: aws.ToString(out.QueueUrl)}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(q.url)})
	})
	return q
}

func (q dlq) sink() *sqsqueue.Sink { return sqsqueue.NewSink(q.client, q.url) }

// receiveAll reads every message in the queue: it long-polls until the
// queue reports none left, a wait for an external condition bounded by a
// deadline.
func (q dlq) receiveAll(t *testing.T) []sqstypes.Message {
	t.Helper()
	var out []sqstypes.Message
	seen := map[string]bool{}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := q.client.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{
			QueueUrl:              aws.String(q.url),
			MaxNumberOfMessages:   10,
			WaitTimeSeconds:       1,
			VisibilityTimeout:     60,
			MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			t.Fatalf("receive from DLQ: %v", err)
		}
		for _, m := range resp.Messages {
			if !seen[aws.ToString(m.MessageId)] {
				seen[aws.ToString(m.MessageId)] = true
				out = append(out, m)
			}
		}
		if len(resp.Messages) > 0 {
			continue
		}
		attrs, err := q.client.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{
			QueueUrl:       aws.String(q.url),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages},
		})
		if err != nil {
			t.Fatalf("DLQ attributes: %v", err)
		}
		if attrs.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)] == "0" {
			return out
		}
	}
	t.Fatal("DLQ not read empty within 20s")
	return nil
}
