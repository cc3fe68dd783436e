package dynamo_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/internal/faultproxy"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// countEffect adds one to the effect item of key: an effect that shows how
// often it was committed, unlike a put that refuses its second time.
func countEffect(table, key string) types.TransactWriteItem {
	return types.TransactWriteItem{Update: &types.Update{
		TableName:                 aws.String(table),
		Key:                       map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: key}},
		UpdateExpression:          aws.String("ADD #n :one"),
		ExpressionAttributeNames:  map[string]string{"#n": "n"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
	}}
}

// effectCount is how often key's effect was committed.
func effectCount(t *testing.T, client *dynamodb.Client, table, key string) int {
	t.Helper()
	out, err := client.GetItem(t.Context(), &dynamodb.GetItemInput{
		TableName:      aws.String(table),
		Key:            map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: key}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	n, ok := out.Item["n"].(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	v, _ := strconv.Atoi(n.Value)
	return v
}

func sqsMsg(id, key string, receive int) events.SQSMessage {
	return events.SQSMessage{
		MessageId: id, Body: `{"id":"` + key + `"}`, EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:orders",
		Attributes: map[string]string{"ApproximateReceiveCount": strconv.Itoa(receive)},
	}
}

var quiet = lambdaidem.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))

// TestOptimisticRequests pins what the optimistic mode sends, as DynamoDB
// sees it through the proxy: a transactional first delivery is one
// TransactWriteItems, a duplicate first delivery one more (refused, the
// record in its cancellation reason), a failure one PutItem.
func TestOptimisticRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, testTuning)
	effects := effectsTable(t, b.direct)
	fail := false
	var rec []lambdaidem.RecordReport
	h := lambdaidem.SQS(b.store, func(ctx context.Context, m events.SQSMessage) error {
		if fail {
			return errors.New("downstream says no")
		}
		return lambdaidem.AddCompletionWrite(ctx, countEffect(effects, m.MessageId))
	}, lambdaidem.WithNamespace(b.ns), lambdaidem.WithKeyJSONField("id"), lambdaidem.WithOptimisticCommit(), quiet,
		lambdaidem.WithInvocationHook(func(r *lambdaidem.InvocationReport) { rec = append(rec, r.Records...) }))
	b.proxy.ResetCounts()

	if _, err := h(t.Context(), events.SQSEvent{Records: []events.SQSMessage{sqsMsg("m1", "a", 1)}}); err != nil {
		t.Fatal(err)
	}
	wantRequests(t, b.proxy, "optimistic first delivery", map[string]int{"TransactWriteItems": 1})
	if _, err := h(t.Context(), events.SQSEvent{Records: []events.SQSMessage{sqsMsg("m2", "a", 1)}}); err != nil {
		t.Fatal(err)
	}
	wantRequests(t, b.proxy, "optimistic duplicate first delivery", map[string]int{"TransactWriteItems": 1})
	if got := rec[len(rec)-1]; got.Outcome != lambdaidem.OutcomeDuplicate || !got.Acked {
		t.Errorf("the duplicate reported %+v", got)
	}
	if n := effectCount(t, b.direct, effects, "m1") + effectCount(t, b.direct, effects, "m2"); n != 1 {
		t.Errorf("effects committed %d times, want 1", n)
	}
	fail = true
	_, _ = h(t.Context(), events.SQSEvent{Records: []events.SQSMessage{sqsMsg("m3", "b", 1)}})
	wantRequests(t, b.proxy, "optimistic failure", map[string]int{"PutItem": 1})
}

// TestOptimisticLostResponse drops the answer of the commit's transaction:
// the SDK's retry carries the same client request token, and DynamoDB
// answers it as the success it was instead of applying it twice.
func TestOptimisticLostResponse(t *testing.T) {
	t.Parallel()
	b := setup(t, testTuning)
	effects := effectsTable(t, b.direct)
	var rec []lambdaidem.RecordReport
	h := lambdaidem.SQS(b.store, func(ctx context.Context, m events.SQSMessage) error {
		return lambdaidem.AddCompletionWrite(ctx, countEffect(effects, "a"))
	}, lambdaidem.WithNamespace(b.ns), lambdaidem.WithKeyJSONField("id"), lambdaidem.WithOptimisticCommit(), quiet,
		lambdaidem.WithInvocationHook(func(r *lambdaidem.InvocationReport) { rec = append(rec, r.Records...) }))
	b.proxy.ResetCounts()
	b.proxy.Inject(faultproxy.Fault{Match: faultproxy.Op("TransactWriteItems"), Action: faultproxy.DropResponse, Times: 1})
	if _, err := h(t.Context(), events.SQSEvent{Records: []events.SQSMessage{sqsMsg("m1", "a", 1)}}); err != nil {
		t.Fatal(err)
	}
	if b.proxy.Applied(faultproxy.DropResponse) != 1 {
		t.Fatal("the commit's answer was not dropped")
	}
	if got := rec[len(rec)-1]; got.Outcome != lambdaidem.OutcomeProcessed || !got.Acked {
		t.Errorf("a commit whose answer was lost reported %+v, want processed", got)
	}
	if n := effectCount(t, b.direct, effects, "a"); n != 1 {
		t.Errorf("the effect was committed %d times, want 1", n)
	}
	if r := b.get(t, "a", 0); r.Attempts != 1 || r.Status != idemstore.StatusCompleted {
		t.Errorf("record %s with %d attempts, want COMPLETED after 1", r.Status, r.Attempts)
	}
}

// TestMixedFleet runs consumers in lease mode and in the optimistic mode
// at once on one table, every message delivered to several of them: each
// key's effect is committed exactly once, whoever commits it.
func TestMixedFleet(t *testing.T) {
	t.Parallel()
	b := setup(t, testTuning)
	effects := effectsTable(t, b.direct)
	handler := func(ctx context.Context, m events.SQSMessage) error {
		return lambdaidem.AddCompletionWrite(ctx, countEffect(effects, m.Body))
	}
	lease := lambdaidem.SQS(b.store, handler, lambdaidem.WithNamespace(b.ns), lambdaidem.WithKeyJSONField("id"), quiet)
	optimistic := lambdaidem.SQS(b.store, handler, lambdaidem.WithNamespace(b.ns), lambdaidem.WithKeyJSONField("id"), quiet, lambdaidem.WithOptimisticCommit())
	const keys, copies = 12, 6
	var wg sync.WaitGroup
	pending := map[string]int{}
	var mu sync.Mutex
	for k := range keys {
		key := fmt.Sprint("k", k)
		for c := range copies {
			h := lease
			if c%2 == 1 {
				h = optimistic
			}
			wg.Go(func() {
				// Each copy is retried until it is acknowledged, as SQS
				// would redeliver it; a redelivery counts as one.
				for receive := 1; ; receive++ {
					resp, err := h(context.Background(), events.SQSEvent{Records: []events.SQSMessage{sqsMsg(fmt.Sprintf("%s-%d", key, c), key, receive)}})
					var be *lambdaidem.BatchError
					if err != nil && !errors.As(err, &be) {
						t.Error(err)
						return
					}
					if len(resp.BatchItemFailures) == 0 {
						return
					}
					mu.Lock()
					pending[key]++
					mu.Unlock()
					if receive > 50 {
						t.Errorf("%s copy %d still not acknowledged after %d deliveries", key, c, receive)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	for k := range keys {
		key := fmt.Sprint("k", k)
		if n := effectCount(t, b.direct, effects, `{"id":"`+key+`"}`); n != 1 {
			t.Errorf("%s: effect committed %d times, want exactly 1", key, n)
		}
	}
	t.Logf("redeliveries (in progress elsewhere, conflicts of transactions): %v", pending)
}
