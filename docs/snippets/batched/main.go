// Command batched claims each SQS batch's new messages in batched DynamoDB
// requests and completes the successful ones likewise.
package main

import (
	"context"
	"log"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

func handle(ctx context.Context, msg events.SQSMessage) error {
	return nil // your work
}

func main() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	store := dynamo.New(dynamodb.NewFromConfig(cfg, dynamo.ClientOptions(dynamo.Tuning{})), os.Getenv("IDEMPOTENCY_TABLE"))
	lambda.Start(lambdaidem.SQS(store, handle,
		lambdaidem.WithNamespace("orders"),
		lambdaidem.WithKeyJSONField("orderId"),
		lambdaidem.WithBatchedWrites()))
}
