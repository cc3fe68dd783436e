package integration_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

type payment struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

// TestTwoRetentionWindowsWithWrap: results are kept for an hour, keys for a
// day. Within the hour a repeat gets the stored result; after it, while the
// key is remembered, a repeat is a late replay (ErrLateReplay) and the
// function does not run; after the day the key is forgotten and a repeat
// is new work.
func TestTwoRetentionWindowsWithWrap(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var runs counter
	pay := lambdaidem.Wrap(e.store, func(_ context.Context, p payment) (string, error) {
		runs.inc()
		return "receipt-" + p.ID, nil
	}, e.wrapOpts(lambdaidem.WithKeyJSONField("id"), lambdaidem.WithRetention(24*time.Hour), lambdaidem.WithResultRetention(time.Hour))...)
	call := func() (string, error) { return pay(context.Background(), payment{ID: "p1", Amount: 10}) }

	t0 := e.clock.Now()
	if got, err := call(); err != nil || got != "receipt-p1" {
		t.Fatalf("first call: %q, %v", got, err)
	}
	r := e.record(t, "p1")
	// The store rounds stored times up to whole seconds; t0 is whole.
	if !r.ResultUntil.Equal(t0.Add(time.Hour)) || !r.ExpiresAt.Equal(t0.Add(24*time.Hour)) {
		t.Fatalf("record keeps its result until %s and its key until %s; want t0+1h and t0+24h (t0 %s)", r.ResultUntil, r.ExpiresAt, t0)
	}

	e.clock.Advance(30 * time.Minute)
	if got, err := call(); err != nil || got != "receipt-p1" || runs.get() != 1 {
		t.Fatalf("repeat within the result window: %q, %v after %d runs; want the stored result", got, err, runs.get())
	}

	e.clock.Advance(time.Hour) // t0+1h30: result expired, key remembered
	got, err := call()
	if !errors.Is(err, lambdaidem.ErrLateReplay) || got != "" {
		t.Fatalf("late repeat: %q, %v; want ErrLateReplay", got, err)
	}
	if runs.get() != 1 {
		t.Fatalf("function ran %d times, want 1: a late replay re-executed", runs.get())
	}
	if r := e.record(t, "p1"); r.Status != lambdaidem.StatusCompleted || r.Attempts != 1 {
		t.Fatalf("record %s after %d attempts; the late replay touched it", r.Status, r.Attempts)
	}

	e.clock.Advance(23 * time.Hour) // t0+24h30: the key is forgotten too
	if got, err := call(); err != nil || got != "receipt-p1" || runs.get() != 2 {
		t.Fatalf("repeat after the key's retention: %q, %v after %d runs; want new work", got, err, runs.get())
	}
	if r := e.record(t, "p1"); r.Fence.Generation == "" || r.Fence.Claim != 1 {
		t.Fatalf("fence %+v, want claim 1 of a fresh generation", r.Fence)
	}
}

// TestLateReplayOverSQS: the same windows on the SQS decorator. A late
// duplicate is acknowledged without running and reported as late_replay,
// which the metrics count apart from ordinary duplicates.
func TestLateReplayOverSQS(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var runs counter
	var rep reports
	h := lambdaidem.SQS(e.store, func(context.Context, events.SQSMessage) error {
		runs.inc()
		return nil
	}, e.opts(lambdaidem.WithRetention(24*time.Hour), lambdaidem.WithResultRetention(time.Hour), rep.hook())...)
	for i, step := range []time.Duration{0, 30 * time.Minute, time.Hour} {
		e.clock.Advance(step)
		resp, err := h(context.Background(), batch(message(fmt.Sprintf("m%d", i+1), "order-9", 1)))
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("delivery %d: failures %v, error %v", i+1, resp.BatchItemFailures, err)
		}
	}
	got := outcomes(rep.all())
	want := []lambdaidem.Outcome{lambdaidem.OutcomeProcessed, lambdaidem.OutcomeDuplicate, lambdaidem.OutcomeLateReplay}
	if !slices.Equal(got, want) {
		t.Fatalf("outcomes %v, want %v", got, want)
	}
	if runs.get() != 1 {
		t.Fatalf("handler ran %d times, want 1", runs.get())
	}
}
