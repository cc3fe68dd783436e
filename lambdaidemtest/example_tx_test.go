package lambdaidemtest_test

import (
	"context"
	"fmt"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/dynamo/dynamotest"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest"
)

// record adds the order's ledger entry to the completion: the entry and
// the "done" mark commit together.
func record(ctx context.Context, msg events.SQSMessage) error {
	return lambdaidem.AddCompletionWrite(ctx, types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String("ledger"),
		Item: map[string]types.AttributeValue{
			"entry": &types.AttributeValueMemberS{Value: msg.MessageId},
			"body":  &types.AttributeValueMemberS{Value: msg.Body},
		},
	}})
}

// A transactional handler runs on the in-memory store with a dynamotest
// DB: its effect lands once, although the instance died after the handler
// and the next delivery ran it again.
func ExampleNewWithStore() {
	db := dynamotest.New(dynamotest.Table{Name: "ledger", HashKey: "entry"})
	k := lambdaidemtest.NewWithStore(memstore.New(memstore.WithCompletionWrites(db)), record, lambdaidem.WithKeyJSONField("order"))
	k.CrashAfterEffect(`{"order":"o-1"}`)
	fmt.Println("runs:", k.Runs("o-1"), "ledger entries:", len(db.Items("ledger")))
	fmt.Println("check:", k.Check())
	// Output:
	// runs: 2 ledger entries: 1
	// check: <nil>
}

func ExampleKit_LeaseLostBeforeCompletion() {
	db := dynamotest.New(dynamotest.Table{Name: "ledger", HashKey: "entry"})
	k := lambdaidemtest.NewWithStore(memstore.New(memstore.WithCompletionWrites(db)), record, lambdaidem.WithKeyJSONField("order"))
	k.LeaseLostBeforeCompletion(`{"order":"o-1"}`)
	// The paused holder's completion, and the entry with it, was refused.
	fmt.Println("runs:", k.Runs("o-1"), "ledger entries:", len(db.Items("ledger")))
	fmt.Println("outcomes:", k.Outcomes("o-1"))
	// Output:
	// runs: 2 ledger entries: 1
	// outcomes: [processed lease_lost]
}
