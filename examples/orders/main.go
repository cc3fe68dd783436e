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
)

func main() {
	// Lambda-aware records: requestId on every line, format and level from
	// the function's logging configuration.
	logger := slog.New(lambdacontext.NewLogHandler())
	cfg, err := ConfigFromEnv(os.Getenv)
	if err != nil {
		logger.Error("configuration", slog.Any("error", err))
		os.Exit(1)
	}
	// Endpoints, region and credentials come from the standard AWS
	// variables (AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_SQS locally).
	awsCfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		logger.Error("AWS configuration", slog.Any("error", err))
		os.Exit(1)
	}
	// ClientOptions also skips the response checksum check off AWS
	// (DynamoDB Local's CRC32 does not match some error answers).
	dbOpts := []func(*dynamodb.Options){dynamo.ClientOptions(dynamo.Tuning{AttemptTimeout: cfg.StoreAttemptTimeout})}
	// Tracing is off unless OTEL_TRACES_EXPORTER asks for it.
	tp, err := NewTracerProvider(cfg, os.Stdout)
	if err != nil {
		logger.Error("tracing", slog.Any("error", err))
		os.Exit(1)
	}
	deps := Deps{
		DynamoDB: dynamodb.NewFromConfig(awsCfg, dbOpts...),
		SQS:      sqs.NewFromConfig(awsCfg),
		Logger:   logger,
	}
	if tp != nil { // spans are written as they end: nothing to flush
		deps.TracerProvider = tp
	}
	lambda.Start(NewHandler(cfg, deps))
}
