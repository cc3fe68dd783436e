package main

import (
	"context"
	"crypto/tls"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

func main() {
	logger := slog.New(lambdacontext.NewLogHandler())
	fail := func(msg string, err error) {
		logger.Error(msg, slog.Any("error", err))
		os.Exit(1)
	}
	endpoint, dlq := os.Getenv("REDIS_ENDPOINT"), os.Getenv("DLQ_URL")
	if endpoint == "" || dlq == "" {
		fail("configuration", errMissing)
	}
	awsCfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		fail("AWS configuration", err)
	}
	// Cluster mode and TLS, as ElastiCache Serverless and MemoryDB speak;
	// short timeouts so an unreachable cache fails the records (SQS keeps
	// them) instead of eating the invocation.
	client := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:        []string{endpoint},
		TLSConfig:    &tls.Config{MinVersion: tls.VersionTLS12},
		DialTimeout:  time.Second,
		ReadTimeout:  500 * time.Millisecond,
		WriteTimeout: 500 * time.Millisecond,
	})
	store := redisstore.New(client, redisstore.Options{})
	if err := store.LoadScripts(context.Background()); err != nil {
		logger.Warn("preloading the store's scripts", slog.Any("error", err))
	}
	sqsClient := sqs.NewFromConfig(awsCfg)
	lambda.Start(lambdaidem.SQS(store, handle(logger),
		lambdaidem.WithLogger(logger),
		lambdaidem.WithDeadLetterSink(sqsqueue.NewSink(sqsClient, dlq)),
		lambdaidem.WithVisibility(sqsqueue.NewVisibilityChanger(sqsClient)),
	))
}

type configError string

func (e configError) Error() string { return string(e) }

const errMissing = configError("REDIS_ENDPOINT and DLQ_URL must be set")

// handle is the function's work: here it only logs the order.
func handle(logger *slog.Logger) func(context.Context, events.SQSMessage) error {
	return func(ctx context.Context, msg events.SQSMessage) error {
		logger.InfoContext(ctx, "order", slog.String("message_id", msg.MessageId), slog.Int("bytes", len(msg.Body)))
		return nil
	}
}
