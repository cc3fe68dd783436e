package lambdaidemtest_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
)

// dynamoTables creates, on DynamoDB Local, an idempotency table and an
// effects table keyed by "entry", both deleted after the test.
func dynamoTables(t *testing.T) (*dynamodb.Client, string, string) {
	t.Helper()
	client := testenv.DynamoDB(t, dynamo.ClientOptions(dynamo.Tuning{AttemptTimeout: 5 * time.Second}))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	records, effects := testenv.Name("kit-records"), testenv.Name("kit-effects")
	if err := dynamo.CreateTable(ctx, client, records, dynamo.TableOptions{NoTTL: true, PollInterval: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(effects), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("entry"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("entry"), KeyType: types.KeyTypeHash}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = 20 * time.Millisecond }).
		Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(effects)}, time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, name := range []string{records, effects} {
			_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		}
	})
	return client, records, effects
}

// ledgerOn is a transactional handler whose effect is a row of a real
// DynamoDB table, "<prefix>#<order>#<attempt>", committed with the
// completion: an attempt whose completion did not commit leaves no row.
func ledgerOn(table, prefix string) lambdaidem.MessageHandler {
	return func(ctx context.Context, msg events.SQSMessage) error {
		lease, _ := lambdaidem.LeaseFromContext(ctx)
		return lambdaidem.AddCompletionWrite(ctx, types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String(table),
			Item: map[string]types.AttributeValue{
				"entry": &types.AttributeValueMemberS{Value: fmt.Sprintf("%s#%s#%d", prefix, msg.Body, lease.Attempt)},
				"order": &types.AttributeValueMemberS{Value: msg.Body},
			},
		}})
	}
}

// entries counts the rows of each order under prefix.
func entries(t *testing.T, client *dynamodb.Client, table, prefix string) (map[string]int, error) {
	out := map[string]int{}
	p := dynamodb.NewScanPaginator(client, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		FilterExpression:          aws.String("begins_with(entry, :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: prefix + "#"}}})
	for p.HasMorePages() {
		page, err := p.NextPage(t.Context())
		if err != nil {
			return nil, err
		}
		for _, it := range page.Items {
			out[it["order"].(*types.AttributeValueMemberS).Value]++
		}
	}
	return out, nil
}

// exactlyOnce holds when every completed order has one row and no order
// has two.
func exactlyOnce(t *testing.T, client *dynamodb.Client, table, prefix string, completed func(string) bool, orders ...string) error {
	n, err := entries(t, client, table, prefix)
	if err != nil {
		return err
	}
	for _, o := range orders {
		if n[o] > 1 || completed(o) && n[o] != 1 {
			return fmt.Errorf("order %s has %d rows: not exactly once (%v)", o, n[o], n)
		}
	}
	return nil
}

var byBody = lambdaidem.WithKeyFunc(func(m events.SQSMessage) (string, error) { return m.Body, nil })

// The kit runs on the DynamoDB store on DynamoDB Local, and the handler's
// effects go to a real table of the test's own, committed in the
// completion's TransactWriteItems.
func TestKitOnDynamoDB(t *testing.T) {
	client, records, effects := dynamoTables(t)
	store := dynamo.New(client, records)
	for i, scenario := range []func(*lambdaidemtest.Kit, string, ...lambdaidemtest.SendOption){
		(*lambdaidemtest.Kit).CrashAfterEffect,
		(*lambdaidemtest.Kit).LeaseLostBeforeCompletion,
		(*lambdaidemtest.Kit).TakeoverFromPaused,
		(*lambdaidemtest.Kit).DeliverTwice,
	} {
		prefix := "kit-" + strconv.Itoa(i)
		k := lambdaidemtest.NewWithStore(store, ledgerOn(effects, prefix), byBody, lambdaidem.WithNamespace(prefix))
		scenario(k, "o-1")
		if err := k.Check(); err != nil {
			t.Errorf("scenario %d: %v", i, err)
		}
		completed := func(key string) bool { return k.Status(key) == lambdaidem.StatusCompleted }
		if err := exactlyOnce(t, client, effects, prefix, completed, "o-1"); err != nil || !completed("o-1") {
			t.Errorf("scenario %d: %v, o-1 %s, outcomes %v", i, err, k.Status("o-1"), k.Outcomes("o-1"))
		}
	}

	orders := []string{"o-1", "o-2", "o-3"}
	scenario := 0
	var kit *lambdaidemtest.Kit
	lambdaidemtest.Explore(t, lambdaidemtest.Exploration{
		Messages: orders, Options: []lambdaidem.Option{byBody}, Scenarios: 15,
		Setup: func() (lambdaidem.MessageHandler, func() error) {
			scenario++
			prefix := fmt.Sprintf("explore-%d", scenario)
			return ledgerOn(effects, prefix), func() error {
				return exactlyOnce(t, client, effects, prefix, func(key string) bool { return kit.Status(key) == lambdaidem.StatusCompleted }, orders...)
			}
		},
		Store:  func() lambdaidem.Store { return store },
		Expect: func(k *lambdaidemtest.Kit) { kit = k },
	})
}

// The kit runs on the Redis store on the local redis-server.
func TestKitOnRedis(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	prefix := "kit-" + rand.Text()[:10]
	t.Cleanup(func() {
		ctx := context.Background()
		iter := client.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			_ = client.Unlink(ctx, iter.Val()).Err()
		}
		_ = client.Close()
	})
	store := redisstore.New(client, prefix)
	var charges []string
	k := lambdaidemtest.NewWithStore(store, careless(&charges), byOrder, lambdaidem.WithNamespace("kit"))
	k.DeliverTwice(`{"order":"o-1"}`)
	k.ProducerDuplicate(`{"order":"o-2"}`)
	if err := k.Check(); err != nil || len(charges) != 2 || k.Status("o-1") != lambdaidem.StatusCompleted {
		t.Errorf("%v: charges %v, o-1 %s", err, charges, k.Status("o-1"))
	}
	lambdaidemtest.Explore(t, lambdaidemtest.Exploration{
		Messages: []string{`{"order":"o-1"}`, `{"order":"o-2"}`}, Options: []lambdaidem.Option{byOrder}, Scenarios: 30,
		Setup: func() (lambdaidem.MessageHandler, func() error) {
			var charges []string
			paid := map[string]bool{}
			return func(_ context.Context, m events.SQSMessage) error {
				if !paid[m.Body] {
					charges = append(charges, m.Body)
					paid[m.Body] = true
				}
				return nil
			}, lambdaidemtest.AtMostOnce(&charges)
		},
		Store: func() lambdaidem.Store { return store },
	})
}
