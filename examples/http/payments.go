package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/httpidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// Environment variables the function reads.
const (
	EnvIdempotencyTable = "IDEMPOTENCY_TABLE"     // required
	EnvEffectsTable     = "EFFECTS_TABLE"         // required: the payments table, where the effect goes; string partition key "id"
	EnvNamespace        = "IDEMPOTENCY_NAMESPACE" // default DefaultNamespace
)

// DefaultNamespace is the namespace of the payment keys: fixed, not the
// function's generated name, which a replacement would change.
const DefaultNamespace = "payments"

// ErrConfig is a missing environment variable.
var ErrConfig = errors.New("payments: invalid configuration")

// Config is the function's configuration.
type Config struct {
	IdempotencyTable string
	PaymentsTable    string
	Namespace        string
}

// ConfigFromEnv reads the configuration through getenv (os.Getenv in
// main). Errors wrap ErrConfig.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		IdempotencyTable: getenv(EnvIdempotencyTable),
		PaymentsTable:    getenv(EnvEffectsTable),
		Namespace:        getenv(EnvNamespace),
	}
	var errs []error
	for name, v := range map[string]string{EnvIdempotencyTable: c.IdempotencyTable, EnvEffectsTable: c.PaymentsTable} {
		if v == "" {
			errs = append(errs, fmt.Errorf("%w: %s is not set", ErrConfig, name))
		}
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	return c, errors.Join(errs...)
}

// PaymentRequest is the request body.
type PaymentRequest struct {
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
}

// Payment is the response body of a created payment.
type Payment struct {
	PaymentID   string `json:"payment_id"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
}

// NewHandler returns the function's handler. opts are passed to
// lambdaidem.Wrap after the example's own, so tests can override them.
func NewHandler(cfg Config, client *dynamodb.Client, logger *slog.Logger, opts ...lambdaidem.Option) httpidem.HTTPHandler {
	if logger == nil {
		logger = slog.Default()
	}
	f := &function{table: cfg.PaymentsTable}
	wrapOpts := append([]lambdaidem.Option{lambdaidem.WithNamespace(cfg.Namespace), lambdaidem.WithLogger(logger)}, opts...)
	// This example's API has no authorizer, so its callers cannot be told
	// apart: they share one key space, and clients must send unguessable
	// keys (UUIDs). Behind an authorizer, drop WithAnonymousCallers and keys
	// are kept per caller.
	return httpidem.HTTP(dynamo.New(client, cfg.IdempotencyTable), f.create,
		httpidem.WithAnonymousCallers(), httpidem.WithWrapOptions(wrapOpts...))
}

type function struct{ table string }

func (f *function) create(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	var in PaymentRequest
	if err := json.Unmarshal([]byte(req.Body), &in); err != nil || in.AmountCents <= 0 || len(in.Currency) != 3 {
		// A 4xx is the request's outcome: httpidem stores it, and a retry
		// with the same key gets the same answer.
		return respond(400, map[string]string{"error": "body must be {\"amount_cents\": positive integer, \"currency\": 3 letters}"})
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	p := Payment{PaymentID: "pay_" + hex.EncodeToString(b[:]), AmountCents: in.AmountCents, Currency: in.Currency}
	// The payment row is committed together with the key's completion: if
	// the function dies before that, neither exists and a retry starts
	// afresh; after it, a retry gets this response.
	err := lambdaidem.AddCompletionWrite(ctx, types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(f.table),
		Item: map[string]types.AttributeValue{
			"id":           &types.AttributeValueMemberS{Value: p.PaymentID},
			"amount_cents": &types.AttributeValueMemberN{Value: strconv.FormatInt(p.AmountCents, 10)},
			"currency":     &types.AttributeValueMemberS{Value: p.Currency},
			"created_at":   &types.AttributeValueMemberS{Value: time.Now().UTC().Format(time.RFC3339Nano)},
		},
		ConditionExpression: aws.String("attribute_not_exists(id)"),
	}})
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	return respond(201, p)
}

func respond(status int, v any) (events.APIGatewayV2HTTPResponse, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	return events.APIGatewayV2HTTPResponse{
		StatusCode: status,
		Headers:    map[string]string{"Content-Type": "application/json"},
		Body:       string(body),
	}, nil
}
