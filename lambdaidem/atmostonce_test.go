package lambdaidem_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// abandon claims key m1 under a handler that never records an outcome (its
// process "dies" mid-handler), then lets the lease run out.
func abandon(t *testing.T, b *bundle, opts ...lambdaidem.Option) {
	t.Helper()
	sim := crashSim{b}
	h := lambdaidem.SQS(b.store, b.counting(func(context.Context, events.SQSMessage) error {
		sim.crash()
		return nil
	}), b.opts(opts...)...)
	_, _ = h(context.Background(), batch(msg("m1", "pay 10")))
	sim.revive()
	b.clock.Advance(2 * time.Minute)
}

func TestAtMostOnceDeadLettersAnAbandonedAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	opts := []lambdaidem.Option{lambdaidem.WithAtMostOnce(), lambdaidem.WithLease(time.Minute), lambdaidem.WithDeadLetterSink(b.sink)}
	abandon(t, b, opts...)
	h := lambdaidem.SQS(b.store, b.counting(ok), b.opts(opts...)...)
	resp, err := h(context.Background(), batch(redelivered(msg("m1", "pay 10"), 2)))
	if err != nil {
		t.Fatal(err)
	}
	wantFailed(t, resp)
	if n := b.calls.get("m1"); n != 1 {
		t.Fatalf("handler ran %d times, want 1: at-most-once re-ran an abandoned attempt", n)
	}
	if got := b.sink.reasons(); len(got) != 1 || got[0] != lambdaidem.ReasonOutcomeUnknown {
		t.Fatalf("dead letters %v, want [outcome_unknown]", got)
	}
	if r := b.record(t, "m1"); r.Status != lambdaidem.StatusDeadLettered || r.DeadLetterReason != lambdaidem.ReasonOutcomeUnknown {
		t.Fatalf("record %s/%s", r.Status, r.DeadLetterReason)
	}
	// The default mode re-runs instead.
	b2 := setup(t)
	abandon(t, b2, lambdaidem.WithLease(time.Minute))
	h2 := lambdaidem.SQS(b2.store, b2.counting(ok), b2.opts(lambdaidem.WithLease(time.Minute))...)
	_, _ = h2(context.Background(), batch(redelivered(msg("m1", "pay 10"), 2)))
	if n := b2.calls.get("m1"); n != 2 {
		t.Fatalf("at-least-once ran %d times, want 2", n)
	}
}

func TestAtMostOnceFencesTheOriginalOwnersLateCompletion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	entered, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var reps []*lambdaidem.InvocationReport
	opts := []lambdaidem.Option{lambdaidem.WithAtMostOnce(), lambdaidem.WithLease(time.Minute), lambdaidem.WithDeadLetterSink(b.sink), reportsOf(&reps, &mu)}
	slow := lambdaidem.SQS(b.store, func(context.Context, events.SQSMessage) error {
		close(entered)
		<-release
		return nil
	}, b.opts(opts...)...)
	done := make(chan struct{})
	go func() { defer close(done); _, _ = slow(context.Background(), batch(msg("m1", "trade"))) }()
	<-entered
	b.clock.Advance(2 * time.Minute)
	h := lambdaidem.SQS(b.store, ok, b.opts(opts...)...)
	_, _ = h(context.Background(), batch(redelivered(msg("m1", "trade"), 2)))
	close(release)
	<-done
	mu.Lock()
	defer mu.Unlock()
	late := reps[1].Records[0]
	if late.Outcome != lambdaidem.OutcomeLeaseLost {
		t.Fatalf("original owner's late completion: %s, want lease_lost", late.Outcome)
	}
	if r := b.record(t, "m1"); r.Status != lambdaidem.StatusDeadLettered {
		t.Fatalf("status %s: the late completion overwrote the outcome-unknown mark", r.Status)
	}
}

func TestAtMostOnceResendsWhenTheDLQWasDown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	opts := []lambdaidem.Option{lambdaidem.WithAtMostOnce(), lambdaidem.WithLease(time.Minute), lambdaidem.WithDeadLetterSink(b.sink)}
	abandon(t, b, opts...)
	b.sink.err = errors.New("DLQ unreachable")
	h := lambdaidem.SQS(b.store, b.counting(ok), b.opts(opts...)...)
	resp, _ := h(context.Background(), batch(redelivered(msg("m1", "pay 10"), 2)))
	wantFailed(t, resp, "m1") // not sent: SQS keeps it
	// Never FAILED, which would let the retry run the handler.
	if st := b.status("m1"); st != lambdaidem.StatusInProgress {
		t.Fatalf("status %s after the failed send, want IN_PROGRESS", st)
	}
	b.sink.mu.Lock()
	b.sink.err = nil
	b.sink.mu.Unlock()
	b.clock.Advance(2 * time.Minute) // the lease taken for the send runs out
	resp, _ = h(context.Background(), batch(redelivered(msg("m1", "pay 10"), 3)))
	wantFailed(t, resp)
	if got := b.sink.reasons(); len(got) != 1 || got[0] != lambdaidem.ReasonOutcomeUnknown {
		t.Fatalf("dead letters %v", got)
	}
	if b.calls.get("m1") != 1 {
		t.Fatal("handler re-ran")
	}
	// A further delivery of the same message is acknowledged, not sent again.
	resp, _ = h(context.Background(), batch(redelivered(msg("m1", "pay 10"), 4)))
	wantFailed(t, resp)
	if n := len(b.sink.reasons()); n != 1 {
		t.Fatalf("%d DLQ copies, want 1", n)
	}
}

// In at-most-once mode a handler that returns an error because its context
// ended may have started its effect: it is dead-lettered as outcome unknown,
// never made retryable.
func TestAtMostOnceDeadlineCancelIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world()
	entered := make(chan struct{})
	h := lambdaidem.SQS(b.store, b.counting(func(ctx context.Context, _ events.SQSMessage) error {
		close(entered) // the payment is on its way
		<-ctx.Done()
		return ctx.Err()
	}), b.opts(lambdaidem.WithAtMostOnce(), lambdaidem.WithDeadLetterSink(b.sink))...)
	ctx, cancel := w.ctx(30 * time.Second)
	defer cancel()
	done := make(chan events.SQSEventResponse, 1)
	go func() { resp, _ := h(ctx, batch(msg("m1", "pay 10"))); done <- resp }()
	<-entered
	w.advance(30*time.Second - lambdaidem.DefaultDeadlineMargin)
	wantFailed(t, <-done)
	if got := b.sink.reasons(); len(got) != 1 || got[0] != lambdaidem.ReasonOutcomeUnknown {
		t.Fatalf("dead letters %v, want [outcome_unknown]", got)
	}
	if r := b.record(t, "m1"); r.Status != lambdaidem.StatusDeadLettered || r.DeadLetterReason != lambdaidem.ReasonOutcomeUnknown {
		t.Fatalf("record %s/%s, want DEAD_LETTERED/outcome_unknown", r.Status, r.DeadLetterReason)
	}
	// Without a sink the record stays IN_PROGRESS (never FAILED) and the
	// message is reported failed.
	b2 := setup(t)
	w2 := b2.world()
	entered2 := make(chan struct{})
	h2 := lambdaidem.SQS(b2.store, func(ctx context.Context, _ events.SQSMessage) error {
		close(entered2)
		<-ctx.Done()
		return ctx.Err()
	}, b2.opts(lambdaidem.WithAtMostOnce())...)
	ctx2, cancel2 := w2.ctx(30 * time.Second)
	defer cancel2()
	go func() { resp, _ := h2(ctx2, batch(msg("m2", "pay 10"))); done <- resp }()
	<-entered2
	w2.advance(30*time.Second - lambdaidem.DefaultDeadlineMargin)
	wantFailed(t, <-done, "m2")
	if r := b2.record(t, "m2"); r.Status != lambdaidem.StatusInProgress {
		t.Fatalf("record %s, want IN_PROGRESS: a FAILED record lets a retry run the payment again", r.Status)
	}
}

// In at-most-once mode a handler that panics may have had its effect before
// the panic: it is dead-lettered as outcome unknown and never runs again,
// as Wrap does with a panicking function.
func TestAtMostOncePanicIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	runs := 0
	h := lambdaidem.SQS(b.store, func(context.Context, events.SQSMessage) error {
		runs++
		panic("charged, then crashed")
	}, b.opts(lambdaidem.WithAtMostOnce(), lambdaidem.WithDeadLetterSink(b.sink))...)
	for range 2 {
		resp, _ := h(context.Background(), batch(msg("m1", "pay 10")))
		wantFailed(t, resp)
	}
	if runs != 1 {
		t.Fatalf("handler ran %d times, want 1", runs)
	}
	if got := b.sink.reasons(); len(got) != 1 || got[0] != lambdaidem.ReasonOutcomeUnknown {
		t.Fatalf("dead letters %v, want [outcome_unknown]", got)
	}
	if r := b.record(t, "m1"); r.Status != lambdaidem.StatusDeadLettered || r.DeadLetterReason != lambdaidem.ReasonOutcomeUnknown {
		t.Fatalf("record %s/%s, want DEAD_LETTERED/outcome_unknown", r.Status, r.DeadLetterReason)
	}
}

func TestWrapAtMostOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sim := crashSim{b}
	opts := b.wrapOpts(lambdaidem.WithAtMostOnce(), lambdaidem.WithLease(time.Minute), lambdaidem.WithKeyJSONField("id"))
	crashing := lambdaidem.Wrap(b.store, func(context.Context, order) (string, error) { sim.crash(); return "charged", nil }, opts...)
	_, _ = crashing(context.Background(), order{ID: "p1"})
	sim.revive()
	b.clock.Advance(2 * time.Minute)
	ran := false
	pay := lambdaidem.Wrap(b.store, func(context.Context, order) (string, error) { ran = true; return "charged", nil }, opts...)
	if _, err := pay(context.Background(), order{ID: "p1"}); !errors.Is(err, lambdaidem.ErrOutcomeUnknown) || !errors.Is(err, lambdaidem.ErrDeadLettered) {
		t.Fatalf("err = %v, want ErrOutcomeUnknown", err)
	}
	if _, err := pay(context.Background(), order{ID: "p1"}); !errors.Is(err, lambdaidem.ErrOutcomeUnknown) {
		t.Fatalf("second call: %v, want ErrOutcomeUnknown", err)
	}
	if ran {
		t.Fatal("at-most-once ran the payment again")
	}
}

func TestWrapAtMostOnceDeadlineCancelIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world()
	entered := make(chan struct{})
	var runs int
	f := lambdaidem.Wrap(b.store, func(ctx context.Context, id string) (string, error) {
		runs++
		close(entered)
		<-ctx.Done()
		return "", ctx.Err()
	}, b.wrapOpts(lambdaidem.WithAtMostOnce(), lambdaidem.WithWrapKey(func(id string) (string, error) { return id, nil }))...)
	ctx, cancel := w.ctx(30 * time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { _, err := f(ctx, "pay-1"); errc <- err }()
	<-entered
	w.advance(30*time.Second - lambdaidem.DefaultDeadlineMargin)
	if err := <-errc; !errors.Is(err, lambdaidem.ErrOutcomeUnknown) {
		t.Fatalf("got %v, want ErrOutcomeUnknown", err)
	}
	if _, err := f(context.Background(), "pay-1"); !errors.Is(err, lambdaidem.ErrOutcomeUnknown) || runs != 1 {
		t.Fatalf("repeat: %v after %d runs, want ErrOutcomeUnknown after 1", err, runs)
	}
}

// In at-most-once mode a call that panics has an unknown outcome, like a
// crash; an error that declares nothing happened (NotApplied) stays
// retryable.
func TestWrapPanicAtMostOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var runs atomic.Int32
	f := lambdaidem.Wrap(b.store, func(ctx context.Context, o order) (string, error) {
		runs.Add(1)
		switch o.ID {
		case "panics":
			panic("half-way through the payment")
		case "fails":
			if runs.Load() == 2 {
				return "", lambdaidem.NotApplied(errors.New("declined before charging"))
			}
		}
		return "ok", nil
	}, b.wrapOpts(lambdaidem.WithKeyJSONField("id"), lambdaidem.WithAtMostOnce())...)
	for range 2 {
		if _, err := f(context.Background(), order{ID: "panics"}); !errors.Is(err, lambdaidem.ErrOutcomeUnknown) {
			t.Fatalf("panicking call: %v, want ErrOutcomeUnknown", err)
		}
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("a panicked call ran again (%d runs)", n)
	}
	if _, err := f(context.Background(), order{ID: "fails"}); err == nil || errors.Is(err, lambdaidem.ErrOutcomeUnknown) {
		t.Fatalf("failing call: %v, want its own error", err)
	}
	if out, err := f(context.Background(), order{ID: "fails"}); err != nil || out != "ok" {
		t.Fatalf("retry after a reported failure: %q %v", out, err)
	}
}

// In at-most-once mode a call that gives up because its context ended has
// an unknown outcome: it is never made retryable. In the default mode it is.
func TestWrapContextEndedAtMostOnce(t *testing.T) {
	t.Parallel()
	for _, atMostOnce := range []bool{true, false} {
		t.Run(fmt.Sprintf("atMostOnce=%v", atMostOnce), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			var runs atomic.Int32
			entered := make(chan struct{}, 1)
			opts := b.wrapOpts(lambdaidem.WithKeyJSONField("id"))
			if atMostOnce {
				opts = append(opts, lambdaidem.WithAtMostOnce())
			}
			f := lambdaidem.Wrap(b.store, func(ctx context.Context, o order) (string, error) {
				if runs.Add(1) > 1 {
					return "second run", nil
				}
				entered <- struct{}{}
				<-ctx.Done() // the payment is in flight when the context ends
				return "", ctx.Err()
			}, opts...)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { _, err := f(ctx, order{ID: "o1"}); done <- err }()
			<-entered
			cancel()
			err := <-done
			_, again := f(context.Background(), order{ID: "o1"})
			r := b.record(t, "o1")
			if atMostOnce {
				if !errors.Is(err, lambdaidem.ErrOutcomeUnknown) || !errors.Is(again, lambdaidem.ErrOutcomeUnknown) {
					t.Fatalf("calls: %v / %v, want ErrOutcomeUnknown", err, again)
				}
				if r.Status != lambdaidem.StatusDeadLettered || r.DeadLetterReason != lambdaidem.ReasonOutcomeUnknown {
					t.Fatalf("record %s/%s, want DEAD_LETTERED/outcome_unknown", r.Status, r.DeadLetterReason)
				}
				if n := runs.Load(); n != 1 {
					t.Fatalf("ran %d times in at-most-once mode", n)
				}
				return
			}
			if !errors.Is(err, context.Canceled) || again != nil || runs.Load() != 2 || r.Status != lambdaidem.StatusCompleted {
				t.Fatalf("at-least-once: %v / %v, runs %d, status %s; want a retry that runs", err, again, runs.Load(), r.Status)
			}
		})
	}
}
