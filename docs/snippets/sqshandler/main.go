// Command sqshandler shows a handler steering retries: Poison for messages
// that can never succeed, RetryAfter for a dependency that asks to wait,
// any other error for an ordinary retry.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"log"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

type Order struct {
	ID     string `json:"order_id"`
	Amount int64  `json:"amount"`
}

var errRateLimited = errors.New("payment provider: rate limited")

// charge stands for your payment call.
func charge(ctx context.Context, o Order) error { return nil }

func handle(ctx context.Context, msg events.SQSMessage) error {
	var o Order
	if err := json.Unmarshal([]byte(msg.Body), &o); err != nil {
		return lambdaidem.Poison(err) // never retry: dead-letter now
	}
	if err := charge(ctx, o); errors.Is(err, errRateLimited) {
		return lambdaidem.RetryAfter(30*time.Second, err)
	} else if err != nil {
		return err // retried by SQS; dead-lettered after WithMaxAttempts
	}
	return nil
}

func main() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	store := dynamo.New(dynamodb.NewFromConfig(cfg, dynamo.ClientOptions(dynamo.Tuning{})), os.Getenv("TABLE_NAME"))
	lambda.Start(lambdaidem.SQS(store, handle, lambdaidem.WithNamespace("orders")))
}
