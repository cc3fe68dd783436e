package redisstore_test

import (
	"context"
	"crypto/tls"
	"log"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
)

// A function in a VPC next to ElastiCache Serverless or MemoryDB: a
// cluster client over TLS, with short timeouts so an unreachable store
// fails the batch quickly (SQS then redelivers) instead of eating the
// function's time.
func ExampleNew() {
	client := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:        []string{"idempotency-abc123.serverless.use1.cache.amazonaws.com:6379"},
		TLSConfig:    &tls.Config{MinVersion: tls.VersionTLS12}, // in-transit encryption, which Serverless requires
		DialTimeout:  time.Second,
		ReadTimeout:  500 * time.Millisecond,
		WriteTimeout: 500 * time.Millisecond,
	})
	store := redisstore.New(client, "")
	if err := store.LoadScripts(context.Background()); err != nil {
		log.Print(err) // not fatal: the first call of each script loads it
	}
	lambda.Start(lambdaidem.SQS(store, func(ctx context.Context, msg events.SQSMessage) error {
		return nil // the handler's work
	}, lambdaidem.WithNamespace("orders")))
}
