package lambdaidem_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
)

// lateBatchStore holds its batched completions in the network (answered
// unavailable) and refuses the single retry of each for what it carries,
// as lateStore does for two single tries.
type lateBatchStore struct {
	lambdaidem.Store
	mem  *memstore.Store
	mu   sync.Mutex
	held []idemstore.CompleteRequest
}

func (s *lateBatchStore) ClaimBatch(ctx context.Context, reqs []idemstore.ClaimRequest) []idemstore.BatchClaim {
	return s.mem.ClaimBatch(ctx, reqs)
}

func (s *lateBatchStore) CompleteBatch(ctx context.Context, reqs []idemstore.CompleteRequest) []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	errs := make([]error, len(reqs))
	for i, r := range reqs {
		r.Writes = nil
		s.held = append(s.held, r)
		errs[i] = fmt.Errorf("late: request timed out: %w", lambdaidem.ErrStoreUnavailable)
	}
	return errs
}

func (s *lateBatchStore) Complete(ctx context.Context, req idemstore.CompleteRequest) error {
	return fmt.Errorf("late: the debit's condition failed: %w", lambdaidem.ErrWriteRefused)
}

func (s *lateBatchStore) land(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.held {
		_ = s.mem.Complete(ctx, r)
	}
}

// The batched twin of TestRefusalAfterATimedOutCompletionIsNotFinal.
func TestBatchedRefusalAfterATimedOutCompletionIsNotFinal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store := &lateBatchStore{Store: b.store, mem: b.store}
	var mu sync.Mutex
	var reps []*lambdaidem.InvocationReport
	h := lambdaidem.SQS(store, b.counting(func(ctx context.Context, _ events.SQSMessage) error {
		return lambdaidem.AddCompletionWrite(ctx, "debit")
	}), b.opts(lambdaidem.WithBatchedWrites(), lambdaidem.WithMaxAttempts(1), lambdaidem.WithDeadLetterSink(landingSink{b.sink, store}),
		lambdaidem.WithLease(time.Minute), reportsOf(&reps, &mu))...)
	_, _ = h(context.Background(), batch(msg("m1", "x"), msg("m2", "y")))
	for _, r := range reps[0].Records {
		t.Logf("%s: %s reason=%s err=%v", r.MessageID, r.Outcome, r.Reason, r.Err)
		if r.Outcome != lambdaidem.OutcomeStoreError || errors.Is(r.Err, lambdaidem.ErrWriteRefused) {
			t.Errorf("%s: outcome %s (%v), want store_error and not refused, as without batching", r.MessageID, r.Outcome, r.Err)
		}
	}
	if n := len(b.sink.reasons()); n != 0 {
		t.Errorf("%d dead-letter copies (%v) of work whose completion landed", n, b.sink.reasons())
	}
	for _, k := range []string{"m1", "m2"} {
		t.Logf("%s record: %s", k, b.status(k))
	}
}

// landingSink lets the held completions land while the copy is sent.
type landingSink struct {
	*sink
	store *lateBatchStore
}

func (s landingSink) Send(ctx context.Context, dl lambdaidem.DeadLetter) (string, error) {
	s.store.land(ctx)
	return s.sink.Send(ctx, dl)
}
