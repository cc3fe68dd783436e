// Command completionwrite commits its effect, a row of EFFECTS_TABLE, in
// the same DynamoDB transaction as the record's completion: both happen or
// neither.
package main

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

func handle(ctx context.Context, msg events.SQSMessage) error {
	return lambdaidem.AddCompletionWrite(ctx, types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(os.Getenv("EFFECTS_TABLE")),
		Item: map[string]types.AttributeValue{
			"pk":   &types.AttributeValueMemberS{Value: "entry#" + msg.MessageId},
			"body": &types.AttributeValueMemberS{Value: msg.Body},
		},
	}})
}

func main() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	store := dynamo.New(dynamodb.NewFromConfig(cfg, dynamo.ClientOptions(dynamo.Tuning{})), os.Getenv("IDEMPOTENCY_TABLE"))
	// Declared, the writes are checked when the handler is built: a store
	// that cannot commit them is refused at start, not message by message.
	lambda.Start(lambdaidem.SQS(store, handle, lambdaidem.WithNamespace("ledger"),
		lambdaidem.WithCompletionWrites[types.TransactWriteItem]()))
}
