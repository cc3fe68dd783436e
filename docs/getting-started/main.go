// Command orders-fn is an SQS-triggered Lambda function that processes each
// order once in effect: lambdaidem's DynamoDB store remembers the order
// IDs it has seen, and a message that can never be processed goes to a
// dead-letter queue with its reason.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"log"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/emf"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

// order is the message body: {"order_id": "o-1", "amount_cents": 2500}.
type order struct {
	OrderID     string `json:"order_id"`
	AmountCents int64  `json:"amount_cents"`
}

func main() {
	table, dlqURL := os.Getenv("IDEMPOTENCY_TABLE"), os.Getenv("DLQ_URL")
	namespace := os.Getenv("IDEMPOTENCY_NAMESPACE")
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	queues := sqs.NewFromConfig(cfg)
	store := dynamo.New(dynamodb.NewFromConfig(cfg, dynamo.ClientOptions(dynamo.Tuning{})), table)
	lambda.Start(lambdaidem.SQS(store, handle,
		lambdaidem.WithNamespace(namespace),
		lambdaidem.WithKeyJSONField("order_id"),
		lambdaidem.WithDeadLetterSink(sqsqueue.NewSink(queues, dlqURL)),
		lambdaidem.WithVisibility(sqsqueue.NewVisibilityChanger(queues)),
		lambdaidem.WithInvocationHook(emf.Hook()),
	))
}

// handle runs once in effect per order ID. Returning an error retries the
// order; lambdaidem.Poison sends it to the dead-letter queue at once.
func handle(ctx context.Context, msg events.SQSMessage) error {
	var o order
	if err := json.Unmarshal([]byte(msg.Body), &o); err != nil {
		return lambdaidem.Poison(err)
	}
	if o.AmountCents <= 0 {
		return lambdaidem.Poison(errors.New("amount_cents must be positive"))
	}
	slog.InfoContext(ctx, "order accepted", "order_id", o.OrderID, "amount_cents", o.AmountCents)
	return nil
}
