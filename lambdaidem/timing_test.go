package lambdaidem_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

func TestRuntimeDrivesTheHandlersDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world()
	entered := make(chan time.Time, 1)
	h := lambdaidem.SQS(b.store, func(ctx context.Context, _ events.SQSMessage) error {
		dl, _ := ctx.Deadline()
		entered <- dl
		<-ctx.Done()
		return ctx.Err()
	}, b.opts()...)
	ctx, cancel := w.ctx(30 * time.Second)
	defer cancel()
	start := w.Now()
	done := make(chan events.SQSEventResponse, 1)
	go func() { resp, _ := h(ctx, batch(msg("m1", "x"))); done <- resp }()
	dl := <-entered
	if want := start.Add(30*time.Second - lambdaidem.DefaultDeadlineMargin); !dl.Equal(want) {
		t.Fatalf("handler deadline %v, want %v (the Runtime's deadline minus the margin)", dl, want)
	}
	w.advance(30*time.Second - lambdaidem.DefaultDeadlineMargin - time.Second)
	select {
	case <-done:
		t.Fatal("the handler's context ended before the Runtime's deadline")
	default:
	}
	w.advance(time.Second)
	wantFailed(t, <-done, "m1")
	if r := b.record(t, "m1"); r.Status != lambdaidem.StatusFailed || r.LastError != context.DeadlineExceeded.Error() {
		t.Fatalf("record %s %q, want FAILED with the deadline error", r.Status, r.LastError)
	}
}

func TestDeadlineMargin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	deadline := time.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	var handlerDeadline time.Time
	h := lambdaidem.SQS(b.store, b.counting(func(ctx context.Context, m events.SQSMessage) error {
		handlerDeadline, _ = ctx.Deadline()
		return nil
	}), b.opts(lambdaidem.WithDeadlineMargin(5*time.Second))...)
	if _, err := h(ctx, batch(msg("m1", "a"))); err != nil {
		t.Fatal(err)
	}
	if handlerDeadline.After(deadline.Add(-5 * time.Second)) {
		t.Fatalf("handler deadline %v is not 5s before the invocation's %v", handlerDeadline, deadline)
	}
	// With less than the margin left, no record is claimed.
	b.clock.Set(deadline.Add(-4 * time.Second))
	resp, _ := h(ctx, batch(msg("m2", "b")))
	wantFailed(t, resp, "m2")
	if b.calls.get("m2") != 0 {
		t.Fatal("a record was started inside the margin")
	}
	if _, err := b.store.Get(context.Background(), idemstore.GetRequest{Namespace: ns, Key: "m2", Now: b.clock.Now()}); !errors.Is(err, idemstore.ErrNotFound) {
		t.Fatalf("m2 was claimed inside the margin: %v", err)
	}
}

// A lease at or below the default margin scales the margin to a quarter of
// the lease; an explicit margin that leaves no time is rejected.
func TestShortLeaseScalesTheMarginOrIsRejected(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world()
	var left time.Duration
	h := lambdaidem.SQS(b.store, func(ctx context.Context, _ events.SQSMessage) error {
		dl, _ := ctx.Deadline()
		left = dl.Sub(w.Now())
		return ctx.Err()
	}, b.opts(lambdaidem.WithLease(time.Second))...)
	ctx, cancel := w.ctx(30 * time.Second)
	defer cancel()
	wantFailed(t, mustHandle(t, h, ctx, batch(msg("m1", "x"))))
	if left != 750*time.Millisecond {
		t.Fatalf("handler had %v, want 750ms (a 1s lease less a quarter)", left)
	}
	for _, lease := range []time.Duration{time.Second, 5 * time.Second} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("WithDeadlineMargin(5s) with WithLease(%v) was accepted", lease)
				}
			}()
			lambdaidem.SQS(b.store, ok, b.opts(lambdaidem.WithLease(lease), lambdaidem.WithDeadlineMargin(5*time.Second))...)
		}()
	}
}

// A retention for unfinished records shorter than the lease is raised, so
// a held record is never forgotten and claimed afresh by another instance;
// a heartbeat's extensions carry the expiry along.
func TestUnfinishedRecordOutlivesItsLease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world()
	entered, release := make(chan struct{}), make(chan struct{})
	opts := []lambdaidem.Option{lambdaidem.WithLease(time.Minute), lambdaidem.WithUnfinishedRetention(10 * time.Second), lambdaidem.WithHeartbeat(10 * time.Second)}
	h := lambdaidem.SQS(b.store, b.counting(func(context.Context, events.SQSMessage) error {
		close(entered)
		<-release
		return nil
	}), b.opts(opts...)...)
	ctx, cancel := w.ctx(0)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); _, _ = h(ctx, batch(msg("m1", "x"))) }()
	<-entered
	rec, err := b.store.Get(context.Background(), idemstore.GetRequest{Namespace: ns, Key: "m1", Now: w.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if !rec.ExpiresAt.After(rec.LeaseUntil.Add(lambdaidem.DefaultGrace)) {
		t.Fatalf("record expires %v, before its lease ends (%v) plus the grace", rec.ExpiresAt, rec.LeaseUntil)
	}
	w.advance(50 * time.Second) // five extensions
	rec, err = b.store.Get(context.Background(), idemstore.GetRequest{Namespace: ns, Key: "m1", Now: w.Now()})
	if err != nil {
		t.Fatalf("the record was forgotten while its lease was being extended: %v", err)
	}
	if !rec.ExpiresAt.After(rec.LeaseUntil.Add(lambdaidem.DefaultGrace)) {
		t.Fatalf("after extensions the record expires %v, before its lease ends (%v) plus the grace", rec.ExpiresAt, rec.LeaseUntil)
	}
	// Another instance is turned away.
	other := lambdaidem.SQS(b.store, b.counting(ok), b.opts(opts...)...)
	octx, ocancel := w.ctx(0)
	defer ocancel()
	resp, _ := other(octx, batch(redelivered(msg("m1", "x"), 2)))
	wantFailed(t, resp, "m1")
	close(release)
	<-done
	if n := b.calls.get("m1"); n != 1 {
		t.Fatalf("handler ran %d times while one lease was held", n)
	}
}
