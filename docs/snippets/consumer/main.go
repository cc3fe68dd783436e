// Command consumer is an SQS-triggered Lambda function whose orders each
// take effect once: records keyed by the order ID in DynamoDB, messages
// that can never succeed sent to a dead-letter queue with their reason,
// metrics as CloudWatch Embedded Metric Format lines.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/emf"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

type Order struct {
	ID     string `json:"order_id"`
	Amount int64  `json:"amount"`
}

var errRateLimited = errors.New("payment provider: rate limited")

// charge stands for your payment call.
func charge(ctx context.Context, o Order) error { return nil }

// handle runs once in effect per order ID.
func handle(ctx context.Context, msg events.SQSMessage) error {
	var o Order
	if err := json.Unmarshal([]byte(msg.Body), &o); err != nil {
		return lambdaidem.Poison(err) // can never succeed: dead-letter it now, with the reason
	}
	if o.Amount <= 0 {
		return lambdaidem.Poison(fmt.Errorf("order %s: amount %d", o.ID, o.Amount))
	}
	switch err := charge(ctx, o); {
	case errors.Is(err, errRateLimited):
		return lambdaidem.RetryAfter(30*time.Second, err) // visible again in 30 s
	case err != nil:
		return err // retried by SQS; dead-lettered after the last attempt
	}
	return nil
}

func main() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	sqsClient := sqs.NewFromConfig(cfg)
	db := dynamodb.NewFromConfig(cfg, dynamo.ClientOptions(dynamo.Tuning{}))
	store := dynamo.New(db, os.Getenv("IDEMPOTENCY_TABLE"))
	lambda.Start(lambdaidem.SQS(store, handle,
		lambdaidem.WithNamespace("orders"),
		lambdaidem.WithKeyJSONField("order_id"),
		lambdaidem.WithMaxAttempts(5), // below the queue's maxReceiveCount
		lambdaidem.WithDeadLetterSink(sqsqueue.NewSink(sqsClient, os.Getenv("DLQ_URL"))),
		lambdaidem.WithVisibility(sqsqueue.NewVisibilityChanger(sqsClient)),
		lambdaidem.WithLogger(slog.New(lambdacontext.NewLogHandler())),
		lambdaidem.WithInvocationHook(emf.Hook(emf.WithIdempotencyNamespace("orders"))),
	))
}
