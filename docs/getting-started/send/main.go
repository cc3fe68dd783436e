// Command send puts orders on the queue named by QUEUE_URL, one message
// per argument, each keyed by its order ID:
//
//	go run ./send '{"order_id":"o-1","amount_cents":2500}'
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdaidem/go-lambdaidem/producer"
)

func main() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	p := producer.New(sqs.NewFromConfig(cfg), os.Getenv("QUEUE_URL"))
	for _, body := range os.Args[1:] {
		var o struct {
			OrderID string `json:"order_id"`
		}
		if err := json.Unmarshal([]byte(body), &o); err != nil {
			log.Fatalf("%s: %v", body, err)
		}
		sent, err := p.Send(ctx, producer.Message{Key: o.OrderID, Body: body})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("sent", o.OrderID, "as message", sent.MessageID)
	}
}
