package lambdaidem_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
)

func TestCompletionThatCannotBeWrittenNeverBecomesFailed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var mu sync.Mutex
	var reps []*lambdaidem.InvocationReport
	h := lambdaidem.SQS(b.store, func(ctx context.Context, m events.SQSMessage) error {
		b.store.SetFault(func(op string) error {
			if op == memstore.OpGet {
				return nil
			}
			return errors.New("throttled")
		})
		return nil
	}, b.opts(reportsOf(&reps, &mu))...)
	resp, err := h(context.Background(), batch(msg("m1", "a")))
	if err != nil {
		t.Fatal(err)
	}
	// The effect happened: acknowledge, and leave the record IN_PROGRESS
	// for its lease to decide; never FAILED, which would invite a re-run.
	wantFailed(t, resp)
	if got := reps[0].Records[0].Outcome; got != lambdaidem.OutcomeUnrecorded {
		t.Fatalf("outcome %s, want completion_unrecorded", got)
	}
	b.store.SetFault(nil)
	if r := b.record(t, "m1"); r.Status != lambdaidem.StatusInProgress {
		t.Fatalf("status %s, want IN_PROGRESS", r.Status)
	}
}

// completeFaults answers Complete for one key as unavailable while on.
type completeFaults struct {
	lambdaidem.Store
	mu  sync.Mutex
	key string
	on  bool
}

func (s *completeFaults) Complete(ctx context.Context, r idemstore.CompleteRequest) error {
	s.mu.Lock()
	on := s.on && r.Lease.Key == s.key
	s.mu.Unlock()
	if on {
		return lambdaidem.ErrStoreUnavailable
	}
	return s.Store.Complete(ctx, r)
}

func (s *completeFaults) set(on bool) { s.mu.Lock(); s.on = on; s.mu.Unlock() }

// With WithFailBatchOnAnyFailure, a record whose handler succeeded but
// whose completion could not be written is not run again when the batch
// comes back to this container: the completion is written instead.
func TestFailBatchRetryRecordsAnUnrecordedCompletion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store := &completeFaults{Store: b.store, key: "m1", on: true}
	var mu sync.Mutex
	var reps []*lambdaidem.InvocationReport
	h := lambdaidem.SQS(store, b.counting(func(_ context.Context, m events.SQSMessage) error {
		if m.MessageId == "m2" {
			return errors.New("downstream down")
		}
		return nil
	}), b.opts(lambdaidem.WithFailBatchOnAnyFailure(), lambdaidem.WithLease(time.Minute), reportsOf(&reps, &mu))...)
	ev := batch(msg("m1", "a"), msg("m2", "b"))
	if _, err := h(context.Background(), ev); err == nil {
		t.Fatal("want the batch failed")
	}
	store.set(false)
	// Lambda retries the whole batch once the lease and grace are over.
	b.clock.Advance(2 * time.Minute)
	_, _ = h(context.Background(), batch(redelivered(msg("m1", "a"), 2), redelivered(msg("m2", "b"), 2)))
	if n := b.calls.get("m1"); n != 1 {
		t.Fatalf("m1's handler ran %d times, want 1: the retry re-ran a record whose effect happened", n)
	}
	if r := b.record(t, "m1"); r.Status != lambdaidem.StatusCompleted || r.Attempts != 1 {
		t.Fatalf("m1 record %s after %d attempts, want COMPLETED after 1", r.Status, r.Attempts)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := reps[1].Records[0].Outcome; got != lambdaidem.OutcomeDuplicate {
		t.Fatalf("m1 outcome on the retry %s, want duplicate", got)
	}
}
