package lambdaidem_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// A completion write added after the handler returned is refused, not
// silently dropped.
func TestAddCompletionWriteAfterReturnIsAnError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var saved context.Context
	h := lambdaidem.SQS(b.store, func(ctx context.Context, _ events.SQSMessage) error {
		saved = ctx
		return nil
	}, b.opts()...)
	if _, err := h(context.Background(), batch(msg("m1", "x"))); err != nil {
		t.Fatal(err)
	}
	if err := lambdaidem.AddCompletionWrite(saved, "late"); !errors.Is(err, lambdaidem.ErrHandlerReturned) {
		t.Fatalf("late AddCompletionWrite: %v, want ErrHandlerReturned", err)
	}
}

// txStore commits completion writes by dropping them, or fails the
// completion with err when set: a stand-in for a store whose transaction
// was cancelled.
type txStore struct {
	lambdaidem.Store // an in-memory store; its own declarations hidden: this double commits what it likes
	err              error
}

func (s *txStore) Complete(ctx context.Context, req idemstore.CompleteRequest) error {
	if s.err != nil {
		return s.err
	}
	req.Writes = nil
	return s.Store.Complete(ctx, req)
}

// When the completion's writes did not commit, the call never returns the
// function's result.
func TestWrapCompletionWritesNotCommitted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		err     error
		refused bool // ErrWriteRefused
		status  lambdaidem.Status
	}{
		{"store unavailable", fmt.Errorf("tx: %w", lambdaidem.ErrStoreUnavailable), false, lambdaidem.StatusFailed},
		{"condition failed", fmt.Errorf("tx: %w", lambdaidem.ErrWriteRefused), true, lambdaidem.StatusFailed},
		{"unsupported", fmt.Errorf("tx: %w", lambdaidem.ErrUnsupportedWrite), false, lambdaidem.StatusFailed},
		{"lease lost", fmt.Errorf("tx: %w", lambdaidem.ErrLeaseLost), false, lambdaidem.StatusInProgress},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			store := &txStore{Store: b.store, err: tc.err}
			var runs atomic.Int32
			f := lambdaidem.Wrap(store, func(ctx context.Context, o order) (int32, error) {
				if err := lambdaidem.AddCompletionWrite(ctx, "debit"); err != nil {
					return 0, err
				}
				return runs.Add(1), nil
			}, b.wrapOpts(lambdaidem.WithKeyJSONField("id"))...)
			out, err := f(context.Background(), order{ID: "o1"})
			if !errors.Is(err, lambdaidem.ErrWritesNotCommitted) || errors.Is(err, lambdaidem.ErrWriteRefused) != tc.refused || out != 0 {
				t.Fatalf("call: %d, %v; want ErrWritesNotCommitted (refused %v) and no result", out, err, tc.refused)
			}
			if r := b.record(t, "o1"); r.Status != tc.status {
				t.Fatalf("record %s, want %s", r.Status, tc.status)
			}
			if tc.status != lambdaidem.StatusFailed {
				return
			}
			store.err = nil
			if out, err := f(context.Background(), order{ID: "o1"}); err != nil || out != 2 {
				t.Fatalf("retry: %d %v, want the function to run again", out, err)
			}
		})
	}
}
