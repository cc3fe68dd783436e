package lambdaidem_test

import (
	"context"
	"log"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// A handler whose effect is a DynamoDB write adds it to the completion:
// the ledger row and the record's COMPLETED mark commit in one
// TransactWriteItems, so a crash can never leave one without the other
// and the row is written exactly once. The condition makes a second row
// for the same order impossible even outside the decorator. Only the
// DynamoDB store commits completion writes; the others refuse them with
// ErrUnsupportedWrite.
func ExampleAddCompletionWrite() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	client := dynamodb.NewFromConfig(cfg, dynamo.ClientOptions(dynamo.Tuning{}))
	store := dynamo.New(client, os.Getenv("IDEMPOTENCY_TABLE"))

	record := func(ctx context.Context, msg events.SQSMessage) error {
		return lambdaidem.AddCompletionWrite(ctx, types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String(os.Getenv("EFFECTS_TABLE")),
			Item: map[string]types.AttributeValue{
				"pk":   &types.AttributeValueMemberS{Value: "payment#" + msg.MessageId},
				"body": &types.AttributeValueMemberS{Value: msg.Body},
			},
			ConditionExpression: aws.String("attribute_not_exists(pk)"),
		}})
	}
	lambda.Start(lambdaidem.SQS(store, record, lambdaidem.WithNamespace("payments")))
}
