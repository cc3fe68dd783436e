package sqsqueue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

// emptyDLQ is an SQS client whose dead-letter queue holds nothing.
type emptyDLQ struct{ receives int }

func (c *emptyDLQ) ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	c.receives++
	return &sqs.ReceiveMessageOutput{}, nil
}
func (c *emptyDLQ) SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	return nil, errors.New("unexpected send")
}
func (c *emptyDLQ) DeleteMessage(context.Context, *sqs.DeleteMessageInput, ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	return nil, errors.New("unexpected delete")
}
func (c *emptyDLQ) ChangeMessageVisibility(context.Context, *sqs.ChangeMessageVisibilityInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}
func (c *emptyDLQ) GetQueueUrl(context.Context, *sqs.GetQueueUrlInput, ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	return nil, errors.New("unexpected GetQueueUrl")
}

// A Wrap key marked outcome_unknown has no dead-letter copy; Resolve's
// not_applied decision resets it in the store only, without looking for
// a copy in the queue, whether it has a queue to look in or not.
func TestResolveNotAppliedOfAWrapKey(t *testing.T) {
	store := memstore.New()
	call := lambdaidem.Wrap(store, func(ctx context.Context, in map[string]string) (string, error) {
		return "", lambdaidem.OutcomeUnknown(errors.New("504 after the request went out"))
	}, lambdaidem.WithNamespace("ns"), lambdaidem.WithKeyJSONField("id"))
	later := func() time.Time { return time.Now().Add(time.Minute) }
	for _, tc := range []struct {
		key    string
		client *emptyDLQ
	}{{"k1", &emptyDLQ{}}, {"k2", nil}} {
		if _, err := call(context.Background(), map[string]string{"id": tc.key}); !errors.Is(err, lambdaidem.ErrOutcomeUnknown) {
			t.Fatalf("call: %v", err)
		}
		rec, err := store.Get(context.Background(), idemstore.GetRequest{Namespace: "ns", Key: tc.key, Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if !rec.Uncertain() || rec.CopyID() != "" {
			t.Fatalf("%s: %s (%s) with the copy ID %q; want outcome_unknown without a copy", tc.key, rec.Status, rec.DeadLetterReason, rec.CopyID())
		}
		opts := sqsqueue.ResolveOptions{
			Store: store, Record: rec, Decision: idemstore.ResolutionNotApplied, By: "ops", Note: "checked",
			FunctionTimeout: time.Second, Now: later,
		}
		if tc.client != nil {
			opts.Queue = sqsqueue.RedriveOptions{Client: tc.client, DeadLetterQueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/dlq",
				SourceQueues: []string{"arn:aws:sqs:us-east-1:123456789012:src"}, WaitTime: -1}
		}
		res, err := sqsqueue.Resolve(context.Background(), opts)
		if err != nil || res.Record.Status != idemstore.StatusFailed {
			t.Errorf("%s: resolve not_applied: %s, %v; want it reset in the store only", tc.key, res.Record.Status, err)
		}
		if tc.client != nil && tc.client.receives > 0 {
			t.Errorf("%s: resolve looked for a copy the key never had (%d receives)", tc.key, tc.client.receives)
		}
	}
}
