package main

import (
	"context"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
)

// TestStackWithoutDynamoDB checks the stack a Redis store user starts
// (LAMBDAIDEM_DYNAMODB=0 localstack/stack.sh, make stack-up-redis): SQS
// with every queue of resources.json, redis answering, and no DynamoDB
// endpoint for anything to reach by mistake. make test runs it in that
// stack; elsewhere it skips.
func TestStackWithoutDynamoDB(t *testing.T) {
	if os.Getenv("LAMBDAIDEM_DYNAMODB") != "0" {
		t.Skip("runs in the stack without DynamoDB: LAMBDAIDEM_DYNAMODB=0 localstack/stack.sh run -- go test -run TestStackWithoutDynamoDB ./localstack/provision")
	}
	if v := os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"); v != "" {
		t.Errorf("AWS_ENDPOINT_URL_DYNAMODB=%s in the stack without DynamoDB", v)
	}
	addr := os.Getenv("LAMBDAIDEM_REDIS_ADDR")
	if addr == "" {
		t.Fatal("LAMBDAIDEM_REDIS_ADDR is not set: the stack without DynamoDB is for the Redis store")
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("redis at %s: %v", addr, err)
	}
	spec, err := LoadSpec("../resources.json")
	if err != nil {
		t.Fatal(err)
	}
	client := testenv.SQS(t)
	for _, q := range spec.Queues {
		if _, err := client.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String(q.Name)}); err != nil {
			t.Errorf("queue %s (%s) of resources.json: %v", q.LogicalID, q.Name, err)
		}
	}
}
