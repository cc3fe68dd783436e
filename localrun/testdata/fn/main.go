// Command fn is the test function for package localrun: a Lambda function
// whose behaviour each record's body chooses.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

func handle(ctx context.Context, ev events.SQSEvent) (any, error) {
	var resp events.SQSEventResponse
	for _, m := range ev.Records {
		fmt.Printf("record %s %s count=%s\n", m.MessageId, m.Body, m.Attributes["ApproximateReceiveCount"])
		switch m.Body {
		case "fail":
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
		case "bad-id":
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: "no-such-message"})
		case "empty-id":
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: ""})
		case "error":
			return nil, errors.New("told to fail")
		case "crash":
			os.Exit(2)
		case "hang":
			time.Sleep(time.Hour) // a sleep, not select{}: the runtime would call that a deadlock
		case "panic":
			panic("told to panic")
		case "echo":
			return ev, nil
		case "env":
			lc, _ := lambdacontext.FromContext(ctx)
			deadline, _ := ctx.Deadline()
			return map[string]string{
				"name":     os.Getenv("AWS_LAMBDA_FUNCTION_NAME"),
				"memory":   os.Getenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE"),
				"version":  os.Getenv("AWS_LAMBDA_FUNCTION_VERSION"),
				"handler":  os.Getenv("_HANDLER"),
				"region":   os.Getenv("AWS_REGION"),
				"custom":   os.Getenv("LOCALRUN_TEST_VALUE"),
				"arn":      lc.InvokedFunctionArn,
				"request":  lc.AwsRequestID,
				"deadline": deadline.UTC().Format(time.RFC3339Nano),
				"trace":    fmt.Sprint(ctx.Value("x-amzn-trace-id")),
			}, nil
		case "barrier":
			// Wait until another invocation is inside the barrier too:
			// proves two invocations run at once, without timing.
			dir := os.Getenv("LOCALRUN_BARRIER_DIR")
			lc, _ := lambdacontext.FromContext(ctx)
			if err := os.WriteFile(filepath.Join(dir, lc.AwsRequestID), nil, 0o600); err != nil {
				return nil, err
			}
			for {
				entries, err := os.ReadDir(dir)
				if err != nil {
					return nil, err
				}
				if len(entries) >= 2 {
					break
				}
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(5 * time.Millisecond):
				}
			}
		}
	}
	return resp, nil
}

func main() {
	lambda.Start(handle)
}
