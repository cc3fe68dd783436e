// Command movestores moves a function's records from DynamoDB to Redis
// without running again what DynamoDB remembers: for one retention period,
// a key the old store completed is a duplicate under the new one too.
package main

import (
	"context"
	"errors"
	"log"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
)

const namespace = "orders"

func process(ctx context.Context, msg events.SQSMessage) error {
	log.Printf("processing %s", msg.MessageId)
	return nil
}

func main() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	old := dynamo.New(dynamodb.NewFromConfig(cfg), os.Getenv("IDEMPOTENCY_TABLE"))
	client, err := redisstore.NewClient(os.Getenv("REDIS_URL"))
	if err != nil {
		log.Fatal(err)
	}
	handle := func(ctx context.Context, msg events.SQSMessage) error {
		key, _ := lambdaidem.KeyFromContext(ctx)
		rec, err := old.Get(ctx, idemstore.GetRequest{Namespace: namespace, Key: key, Now: time.Now()})
		switch {
		case err == nil && rec.Status == idemstore.StatusCompleted:
			return nil // done under the old store: a duplicate
		case err != nil && !errors.Is(err, idemstore.ErrNotFound):
			return err // the old store cannot say: SQS keeps the message
		}
		return process(ctx, msg)
	}
	store := redisstore.New(client, "lambdaidem")
	lambda.Start(lambdaidem.SQS(store, handle, lambdaidem.WithNamespace(namespace)))
}
