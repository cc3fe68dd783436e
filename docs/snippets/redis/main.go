// Command redis keeps its idempotency records in ElastiCache Serverless
// (Valkey) in cluster mode, over TLS.
package main

import (
	"context"
	"log"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
)

func handle(ctx context.Context, msg events.SQSMessage) error {
	log.Printf("processing %s", msg.MessageId)
	return nil
}

func main() {
	// rediss+cluster://host:port: cluster mode over TLS, as ElastiCache
	// Serverless and MemoryDB speak.
	client, err := redisstore.NewClient(os.Getenv("REDIS_URL"))
	if err != nil {
		log.Fatal(err)
	}
	store := redisstore.New(client, "lambdaidem")
	lambda.Start(lambdaidem.SQS(store, handle, lambdaidem.WithNamespace("orders")))
}
