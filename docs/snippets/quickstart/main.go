// Command quickstart is an SQS-triggered Lambda function made idempotent:
// records keyed by the order ID, outcomes in DynamoDB, poison messages sent
// to a dead-letter queue with their reason.
package main

import (
	"context"
	"log"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

func main() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	sqsClient := sqs.NewFromConfig(cfg)
	store := dynamo.New(dynamodb.NewFromConfig(cfg, dynamo.ClientOptions(dynamo.Tuning{})), os.Getenv("TABLE_NAME"))
	lambda.Start(lambdaidem.SQS(store, handle,
		lambdaidem.WithNamespace("orders"),
		lambdaidem.WithKeyJSONField("order_id"),
		lambdaidem.WithDeadLetterSink(sqsqueue.NewSink(sqsClient, os.Getenv("DLQ_URL"))),
		lambdaidem.WithVisibility(sqsqueue.NewVisibilityChanger(sqsClient)),
	))
}

// handle runs once in effect per order ID.
func handle(ctx context.Context, msg events.SQSMessage) error {
	log.Printf("processing order message %s", msg.MessageId)
	return nil
}
