package main

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/httpidem"
	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest"
)

// setup creates the idempotency and payments tables on DynamoDB Local and
// returns the function's handler.
func setup(t *testing.T) (httpidem.HTTPHandler, *dynamodb.Client, string) {
	t.Helper()
	client := testenv.DynamoDB(t, dynamo.ClientOptions(dynamo.Tuning{AttemptTimeout: 10 * time.Second}))
	// A bound for a hang, not for a slow machine.
	ctx := testenv.Context(t)
	cfg := Config{IdempotencyTable: testenv.Name("idem"), PaymentsTable: testenv.Name("payments"), Namespace: DefaultNamespace}
	if err := dynamo.CreateTable(ctx, client, cfg.IdempotencyTable, dynamo.TableOptions{NoTTL: true, PollInterval: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(cfg.PaymentsTable),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := dynamodb.NewTableExistsWaiter(client).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(cfg.PaymentsTable)}, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, table := range []string{cfg.IdempotencyTable, cfg.PaymentsTable} {
			_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
		}
	})
	return NewHandler(cfg, client, nil), client, cfg.PaymentsTable
}

func post(key, body string) events.APIGatewayV2HTTPRequest {
	headers := map[string]string{"Content-Type": "application/json"}
	if key != "" {
		headers["Idempotency-Key"] = key
	}
	return lambdaidemtest.HTTPRequest("POST", "/payments", body, headers)
}

func payments(t *testing.T, client *dynamodb.Client, table string) int32 {
	t.Helper()
	out, err := client.Scan(t.Context(), &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Count
}

func TestRetriedPaymentIsCreatedOnce(t *testing.T) {
	t.Parallel()
	h, client, table := setup(t)
	// Lambda always gives the handler a deadline; recording the outcome may
	// use the time up to it (without one, only a short floor).
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	const body = `{"amount_cents":2500,"currency":"EUR"}`

	first, err := h(ctx, post(`"c0ffee00-0000-4000-8000-000000000001"`, body))
	if err != nil || first.StatusCode != 201 {
		t.Fatalf("first = %+v, %v", first, err)
	}
	second, err := h(ctx, post(`"c0ffee00-0000-4000-8000-000000000001"`, body))
	if err != nil || second.StatusCode != 201 || second.Headers[httpidem.HeaderReplayed] != "true" {
		t.Fatalf("retry = %+v, %v; want the replayed 201", second, err)
	}
	var p1, p2 Payment
	if err := errors.Join(json.Unmarshal([]byte(first.Body), &p1), json.Unmarshal([]byte(second.Body), &p2)); err != nil {
		t.Fatal(err)
	}
	if p1.PaymentID == "" || p1 != p2 {
		t.Errorf("retry answered %+v, first %+v", p2, p1)
	}
	if n := payments(t, client, table); n != 1 {
		t.Errorf("%d payment rows, want 1", n)
	}

	// Another key is another payment; the same key with another amount
	// is refused.
	if resp, err := h(ctx, post(`"c0ffee00-0000-4000-8000-000000000002"`, body)); err != nil || resp.StatusCode != 201 {
		t.Fatalf("second payment = %+v, %v", resp, err)
	}
	if resp, err := h(ctx, post(`"c0ffee00-0000-4000-8000-000000000001"`, `{"amount_cents":9900,"currency":"EUR"}`)); err != nil || resp.StatusCode != 422 {
		t.Fatalf("reused key = %+v, %v; want 422", resp, err)
	}
	if n := payments(t, client, table); n != 2 {
		t.Errorf("%d payment rows, want 2", n)
	}
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	h, client, table := setup(t)
	// Lambda always gives the handler a deadline; recording the outcome may
	// use the time up to it (without one, only a short floor).
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if resp, err := h(ctx, post("", `{"amount_cents":1,"currency":"EUR"}`)); err != nil || resp.StatusCode != 400 {
		t.Fatalf("no key = %+v, %v; want 400", resp, err)
	}
	for range 2 {
		resp, err := h(ctx, post("k-bad", `{"amount_cents":-1}`))
		if err != nil || resp.StatusCode != 400 {
			t.Fatalf("bad body = %+v, %v; want 400", resp, err)
		}
	}
	if n := payments(t, client, table); n != 0 {
		t.Errorf("%d payment rows, want 0", n)
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	if _, err := ConfigFromEnv(func(string) string { return "" }); !errors.Is(err, ErrConfig) {
		t.Errorf("empty environment: error = %v, want ErrConfig", err)
	}
	env := map[string]string{EnvIdempotencyTable: "i", EnvEffectsTable: "p"}
	c, err := ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil || c != (Config{IdempotencyTable: "i", PaymentsTable: "p", Namespace: DefaultNamespace}) {
		t.Errorf("ConfigFromEnv = %+v, %v", c, err)
	}
}
