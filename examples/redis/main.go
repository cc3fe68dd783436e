package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdaidem/go-lambdaidem/redisstore"
)

func main() {
	logger := slog.New(lambdacontext.NewLogHandler())
	fail := func(msg string, err error) {
		logger.Error(msg, slog.Any("error", err))
		os.Exit(1)
	}
	cfg, err := ConfigFromEnv(os.Getenv)
	if err != nil {
		fail("configuration", err)
	}
	// Endpoints, region and credentials come from the standard AWS
	// variables (AWS_ENDPOINT_URL_SQS locally).
	awsCfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		fail("AWS configuration", err)
	}
	// Short timeouts (redisstore.NewClient's defaults): an unreachable
	// cache fails the records, which SQS keeps, instead of eating the
	// invocation.
	client, err := redisstore.NewClient(cfg.RedisURL)
	if err != nil {
		fail("Redis client", err)
	}
	if err := redisstore.New(client, "lambdaidem").LoadScripts(context.Background()); err != nil {
		logger.Warn("preloading the store's scripts", slog.Any("error", err))
	}
	lambda.Start(NewHandler(cfg, Deps{Redis: client, SQS: sqs.NewFromConfig(awsCfg), Logger: logger, Metrics: os.Stdout}))
}
