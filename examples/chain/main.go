package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

func main() {
	logger := slog.New(lambdacontext.NewLogHandler())
	cfg, err := ConfigFromEnv(os.Getenv)
	if err != nil {
		logger.Error("configuration", slog.Any("error", err))
		os.Exit(1)
	}
	awsCfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		logger.Error("AWS configuration", slog.Any("error", err))
		os.Exit(1)
	}
	store := dynamo.New(dynamodb.NewFromConfig(awsCfg, dynamo.ClientOptions(dynamo.Tuning{})), cfg.IdempotencyTable)
	deps := Deps{SQS: sqs.NewFromConfig(awsCfg), Mailer: &EmailAPI{URL: cfg.EmailAPI, Keyed: cfg.EmailAPIKeyed}, Logger: logger}
	handle, opts := NewMessageHandler(cfg, deps)
	lambda.Start(lambdaidem.SQS(store, handle, opts...))
}
