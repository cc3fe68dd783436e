// Command effectkey sends one welcome email per signup through an email
// API that deduplicates by the Idempotency-Key header. The key is
// lambdaidem.EffectKey, the same for every attempt at the signup, so a
// retry is recognised by the API too; an answer that never came is left
// for a person instead of being retried.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

func handle(ctx context.Context, msg events.SQSMessage) error {
	key, ok := lambdaidem.EffectKey(ctx)
	if !ok {
		return errors.New("no effect key: run under the decorator, in lease mode")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, os.Getenv("EMAIL_API_URL"), strings.NewReader(msg.Body))
	if err != nil {
		return lambdaidem.NotApplied(err) // nothing was sent
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		// A timeout or a reset connection: the email may have gone out.
		return lambdaidem.OutcomeUnknown(err)
	}
	defer resp.Body.Close()
	switch s := resp.StatusCode; {
	case s < 300:
		return nil
	case s == http.StatusConflict, s == http.StatusTooManyRequests:
		// Refused for now (the same key in progress, a rate limit): not sent.
		return lambdaidem.RetryAfter(time.Minute, fmt.Errorf("email API: %s", resp.Status))
	case s < 500:
		return lambdaidem.Poison(fmt.Errorf("email API: %s", resp.Status)) // refused for good: not sent
	default:
		// A 502 or 504 may come after the send.
		return lambdaidem.OutcomeUnknown(fmt.Errorf("email API: %s", resp.Status))
	}
}

func main() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	sqsClient := sqs.NewFromConfig(cfg)
	store := dynamo.New(dynamodb.NewFromConfig(cfg, dynamo.ClientOptions(dynamo.Tuning{})), os.Getenv("IDEMPOTENCY_TABLE"))
	lambda.Start(lambdaidem.SQS(store, handle,
		lambdaidem.WithNamespace("welcome-emails"),
		lambdaidem.WithKeyJSONField("user_id"),
		// Never a second email: an error not declared NotApplied (or
		// RetryAfter) is dead-lettered as outcome_unknown, not retried.
		lambdaidem.WithAtMostOnce(),
		lambdaidem.WithDeadLetterSink(sqsqueue.NewSink(sqsClient, os.Getenv("DLQ_URL"))),
		lambdaidem.WithVisibility(sqsqueue.NewVisibilityChanger(sqsClient)),
	))
}
