package dynamotest_test

import (
	"context"
	"fmt"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/dynamo/dynamotest"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
)

// A transactional handler on the in-memory store: the ledger entry commits
// with the completion, and a redelivery of the message is a duplicate.
func Example() {
	db := dynamotest.New(dynamotest.Table{Name: "ledger", HashKey: "order"})
	store := memstore.New(memstore.WithCompletionWrites(db))
	handler := func(ctx context.Context, msg events.SQSMessage) error {
		return lambdaidem.AddCompletionWrite(ctx, types.TransactWriteItem{Put: &types.Put{
			TableName:                aws.String("ledger"),
			Item:                     map[string]types.AttributeValue{"order": &types.AttributeValueMemberS{Value: msg.Body}},
			ConditionExpression:      aws.String("attribute_not_exists(#o)"),
			ExpressionAttributeNames: map[string]string{"#o": "order"},
		}})
	}
	h := lambdaidem.SQS(store, handler, lambdaidem.WithKeyFunc(func(m events.SQSMessage) (string, error) { return m.Body, nil }))
	msg := events.SQSMessage{MessageId: "m-1", Body: "o-1", EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:orders"}
	for range 2 {
		if _, err := h(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg}}); err != nil {
			fmt.Println(err)
		}
	}
	fmt.Println(len(db.Items("ledger")), "ledger entry")
	// Output: 1 ledger entry
}
