package dynamo_test

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// The store takes an SDK client, tuned to fail closed quickly.
func ExampleNew() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	client := dynamodb.NewFromConfig(cfg, dynamo.ClientOptions(dynamo.Tuning{Concurrency: lambdaidem.DefaultConcurrency}))
	store := dynamo.New(client, "idempotency")
	lambda.Start(lambdaidem.SQS(store, func(ctx context.Context, msg events.SQSMessage) error {
		return nil // the handler's work
	}, lambdaidem.WithNamespace("orders")))
}

// A handler whose effect is a DynamoDB write commits it with the record's
// completion: both apply, or neither.
func ExampleStore_Complete_transactional() {
	handle := func(ctx context.Context, msg events.SQSMessage) error {
		return lambdaidem.AddCompletionWrite(ctx, types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String("gift-cards"),
			Item: map[string]types.AttributeValue{
				"id":    &types.AttributeValueMemberS{Value: msg.MessageId},
				"cents": &types.AttributeValueMemberN{Value: "2500"},
			},
			ConditionExpression: aws.String("attribute_not_exists(id)"),
		}})
	}
	_ = handle // lambdaidem.SQS(store, handle, ...)
}
