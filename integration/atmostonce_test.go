package integration_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

// TestAtMostOnceDeadLettersAnAbandonedLease: in at-most-once mode, a
// redelivery that finds the previous attempt's lease run out without an
// outcome does not run the handler again. The record is marked
// outcome_unknown on DynamoDB (fenced on the abandoned token), the message
// lands in a real SQS dead-letter queue with that reason, and the original
// owner's late completion is refused.
func TestAtMostOnceDeadLettersAnAbandonedLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	q := newDLQ(t)
	var rep reports
	var runs counter
	entered, release := make(chan struct{}), make(chan struct{})
	opts := e.opts(lambdaidem.WithAtMostOnce(), lambdaidem.WithDeadLetterSink(q.sink()), rep.hook())

	// The original owner takes the payment and stalls before recording it
	// (a frozen process, or one that died: the store cannot tell).
	owner := lambdaidem.SQS(e.store, func(ctx context.Context, m events.SQSMessage) error {
		runs.inc()
		close(entered)
		<-release
		return nil
	}, opts...)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = owner(context.Background(), batch(message("m1", "pay-42", 1)))
	}()
	<-entered

	// SQS delivers the message again after the lease ran out.
	e.clock.Advance(2 * time.Minute)
	h := lambdaidem.SQS(e.store, func(context.Context, events.SQSMessage) error {
		runs.inc()
		return nil
	}, opts...)
	resp, err := h(context.Background(), batch(message("m1", "pay-42", 2)))
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("redelivery: failures %v, error %v; want it acknowledged once dead-lettered", resp.BatchItemFailures, err)
	}
	if n := runs.get(); n != 1 {
		t.Fatalf("handler ran %d times, want 1: at-most-once re-ran an abandoned attempt", n)
	}
	r := e.record(t, "pay-42")
	if r.Status != lambdaidem.StatusDeadLettered || r.DeadLetterReason != lambdaidem.ReasonOutcomeUnknown {
		t.Fatalf("record %s/%s, want DEAD_LETTERED/outcome_unknown", r.Status, r.DeadLetterReason)
	}

	msgs := q.receiveAll(t)
	if len(msgs) != 1 {
		t.Fatalf("DLQ holds %d messages, want 1", len(msgs))
	}
	dl, err := sqsqueue.Parse(msgs[0])
	if err != nil {
		t.Fatalf("parse dead letter: %v", err)
	}
	m := dl.Metadata
	if m.Reason != lambdaidem.ReasonOutcomeUnknown || m.MessageID != "m1" || m.Key != "pay-42" ||
		m.Namespace != e.ns || m.SourceARN != sourceARN || dl.Body != "pay-42" {
		t.Errorf("dead letter %+v, body %q: want outcome_unknown for m1, key pay-42 in %s from %s", m, dl.Body, e.ns, sourceARN)
	}
	if !strings.Contains(m.Error, "the outcome of an attempt is unknown") || !strings.Contains(m.Error, "lease ran out") {
		t.Errorf("dead letter error text %q does not say why", m.Error)
	}

	// The original owner wakes up and tries to record success: refused.
	close(release)
	<-done
	all := rep.all()
	if len(all) != 2 || all[1].Outcome != lambdaidem.OutcomeLeaseLost || !errors.Is(all[1].Err, lambdaidem.ErrLeaseLost) {
		t.Fatalf("reports %+v, want the owner's late completion refused with ErrLeaseLost", all)
	}
	if r := e.record(t, "pay-42"); r.Status != lambdaidem.StatusDeadLettered || r.DeadLetterReason != lambdaidem.ReasonOutcomeUnknown {
		t.Fatalf("record %s/%s after the late completion: it overwrote the outcome-unknown mark", r.Status, r.DeadLetterReason)
	}

	// SQS may deliver the same message yet again. It must be acknowledged
	// as the duplicate of a dead letter, without a run and without a
	// second DLQ copy.
	t.Run("a further delivery", func(t *testing.T) {
		resp, _ = h(context.Background(), batch(message("m1", "pay-42", 3)))
		if len(resp.BatchItemFailures) != 0 || runs.get() != 1 {
			t.Fatalf("third delivery: failures %v, runs %d", resp.BatchItemFailures, runs.get())
		}
		got := rep.all()[2].Outcome
		more := q.receiveAll(t)
		if got != lambdaidem.OutcomeDeadLetteredDuplicate || len(more) != 0 {
			t.Errorf("third delivery: %s and %d more DLQ messages; want %s and none", got, len(more), lambdaidem.OutcomeDeadLetteredDuplicate)
		}
		if r := e.record(t, "pay-42"); r.DeadLetterMessageID == "" {
			t.Error("the record does not hold the DLQ copy's message ID")
		}
	})
}
