package producer_test

import (
	"context"
	"errors"
	"log"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdaidem/go-lambdaidem/producer"
)

// A producer that may retry: the key is the order's ID, so a second send
// of the same order is recognised downstream.
func ExampleProducer_Send() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	p := producer.New(sqs.NewFromConfig(cfg), "https://sqs.us-east-1.amazonaws.com/123456789012/orders.fifo")
	if _, err := p.Send(ctx, producer.Message{Key: "order-42", Body: `{"order_id":"42"}`, GroupID: "customer-7"}); err != nil {
		log.Print(err) // safe to send again with the same Message
	}
}

// Sending a batch and retrying only what failed.
func ExampleProducer_SendBatch() {
	var p *producer.Producer // producer.New(...)
	msgs := []producer.Message{{Key: "a", Body: "1"}, {Key: "b", Body: "2"}}
	_, err := p.SendBatch(context.Background(), msgs)
	var be *producer.BatchError
	if errors.As(err, &be) {
		for _, i := range be.Failed {
			_ = msgs[i] // send again, same key
		}
	}
}
