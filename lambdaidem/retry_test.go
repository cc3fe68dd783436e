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
)

// slowStore takes d of the world's time per Complete and answers
// unavailable, as a DynamoDB whose every attempt times out.
type slowStore struct {
	lambdaidem.Store
	w     *simWorld
	d     time.Duration
	mu    sync.Mutex
	tries []time.Time // when each try ended
}

func (s *slowStore) Complete(context.Context, idemstore.CompleteRequest) error {
	s.w.advance(s.d)
	s.mu.Lock()
	s.tries = append(s.tries, s.w.Now())
	s.mu.Unlock()
	return lambdaidem.ErrStoreUnavailable
}

// The completion's retries stop while the time left cannot hold another
// try as slow as the last, instead of starting one the deadline cuts off.
func TestCompletionRetriesFitBeforeTheDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world()
	w.PassShort(time.Second)
	s := &slowStore{Store: b.store, w: w, d: 1500 * time.Millisecond}
	h := lambdaidem.SQS(s, func(ctx context.Context, _ events.SQSMessage) error {
		w.advance(30*time.Second - lambdaidem.DefaultDeadlineMargin) // work until the margin
		return nil
	}, b.opts()...)
	ctx, cancel := w.ctx(30 * time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	_, _ = h(ctx, batch(msg("m1", "x")))
	if len(s.tries) != 2 {
		t.Errorf("%d tries, want 2 (the third cannot finish before the deadline)", len(s.tries))
	}
	for i, end := range s.tries {
		if end.After(deadline) {
			t.Errorf("try %d ended %v after the deadline", i+1, end.Sub(deadline))
		}
	}
}

// lateStore holds its first completion in the network, answering it as
// unavailable, and refuses the retry for what it carries (the effect's own
// condition); land delivers the held completion afterwards, as a request
// that outlived its client's timeout does.
type lateStore struct {
	lambdaidem.Store // an in-memory store; its own declarations hidden: this double commits what it likes
	// refusal answers the second try; nil means the debit's condition
	// failed (ErrWriteRefused). Later tries reach the store.
	refusal error
	mu      sync.Mutex
	tries   int
	held    *idemstore.CompleteRequest
}

func (s *lateStore) Complete(ctx context.Context, req idemstore.CompleteRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.tries++; s.tries {
	case 1:
		req.Writes = nil // committed with the completion, when it lands
		s.held = &req
		return fmt.Errorf("late: request timed out: %w", lambdaidem.ErrStoreUnavailable)
	case 2:
		if s.refusal != nil {
			return s.refusal
		}
		return fmt.Errorf("late: the debit's condition failed: %w", lambdaidem.ErrWriteRefused)
	}
	return s.Store.Complete(ctx, req)
}

func (s *lateStore) land(ctx context.Context) error {
	s.mu.Lock()
	req := *s.held
	s.mu.Unlock()
	return s.Store.Complete(ctx, req)
}

// A completion refused after an earlier try timed out is not known to have
// failed: the earlier try may still land. The record is kept (not
// dead-lettered, not failed, not acknowledged), and once the late try has
// landed the redelivery finds it completed.
func TestRefusalAfterATimedOutCompletionIsNotFinal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store := &lateStore{Store: b.store}
	var mu sync.Mutex
	var reps []*lambdaidem.InvocationReport
	h := lambdaidem.SQS(store, b.counting(func(ctx context.Context, _ events.SQSMessage) error {
		return lambdaidem.AddCompletionWrite(ctx, "debit")
	}), b.opts(lambdaidem.WithMaxAttempts(1), lambdaidem.WithDeadLetterSink(b.sink), lambdaidem.WithLease(time.Minute), reportsOf(&reps, &mu))...)
	resp, _ := h(context.Background(), batch(msg("m1", "x"))) // all failed: a BatchError
	wantFailed(t, resp, "m1")
	mu.Lock()
	got := reps[0].Records[0]
	mu.Unlock()
	if got.Outcome != lambdaidem.OutcomeStoreError || !errors.Is(got.Err, lambdaidem.ErrStoreUnavailable) || errors.Is(got.Err, lambdaidem.ErrWriteRefused) {
		t.Fatalf("outcome %s (%v), want store_error, unavailable and not refused", got.Outcome, got.Err)
	}
	if n := len(b.sink.reasons()); n != 0 {
		t.Fatalf("%d dead-letter copies of work whose completion may still land", n)
	}
	if r := b.record(t, "m1"); r.Status != lambdaidem.StatusInProgress {
		t.Fatalf("record %s, want IN_PROGRESS until the lease decides", r.Status)
	}
	if err := store.land(context.Background()); err != nil {
		t.Fatalf("the held completion did not land: %v", err)
	}
	b.clock.Advance(2 * time.Minute)
	wantFailed(t, mustHandle(t, h, context.Background(), batch(redelivered(msg("m1", "x"), 2))))
	if n := b.calls.get("m1"); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
	if n := len(b.sink.reasons()); n != 0 {
		t.Fatalf("%d dead-letter copies of completed work", n)
	}
}

// Wrap next door: the caller is told the outcome is unknown, never that
// the writes were refused, and the failure mark it writes fences the late
// try: it can no longer land.
func TestWrapRefusalAfterATimedOutCompletionIsNotFinal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store := &lateStore{Store: b.store}
	f := lambdaidem.Wrap(store, func(ctx context.Context, o order) (int, error) {
		return 1, lambdaidem.AddCompletionWrite(ctx, "debit")
	}, b.wrapOpts(lambdaidem.WithKeyJSONField("id"))...)
	_, err := f(context.Background(), order{ID: "o1"})
	if !errors.Is(err, lambdaidem.ErrWritesNotCommitted) || !errors.Is(err, lambdaidem.ErrStoreUnavailable) || errors.Is(err, lambdaidem.ErrWriteRefused) {
		t.Fatalf("err = %v; want ErrWritesNotCommitted, unavailable, not refused", err)
	}
	if err := store.land(context.Background()); !errors.Is(err, lambdaidem.ErrLeaseLost) {
		t.Fatalf("late completion: %v, want it fenced off (ErrLeaseLost)", err)
	}
	if r := b.record(t, "o1"); r.Status != lambdaidem.StatusFailed {
		t.Fatalf("record %s, want FAILED (the fence)", r.Status)
	}
}

// A refusal that the earlier try could never have escaped either (a
// result too large for the store) stands after a timed-out try: Wrap
// completes the key without the result, as it does without the timeout.
func TestWrapTooLargeAfterATimedOutCompletionStands(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store := &lateStore{Store: b.store, refusal: fmt.Errorf("late: %w", lambdaidem.ErrResultTooLarge)}
	f := lambdaidem.Wrap(store, func(ctx context.Context, o order) (int, error) { return 7, nil },
		b.wrapOpts(lambdaidem.WithKeyJSONField("id"))...)
	if out, err := f(context.Background(), order{ID: "o1"}); err != nil || out != 7 {
		t.Fatalf("call: %d, %v; want 7 and no error", out, err)
	}
	if r := b.record(t, "o1"); r.Status != lambdaidem.StatusCompleted {
		t.Fatalf("record %s, want COMPLETED without its result", r.Status)
	}
}
