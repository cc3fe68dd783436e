// Command welcome-email is an SQS-triggered Lambda function that sends each new
// user one welcome email, once in effect: lambdaidem keeps a record of
// every user_id in DynamoDB, skips the duplicates SQS and producers make, and
// sends what can never succeed to a dead-letter queue with its reason.
// The handler is in handler.go, its tests in handler_test.go.
package main

import (
	"context"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/emf"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

func main() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	queues := sqs.NewFromConfig(cfg)
	store := dynamo.New(dynamodb.NewFromConfig(cfg, dynamo.ClientOptions(dynamo.Tuning{})), env("IDEMPOTENCY_TABLE"))
	lambda.Start(lambdaidem.SQS(store, handle(logMailer{}), append(options(),
		// Set explicitly: the default is the function's name, which
		// CloudFormation changes when it replaces the function.
		lambdaidem.WithNamespace(env("IDEMPOTENCY_NAMESPACE")),
		// What can never succeed goes to DLQ_URL with its reason.
		lambdaidem.WithDeadLetterSink(sqsqueue.NewSink(queues, env("DLQ_URL"))),
		// RetryAfter, the backoff below and a duplicate held back while
		// another invocation works on its key change the message's
		// visibility on the source queue.
		lambdaidem.WithVisibility(sqsqueue.NewVisibilityChanger(queues)),
		// A failed attempt (a 5xx of the provider) comes back after 5 s,
		// 10 s, 20 s ... at most 2 minutes, not after the queue's
		// visibility timeout of 3 minutes.
		lambdaidem.WithBackoff(lambdaidem.ExponentialBackoff(5*time.Second, 2*time.Minute)),
		// The invocation's counts as CloudWatch metrics (Embedded Metric Format).
		lambdaidem.WithInvocationHook(emf.Hook()),
	)...))
}

// env returns a setting from the environment (template.yaml sets them,
// and so does make local); without it the function cannot start.
func env(name string) string {
	v := os.Getenv(name)
	if v == "" {
		log.Fatalf("%s is not set", name)
	}
	return v
}

// logMailer stands in for your mail provider: it logs what it would send.
// Replace it with your provider's client, sending key as its idempotency
// key, and grant the function's role what that client needs.
type logMailer struct{}

func (logMailer) Send(ctx context.Context, key string, e Email) error {
	slog.InfoContext(ctx, "welcome email", "to", e.To, "key", key)
	return nil
}
