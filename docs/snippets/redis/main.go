// Command redis keeps its idempotency records in ElastiCache Serverless
// (Valkey) in cluster mode, over TLS.
package main

import (
	"context"
	"crypto/tls"
	"log"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
)

func handle(ctx context.Context, msg events.SQSMessage) error {
	log.Printf("processing %s", msg.MessageId)
	return nil
}

func main() {
	client := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:     []string{os.Getenv("REDIS_ENDPOINT")},
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12},
	})
	store := redisstore.New(client, "lambdaidem")
	lambda.Start(lambdaidem.SQS(store, handle, lambdaidem.WithNamespace("orders")))
}
