package storetest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// BatchedDelivery is one delivery that BatchedWrites makes.
type BatchedDelivery string

// The four deliveries of BatchedWrites, in the order it makes them.
const (
	DeliverSingle       BatchedDelivery = "one at a time"
	DeliverBatched      BatchedDelivery = "batched"
	DeliverSingleAgain  BatchedDelivery = "one at a time, again"
	DeliverBatchedAgain BatchedDelivery = "batched, again"
)

// batchedWritesRecords is the size of BatchedWrites' batch.
const batchedWritesRecords = 10

// BatchedWrites delivers one SQS batch of ten new messages through
// lambdaidem.SQS on store twice over, one record at a time and with
// lambdaidem.WithBatchedWrites, each in a namespace of its own under base,
// and then delivers both again. It checks that batching changes no
// outcome: the same outcomes and the same failed records either way
// (processed, then duplicate), and every record left COMPLETED at attempt
// 1. A store's own test uses it to count what each delivery cost: before
// each delivery it calls counted(d, false) and after it counted(d, true),
// with d saying which one it is. now is the time Get reads the records at.
func BatchedWrites(t *testing.T, store idemstore.Store, base string, now time.Time, counted func(d BatchedDelivery, after bool)) {
	t.Helper()
	quiet := lambdaidem.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	var ev events.SQSEvent
	for i := range batchedWritesRecords {
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
	deliver := func(d BatchedDelivery, ns string, opts ...lambdaidem.Option) delivery {
		t.Helper()
		var rep *lambdaidem.InvocationReport
		opts = append([]lambdaidem.Option{lambdaidem.WithNamespace(base + "-" + ns), lambdaidem.WithKeyJSONField("key"), quiet,
			lambdaidem.WithInvocationHook(func(r *lambdaidem.InvocationReport) { rep = r })}, opts...)
		h := lambdaidem.SQS(store, func(context.Context, events.SQSMessage) error { return nil }, opts...)
		counted(d, false)
		resp, err := h(t.Context(), ev)
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		counted(d, true)
		var got delivery
		for _, r := range rep.Records {
			got.outcomes = append(got.outcomes, r.Outcome)
		}
		got.failures = len(resp.BatchItemFailures)
		return got
	}
	batched := lambdaidem.WithBatchedWrites()
	single1 := deliver(DeliverSingle, "single")
	batched1 := deliver(DeliverBatched, "batched", batched)
	single2 := deliver(DeliverSingleAgain, "single")
	batched2 := deliver(DeliverBatchedAgain, "batched", batched)

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
		for i := range batchedWritesRecords {
			rec, err := store.Get(t.Context(), idemstore.GetRequest{Namespace: base + "-" + ns, Key: fmt.Sprint("k", i), Now: now})
			if err != nil || rec.Status != idemstore.StatusCompleted || rec.Attempts != 1 {
				t.Errorf("%s k%d: %s at attempt %d (%v), want COMPLETED at attempt 1", ns, i, rec.Status, rec.Attempts, err)
			}
		}
	}
}
