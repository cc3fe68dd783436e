// Command fencing uses the lease's fencing number in its own conditional
// write, so a stale holder's late write is refused downstream too.
package main

import (
	"context"
	"errors"
	"log"
	"os"
	"strconv"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

var db *dynamodb.Client

func handle(ctx context.Context, msg events.SQSMessage) error {
	l, ok := lambdaidem.LeaseFromContext(ctx)
	if !ok {
		return errors.New("not running under the decorator")
	}
	_, err := db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(os.Getenv("EFFECTS_TABLE")),
		Item: map[string]types.AttributeValue{
			"pk":          &types.AttributeValueMemberS{Value: "account#" + msg.MessageId},
			"fence_gen":   &types.AttributeValueMemberS{Value: l.Fence.Generation},
			"fence_claim": &types.AttributeValueMemberN{Value: strconv.FormatInt(l.Fence.Claim, 10)},
		},
		ConditionExpression: aws.String("attribute_not_exists(pk) OR fence_gen <> :g OR fence_claim < :c"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":g": &types.AttributeValueMemberS{Value: l.Fence.Generation},
			":c": &types.AttributeValueMemberN{Value: strconv.FormatInt(l.Fence.Claim, 10)},
		},
	})
	return err
}

func main() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	db = dynamodb.NewFromConfig(cfg, dynamo.ClientOptions(dynamo.Tuning{}))
	store := dynamo.New(db, os.Getenv("IDEMPOTENCY_TABLE"))
	lambda.Start(lambdaidem.SQS(store, handle, lambdaidem.WithNamespace("accounts")))
}
