package lambdaidem_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
)

// A message that can never succeed is dead-lettered at once, with its
// reason, and acknowledged; a plain error is retried: the record is
// reported failed and SQS brings the message back.
func ExamplePoison() {
	handle := func(ctx context.Context, msg events.SQSMessage) error {
		switch msg.Body {
		case "unknown currency":
			return lambdaidem.Poison(errors.New("currency XXX is not supported"))
		case "bank down":
			return errors.New("bank unavailable")
		}
		return nil
	}
	handler := lambdaidem.SQS(memstore.New(), handle,
		lambdaidem.WithDeadLetterSink(printSink{}),
		lambdaidem.WithLogger(slog.New(slog.DiscardHandler))) // the example prints what it needs
	resp, err := handler(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m-1", Body: "ok"},
		{MessageId: "m-2", Body: "unknown currency"},
		{MessageId: "m-3", Body: "bank down"},
	}})
	fmt.Println("failed:", resp.BatchItemFailures, "error:", err)
	// Output:
	// dead-lettered m-2: poison
	// failed: [{m-3}] error: <nil>
}

// RetryAfter records the failure and asks SQS to bring the message back
// after the delay, through the VisibilityChanger (sqsqueue's, in a
// function). A batch whose every record failed also returns an error, so
// the function's error alarm fires.
func ExampleRetryAfter() {
	handle := func(ctx context.Context, msg events.SQSMessage) error {
		return lambdaidem.RetryAfter(30*time.Second, errors.New("rate limited"))
	}
	handler := lambdaidem.SQS(memstore.New(), handle,
		lambdaidem.WithVisibility(printVisibility{}),
		lambdaidem.WithLogger(slog.New(slog.DiscardHandler))) // the example prints what it needs
	resp, err := handler(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m-1", Body: "charge o-1"},
	}})
	fmt.Println("failed:", resp.BatchItemFailures)
	fmt.Println("error:", err)
	// Output:
	// m-1 visible again in 30s
	// failed: [{m-1}]
	// error: lambdaidem: 1 of 1 records failed
}

// printVisibility prints the visibility changes asked of it; in a
// function, sqsqueue.NewVisibilityChanger makes them.
type printVisibility struct{}

func (printVisibility) ChangeVisibility(_ context.Context, msg events.SQSMessage, timeout time.Duration) error {
	fmt.Printf("%s visible again in %s\n", msg.MessageId, timeout)
	return nil
}
