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
	dbOpts := []func(*dynamodb.Options){dynamo.ClientOptions(dynamo.Tuning{})}
	if os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") != "" {
		// A local DynamoDB (DynamoDB Local answers some errors with a
		// CRC32 header that does not match, and the SDK warns on each);
		// the check guards against corruption in transit, not on loopback.
		dbOpts = append(dbOpts, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	}
	lambda.Start(NewHandler(cfg, Deps{
		DynamoDB: dynamodb.NewFromConfig(awsCfg, dbOpts...),
		SQS:      sqs.NewFromConfig(awsCfg),
		Logger:   logger,
	}))
}
