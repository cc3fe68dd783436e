package lambdaidem_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
)

// A producer that sends an order twice, under two message IDs, has it
// charged once: the key is the order's ID, not SQS's message ID. The
// in-memory store stands in for DynamoDB here; in a function, pass
// dynamo.New(client, table) and hand the result to lambda.Start.
func ExampleSQS() {
	var mu sync.Mutex
	charges := map[string]int{}
	charge := func(ctx context.Context, msg events.SQSMessage) error {
		var order struct {
			ID string `json:"order_id"`
		}
		if err := json.Unmarshal([]byte(msg.Body), &order); err != nil {
			return lambdaidem.Poison(err)
		}
		mu.Lock() // records of a batch run concurrently
		defer mu.Unlock()
		charges[order.ID]++
		return nil
	}
	handler := lambdaidem.SQS(memstore.New(), charge,
		lambdaidem.WithNamespace("orders"),
		lambdaidem.WithKeyJSONField("order_id"),
		lambdaidem.WithInvocationHook(func(r *lambdaidem.InvocationReport) {
			for _, rec := range r.Records {
				fmt.Println(rec.MessageID, rec.Key, rec.Outcome)
			}
		}))

	ctx := context.Background()
	handler(ctx, events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m-1", Body: `{"order_id":"o-1"}`},
		{MessageId: "m-2", Body: `{"order_id":"o-2"}`},
	}})
	// The producer timed out and sent o-1 again: a new message ID.
	resp, err := handler(ctx, events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m-3", Body: `{"order_id":"o-1"}`},
	}})
	fmt.Println("failed:", resp.BatchItemFailures, "error:", err)
	fmt.Println("charges:", charges)
	// Output:
	// m-1 o-1 processed
	// m-2 o-2 processed
	// m-3 o-1 duplicate
	// failed: [] error: <nil>
	// charges: map[o-1:1 o-2:1]
}
