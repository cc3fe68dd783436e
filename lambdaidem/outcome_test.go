package lambdaidem_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

var errGatewayTimeout = errors.New("email API: 504 Gateway Timeout")

// handled runs one invocation; a *BatchError (every record failed) is the
// response's business, any other error the test's.
func handled(t *testing.T, h func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), ev events.SQSEvent) events.SQSEventResponse {
	t.Helper()
	resp, err := h(t.Context(), ev)
	if _, ok := errors.AsType[*lambdaidem.BatchError](err); err != nil && !ok {
		t.Fatal(err)
	}
	return resp
}

// The user's report: in at-most-once mode an email API sent the email and
// answered 504; the handler returned the error. That error may have come
// after the effect, so the message is dead-lettered as outcome unknown and
// never runs again, instead of being retried into a second email.
func TestAtMostOnceErrorAfterEffectIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var emails atomic.Int32
	h := lambdaidem.SQS(b.store, b.counting(func(context.Context, events.SQSMessage) error {
		emails.Add(1) // sent; the answer is lost
		return fmt.Errorf("send welcome email: %w", errGatewayTimeout)
	}), b.opts(lambdaidem.WithAtMostOnce(), lambdaidem.WithDeadLetterSink(b.sink))...)
	for i := range 3 {
		wantFailed(t, handled(t, h, batch(redelivered(msg("m1", "welcome alice"), i+1))))
	}
	if n := emails.Load(); n != 1 {
		t.Fatalf("%d emails, want 1: at-most-once retried an error that may have come after the effect", n)
	}
	if got := b.sink.reasons(); len(got) != 1 || got[0] != lambdaidem.ReasonOutcomeUnknown {
		t.Fatalf("dead letters %v, want [outcome_unknown]", got)
	}
	dl := b.sink.sent[0]
	if !strings.Contains(dl.Error, "504 Gateway Timeout") || !strings.Contains(dl.Error, "NotApplied") {
		t.Errorf("the copy's error %q does not say what happened and how to declare otherwise", dl.Error)
	}
	if r := b.record(t, "m1"); r.Status != lambdaidem.StatusDeadLettered || r.DeadLetterReason != lambdaidem.ReasonOutcomeUnknown {
		t.Fatalf("record %s/%s, want DEAD_LETTERED/outcome_unknown", r.Status, r.DeadLetterReason)
	}
}

// In at-most-once mode the failures that declare the effect did not happen
// are retried: NotApplied, and RetryAfter, which asks for the retry.
// Poison is dead-lettered as poison, as in at-least-once mode.
func TestAtMostOnceDeclaredFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		err    error
		status lambdaidem.Status
		reason lambdaidem.Reason
	}{
		{"NotApplied", lambdaidem.NotApplied(errors.New("refused before sending")), lambdaidem.StatusFailed, ""},
		{"NotApplied wrapped", fmt.Errorf("send: %w", lambdaidem.NotApplied(errors.New("invalid address"))), lambdaidem.StatusFailed, ""},
		{"RetryAfter", lambdaidem.RetryAfter(time.Minute, errors.New("rate limited")), lambdaidem.StatusFailed, ""},
		{"Poison", lambdaidem.Poison(errors.New("no such customer")), lambdaidem.StatusDeadLettered, lambdaidem.ReasonPoison},
		{"OutcomeUnknown wins over NotApplied", lambdaidem.NotApplied(lambdaidem.OutcomeUnknown(errGatewayTimeout)), lambdaidem.StatusDeadLettered, lambdaidem.ReasonOutcomeUnknown},
		{"OutcomeUnknown wins over Poison", lambdaidem.Poison(lambdaidem.OutcomeUnknown(errGatewayTimeout)), lambdaidem.StatusDeadLettered, lambdaidem.ReasonOutcomeUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			h := lambdaidem.SQS(b.store, b.counting(func(context.Context, events.SQSMessage) error { return tc.err }),
				b.opts(lambdaidem.WithAtMostOnce(), lambdaidem.WithDeadLetterSink(b.sink))...)
			resp := handled(t, h, batch(msg("m1", "x")))
			if r := b.record(t, "m1"); r.Status != tc.status || r.DeadLetterReason != tc.reason {
				t.Fatalf("record %s/%q, want %s/%q", r.Status, r.DeadLetterReason, tc.status, tc.reason)
			}
			if tc.status != lambdaidem.StatusFailed {
				wantFailed(t, resp)
				return
			}
			wantFailed(t, resp, "m1")
			if _, isRetryAfter := errors.AsType[*lambdaidem.RetryAfterError](tc.err); isRetryAfter {
				if d, ok := b.vis.get("m1"); !ok || d != time.Minute {
					t.Errorf("visibility %v (%v), want the RetryAfter's minute", d, ok)
				}
			}
			// The retry runs the handler again.
			handled(t, h, batch(redelivered(msg("m1", "x"), 2)))
			if n := b.calls.get("m1"); n != 2 {
				t.Fatalf("handler ran %d times, want 2", n)
			}
		})
	}
}

// OutcomeUnknown is dead-lettered as outcome unknown in at-least-once mode
// too, and the handler never runs again for the key: not on a redelivery,
// and not after the lease taken for the dead-lettering has run out when
// the copy could not be sent, nor without a sink at all.
func TestOutcomeUnknownAtLeastOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		sink    bool
		sendErr error
	}{
		{"sink", true, nil},
		{"send fails", true, errors.New("DLQ unreachable")},
		{"no sink", false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.sink.err = tc.sendErr
			opts := []lambdaidem.Option{lambdaidem.WithLease(time.Minute)}
			if tc.sink {
				opts = append(opts, lambdaidem.WithDeadLetterSink(b.sink))
			}
			h := lambdaidem.SQS(b.store, b.counting(func(context.Context, events.SQSMessage) error {
				return lambdaidem.OutcomeUnknown(errGatewayTimeout)
			}), b.opts(opts...)...)
			resp := handled(t, h, batch(msg("m1", "pay 10")))
			if tc.sink && tc.sendErr == nil {
				wantFailed(t, resp)
				if got := b.sink.reasons(); len(got) != 1 || got[0] != lambdaidem.ReasonOutcomeUnknown {
					t.Fatalf("dead letters %v, want [outcome_unknown]", got)
				}
				if r := b.record(t, "m1"); r.Status != lambdaidem.StatusDeadLettered || r.DeadLetterReason != lambdaidem.ReasonOutcomeUnknown {
					t.Fatalf("record %s/%s, want DEAD_LETTERED/outcome_unknown", r.Status, r.DeadLetterReason)
				}
			} else {
				wantFailed(t, resp, "m1")
				// Never FAILED, which would let the retry run the payment:
				// IN_PROGRESS, with the decision on the record.
				if r := b.record(t, "m1"); r.Status != lambdaidem.StatusInProgress || r.DeadLetterReason != lambdaidem.ReasonOutcomeUnknown {
					t.Fatalf("record %s/%q, want IN_PROGRESS with a pending outcome_unknown mark", r.Status, r.DeadLetterReason)
				}
			}
			// Redelivered while the lease holds, and again once it and the
			// grace have run out (the at-least-once takeover).
			handled(t, h, batch(redelivered(msg("m1", "pay 10"), 2)))
			b.clock.Advance(2 * time.Minute)
			b.sink.mu.Lock()
			b.sink.err = nil
			b.sink.mu.Unlock()
			handled(t, h, batch(redelivered(msg("m1", "pay 10"), 3)))
			if n := b.calls.get("m1"); n != 1 {
				t.Fatalf("handler ran %d times, want 1: an outcome declared unknown ran again", n)
			}
			if tc.sink {
				if got := b.sink.reasons(); len(got) != 1 || got[0] != lambdaidem.ReasonOutcomeUnknown {
					t.Fatalf("dead letters %v, want one outcome_unknown copy", got)
				}
			}
		})
	}
}

// In at-most-once mode a completion refused for what it carried (a
// write's condition) comes after the handler succeeded: whatever it did
// besides its completion writes happened, so it is not run again.
func TestAtMostOnceRefusedCompletionIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	for _, atMostOnce := range []bool{true, false} {
		t.Run(fmt.Sprintf("atMostOnce=%v", atMostOnce), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			store := &txStore{Store: b.store, err: fmt.Errorf("tx: %w", lambdaidem.ErrWriteRefused)}
			opts := []lambdaidem.Option{lambdaidem.WithDeadLetterSink(b.sink)}
			if atMostOnce {
				opts = append(opts, lambdaidem.WithAtMostOnce())
			}
			h := lambdaidem.SQS(store, b.counting(func(ctx context.Context, _ events.SQSMessage) error {
				return lambdaidem.AddCompletionWrite(ctx, "ledger row")
			}), b.opts(opts...)...)
			resp := handled(t, h, batch(msg("m1", "x")))
			r := b.record(t, "m1")
			if !atMostOnce {
				wantFailed(t, resp, "m1")
				if r.Status != lambdaidem.StatusFailed {
					t.Fatalf("record %s, want FAILED: at-least-once retries a refused completion", r.Status)
				}
				return
			}
			wantFailed(t, resp)
			if r.Status != lambdaidem.StatusDeadLettered || r.DeadLetterReason != lambdaidem.ReasonOutcomeUnknown {
				t.Fatalf("record %s/%s, want DEAD_LETTERED/outcome_unknown", r.Status, r.DeadLetterReason)
			}
			if !strings.Contains(b.sink.sent[0].Error, "completion was refused") {
				t.Errorf("the copy's error %q does not say the completion was refused", b.sink.sent[0].Error)
			}
		})
	}
}

// The optimistic mode keeps OutcomeUnknown's promise: the first delivery,
// which held no lease, claims the key to dead-letter it, and the handler
// never runs again.
func TestOptimisticOutcomeUnknown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := lambdaidem.SQS(b.store, b.counting(func(context.Context, events.SQSMessage) error {
		return lambdaidem.OutcomeUnknown(errGatewayTimeout)
	}), b.opts(lambdaidem.WithOptimisticCommit(), lambdaidem.WithDeadLetterSink(b.sink))...)
	wantFailed(t, handled(t, h, batch(msg("m1", "x"))))
	if r := b.record(t, "m1"); r.Status != lambdaidem.StatusDeadLettered || r.DeadLetterReason != lambdaidem.ReasonOutcomeUnknown {
		t.Fatalf("record %s/%s, want DEAD_LETTERED/outcome_unknown", r.Status, r.DeadLetterReason)
	}
	wantFailed(t, handled(t, h, batch(redelivered(msg("m1", "x"), 2))))
	if n := b.calls.get("m1"); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}

// Batched writes judge a failure as single records do.
func TestBatchedAtMostOnceErrorIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := lambdaidem.SQS(b.store, b.counting(func(_ context.Context, m events.SQSMessage) error {
		if m.MessageId == "m2" {
			return errGatewayTimeout
		}
		return nil
	}), b.opts(lambdaidem.WithAtMostOnce(), lambdaidem.WithBatchedWrites(), lambdaidem.WithDeadLetterSink(b.sink))...)
	wantFailed(t, handled(t, h, batch(msg("m1", "a"), msg("m2", "b"), msg("m3", "c"))))
	if got := b.sink.reasons(); len(got) != 1 || got[0] != lambdaidem.ReasonOutcomeUnknown {
		t.Fatalf("dead letters %v, want [outcome_unknown]", got)
	}
	if st := b.status("m1") + "," + b.status("m2") + "," + b.status("m3"); st != "COMPLETED,DEAD_LETTERED,COMPLETED" {
		t.Fatalf("statuses %s", st)
	}
}

// Wrap: in at-most-once mode an error that does not declare the effect
// did not happen leaves the key dead-lettered (the call, and every later
// one, gets ErrOutcomeUnknown wrapping the function's error); NotApplied,
// RetryAfter and Poison keep it retryable. OutcomeUnknown dead-letters it
// in either mode.
func TestWrapOutcomes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		atMostOnce bool
		err        error
		unknown    bool
	}{
		{"at-most-once plain error", true, errGatewayTimeout, true},
		{"at-most-once NotApplied", true, lambdaidem.NotApplied(errors.New("card declined")), false},
		{"at-most-once RetryAfter", true, lambdaidem.RetryAfter(time.Second, errors.New("rate limited")), false},
		{"at-most-once Poison", true, lambdaidem.Poison(errors.New("no such account")), false},
		{"at-most-once OutcomeUnknown", true, lambdaidem.OutcomeUnknown(errGatewayTimeout), true},
		{"at-least-once plain error", false, errGatewayTimeout, false},
		{"at-least-once OutcomeUnknown", false, lambdaidem.OutcomeUnknown(errGatewayTimeout), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			var runs atomic.Int32
			opts := b.wrapOpts(lambdaidem.WithKeyJSONField("id"))
			if tc.atMostOnce {
				opts = append(opts, lambdaidem.WithAtMostOnce())
			}
			f := lambdaidem.Wrap(b.store, func(ctx context.Context, o order) (string, error) {
				if runs.Add(1) == 1 {
					return "", tc.err
				}
				return "charged", nil
			}, opts...)
			_, err := f(t.Context(), order{ID: "o1"})
			if !errors.Is(err, errors.Unwrap(tc.err)) && !errors.Is(err, tc.err) {
				t.Errorf("first call: %v, does not wrap the function's error %v", err, tc.err)
			}
			again, err2 := f(t.Context(), order{ID: "o1"})
			if !tc.unknown {
				if errors.Is(err, lambdaidem.ErrOutcomeUnknown) || err2 != nil || again != "charged" || runs.Load() != 2 {
					t.Fatalf("calls: %v / %q %v after %d runs; want a retryable failure, then a run", err, again, err2, runs.Load())
				}
				return
			}
			if !errors.Is(err, lambdaidem.ErrOutcomeUnknown) || !errors.Is(err2, lambdaidem.ErrOutcomeUnknown) || runs.Load() != 1 {
				t.Fatalf("calls: %v / %v after %d runs; want ErrOutcomeUnknown twice after 1 run", err, err2, runs.Load())
			}
			if r := b.record(t, "o1"); r.Status != lambdaidem.StatusDeadLettered || r.DeadLetterReason != lambdaidem.ReasonOutcomeUnknown {
				t.Fatalf("record %s/%s, want DEAD_LETTERED/outcome_unknown", r.Status, r.DeadLetterReason)
			}
		})
	}
}

// Wrap in at-most-once mode: completion writes that were refused, or may
// not have committed, leave the key dead-lettered as outcome unknown —
// what the function did besides them happened — never retryable.
func TestWrapAtMostOnceWritesNotCommitted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"refused", fmt.Errorf("tx: %w", lambdaidem.ErrWriteRefused)},
		{"store unavailable", fmt.Errorf("tx: %w", lambdaidem.ErrStoreUnavailable)},
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
			}, b.wrapOpts(lambdaidem.WithKeyJSONField("id"), lambdaidem.WithAtMostOnce())...)
			_, err := f(t.Context(), order{ID: "o1"})
			if !errors.Is(err, lambdaidem.ErrOutcomeUnknown) || !errors.Is(err, lambdaidem.ErrWritesNotCommitted) {
				t.Fatalf("call: %v, want ErrOutcomeUnknown and ErrWritesNotCommitted", err)
			}
			store.err = nil
			if _, err := f(t.Context(), order{ID: "o1"}); !errors.Is(err, lambdaidem.ErrOutcomeUnknown) || runs.Load() != 1 {
				t.Fatalf("repeat: %v after %d runs, want ErrOutcomeUnknown after 1", err, runs.Load())
			}
		})
	}
}
