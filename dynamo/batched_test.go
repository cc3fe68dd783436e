package dynamo_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// TestBatchedWritesRequests: a batch of 10 fresh records under
// WithBatchedWrites costs DynamoDB Local 4 requests, two
// TransactWriteItems claiming five records each (the two lanes) and two
// BatchExecuteStatements completing them, where one at a time costs 20
// UpdateItems; its redelivery costs 2 where one at a time costs 10. Every record ends as
// one at a time leaves it: the same outcomes, COMPLETED at attempt 1.
func TestBatchedWritesRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, testTuning)
	quiet := lambdaidem.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	var ev events.SQSEvent
	for i := range 10 {
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: fmt.Sprint("m", i), Body: fmt.Sprintf(`{"key":"k%d"}`, i),
			EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:orders",
			Attributes:     map[string]string{"ApproximateReceiveCount": "1"},
		})
	}
	type delivery struct {
		outcomes []lambdaidem.Outcome
		failures int
	}
	deliver := func(what string, ns string, want map[string]int, opts ...lambdaidem.Option) delivery {
		t.Helper()
		var rep *lambdaidem.InvocationReport
		opts = append([]lambdaidem.Option{lambdaidem.WithNamespace(ns), lambdaidem.WithKeyJSONField("key"), quiet,
			lambdaidem.WithInvocationHook(func(r *lambdaidem.InvocationReport) { rep = r })}, opts...)
		h := lambdaidem.SQS(b.store, func(context.Context, events.SQSMessage) error { return nil }, opts...)
		b.proxy.ResetCounts()
		resp, err := h(t.Context(), ev)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		wantRequests(t, b.proxy, what, want)
		var d delivery
		for _, r := range rep.Records {
			d.outcomes = append(d.outcomes, r.Outcome)
		}
		d.failures = len(resp.BatchItemFailures)
		return d
	}
	batched := lambdaidem.WithBatchedWrites()
	single1 := deliver("one at a time", "single", map[string]int{"UpdateItem": 20})
	batched1 := deliver("batched", "batched", map[string]int{"TransactWriteItems": 2, "BatchExecuteStatement": 2}, batched)
	single2 := deliver("one at a time, again", "single", map[string]int{"UpdateItem": 10})
	batched2 := deliver("batched, again", "batched", map[string]int{"TransactWriteItems": 2}, batched)

	for _, c := range []struct {
		what            string
		single, batched delivery
		want            lambdaidem.Outcome
	}{{"first delivery", single1, batched1, lambdaidem.OutcomeProcessed}, {"redelivery", single2, batched2, lambdaidem.OutcomeDuplicate}} {
		if !slices.Equal(c.batched.outcomes, c.single.outcomes) || c.batched.failures != c.single.failures {
			t.Errorf("%s: batched outcomes %v (%d failed), one at a time %v (%d failed)", c.what, c.batched.outcomes, c.batched.failures, c.single.outcomes, c.single.failures)
		}
		for i, o := range c.batched.outcomes {
			if o != c.want {
				t.Errorf("%s: record %d %s, want %s", c.what, i, o, c.want)
			}
		}
	}
	for _, ns := range []string{"single", "batched"} {
		for i := range 10 {
			rec, err := b.store.Get(t.Context(), lambdaidem.GetRequest{Namespace: ns, Key: fmt.Sprint("k", i), Now: b.at(0)})
			if err != nil || rec.Status != lambdaidem.StatusCompleted || rec.Attempts != 1 {
				t.Errorf("%s k%d: %s at attempt %d (%v), want COMPLETED at attempt 1", ns, i, rec.Status, rec.Attempts, err)
			}
		}
	}
}
