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
)

// At most once: attempt 1 returns Poison but the DLQ send fails (the record
// is FAILED, its pending mark "poison" left on it). Attempt 2 runs the
// handler (the effect happens) and its container dies. Attempt 3 finds the
// lease abandoned: its outcome is unknown, and the copy goes to the DLQ as
// outcome_unknown, not with the stale "poison" (which redrive would send
// back by default, running the effect again): the failure cleared the mark.
func TestAtMostOnceTakeoverAfterAFailedDeadLetterSend(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var mu sync.Mutex
	var reps []*lambdaidem.InvocationReport
	calls := 0
	h := lambdaidem.SQS(b.store, func(ctx context.Context, m events.SQSMessage) error {
		calls++
		return lambdaidem.Poison(errors.New("bad data"))
	}, b.opts(lambdaidem.WithAtMostOnce(), lambdaidem.WithDeadLetterSink(b.sink), lambdaidem.WithLease(time.Minute), reportsOf(&reps, &mu))...)

	b.sink.err = errors.New("SQS unavailable")
	_, _ = h(context.Background(), batch(msg("m1", "x")))
	t.Logf("attempt 1: %s, record %s reason %q", reps[0].Records[0].Outcome, b.record(t, "m1").Status, b.record(t, "m1").DeadLetterReason)
	b.sink.err = nil

	// Attempt 2: another container claims the FAILED record, runs the
	// handler (its effect happens) and dies before recording anything.
	rec := b.record(t, "m1")
	cr, err := b.store.Claim(context.Background(), idemstore.ClaimRequest{Namespace: ns, Key: "m1", PayloadHash: rec.PayloadHash,
		MessageID: "m1", Now: b.clock.Now(), LeaseUntil: b.clock.Now().Add(time.Minute), NoTakeover: true, ExpiresAt: rec.ExpiresAt})
	if err != nil || !cr.Claimed {
		t.Fatalf("claim: %v %+v", err, cr)
	}
	b.clock.Advance(5 * time.Minute)

	_, _ = h(context.Background(), batch(redelivered(msg("m1", "x"), 3)))
	got := reps[1].Records[0]
	t.Logf("attempt 3: %s reason %s: %v", got.Outcome, got.Reason, got.Err)
	if got.Reason != lambdaidem.ReasonOutcomeUnknown {
		t.Errorf("an abandoned at-most-once attempt was dead-lettered as %q, not outcome_unknown: redrive sends it back by default and its effect repeats", got.Reason)
	}
}
