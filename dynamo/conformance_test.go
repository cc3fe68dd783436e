package dynamo_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/storetest"
)

// TestConformance runs the suite every Store must pass on DynamoDB Local,
// through an Admin (a Store with the operator calls), so the operator
// cases run too. The subtests share one table: each uses a namespace of
// its own.
func TestConformance(t *testing.T) {
	client, table := newTable(t)
	storetest.Run(t, func(t *testing.T) idemstore.Store {
		return dynamo.NewAdmin(client, table)
	})
}

// TestConformanceCompletionWrites runs the completion-write cases: each
// effect is an item of a second table, put with attribute_not_exists, in
// the completion's transaction.
func TestConformanceCompletionWrites(t *testing.T) {
	client, table := newTable(t)
	_, effects := newTable(t)
	storetest.RunCompletionWrites(t, func(t *testing.T) idemstore.Store {
		return dynamo.New(client, table)
	}, storetest.Effects{
		Insert: func(ns, name, value string) any {
			return types.TransactWriteItem{Put: &types.Put{
				TableName: aws.String(effects),
				Item: map[string]types.AttributeValue{
					"pk":    &types.AttributeValueMemberS{Value: ns + "/" + name},
					"value": &types.AttributeValueMemberS{Value: value},
				},
				ConditionExpression: aws.String("attribute_not_exists(pk)"),
			}}
		},
		Read: func(ctx context.Context, ns, name string) (string, error) {
			out, err := client.GetItem(ctx, &dynamodb.GetItemInput{
				TableName:      aws.String(effects),
				Key:            map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: ns + "/" + name}},
				ConsistentRead: aws.Bool(true),
			})
			if err != nil {
				return "", err
			}
			v, _ := out.Item["value"].(*types.AttributeValueMemberS)
			if v == nil {
				return "", nil
			}
			return v.Value, nil
		},
	})
}
