package main

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// cliTuning suits an operator at a terminal: longer per-attempt timeouts
// than a Lambda function (a 1 MB scan page takes a while), a few more
// retries, still bounded.
var cliTuning = dynamo.Tuning{Concurrency: 2, AttemptTimeout: 15 * time.Second, MaxAttempts: 5, MaxBackoff: time.Second}

// awsConfig loads the SDK configuration. Credentials given in the
// environment passed to run win, so the command does what its environment
// says even when run in-process; otherwise the SDK's default chain applies.
func (a *app) awsConfig(ctx context.Context, c *common) (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	if c.region != "" {
		opts = append(opts, config.WithRegion(c.region))
	}
	if id, secret := a.env("AWS_ACCESS_KEY_ID"), a.env("AWS_SECRET_ACCESS_KEY"); id != "" && secret != "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(id, secret, a.env("AWS_SESSION_TOKEN"))))
	}
	if p := a.env("AWS_PROFILE"); p != "" {
		opts = append(opts, config.WithSharedConfigProfile(p))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return aws.Config{}, usagef("no region: set -region or AWS_REGION")
	}
	return cfg, nil
}

// admin opens the store: the DynamoDB table -table names, or the Redis
// server -store names. Every subcommand works through the store's
// idemstore.Admin calls and nothing else.
func (a *app) admin(ctx context.Context, c *common) (idemstore.Admin, error) {
	if c.isRedis() {
		return a.redisStore(c)
	}
	if err := c.needTable(); err != nil {
		return nil, err
	}
	cfg, err := a.awsConfig(ctx, c)
	if err != nil {
		return nil, err
	}
	client := dynamodb.NewFromConfig(cfg, dynamo.ClientOptions(cliTuning), func(o *dynamodb.Options) {
		if c.endpoint != "" {
			o.BaseEndpoint = aws.String(c.endpoint)
		}
	})
	return dynamo.NewAdmin(client, c.table), nil
}

// sqsClient opens SQS at endpoint (empty: the SDK's default for the
// region).
func (a *app) sqsClient(ctx context.Context, c *common, endpoint string) (*sqs.Client, error) {
	cfg, err := a.awsConfig(ctx, c)
	if err != nil {
		return nil, err
	}
	return sqs.NewFromConfig(cfg, func(o *sqs.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	}), nil
}
