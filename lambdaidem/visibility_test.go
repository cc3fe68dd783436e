package lambdaidem_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

func TestRetryAfterAndBackoffChangeVisibility(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := lambdaidem.SQS(b.store, func(_ context.Context, m events.SQSMessage) error {
		if m.Body == "later" {
			return lambdaidem.RetryAfter(90*time.Second, errors.New("rate limited"))
		}
		return errors.New("plain")
	}, b.opts(lambdaidem.WithBackoff(lambdaidem.ExponentialBackoff(10*time.Second, time.Hour)))...)
	resp, _ := h(context.Background(), batch(msg("m1", "later"), redelivered(msg("m2", "plain"), 1)))
	wantFailed(t, resp, "m1", "m2")
	if d, _ := b.vis.get("m1"); d != 90*time.Second {
		t.Fatalf("RetryAfter visibility %v, want 90s", d)
	}
	if d, _ := b.vis.get("m2"); d != 10*time.Second {
		t.Fatalf("backoff after attempt 1: %v, want 10s", d)
	}
	_, _ = h(context.Background(), batch(redelivered(msg("m2", "plain"), 2)))
	if d, _ := b.vis.get("m2"); d != 20*time.Second {
		t.Fatalf("backoff after attempt 2: %v, want 20s", d)
	}
	bo := lambdaidem.ExponentialBackoff(time.Minute, 100*time.Hour)
	if bo(30) != 12*time.Hour {
		t.Fatalf("backoff is not capped at SQS's 12 hours: %v", bo(30))
	}
}

// refusingVisibility fails every visibility change, as an unresolvable
// queue URL or a missing permission would.
type refusingVisibility struct{}

var errNoQueue = errors.New("queue does not exist")

func (refusingVisibility) ChangeVisibility(context.Context, events.SQSMessage, time.Duration) error {
	return errNoQueue
}

// TestFailedVisibilityChangeIsReported: when RetryAfter's visibility
// change fails, the message comes back on the queue's own timeout, not
// when asked; the record's report says so instead of only a log line.
func TestFailedVisibilityChangeIsReported(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var reports []lambdaidem.RecordReport
	h := lambdaidem.SQS(b.store, func(context.Context, events.SQSMessage) error {
		return lambdaidem.RetryAfter(time.Minute, errors.New("rate limited"))
	}, b.opts(
		lambdaidem.WithVisibility(refusingVisibility{}),
		lambdaidem.WithInvocationHook(func(r *lambdaidem.InvocationReport) { reports = append(reports, r.Records...) }),
	)...)
	resp, _ := h(context.Background(), batch(msg("m1", "x")))
	wantFailed(t, resp, "m1")
	if len(reports) != 1 || !errors.Is(reports[0].VisibilityErr, errNoQueue) {
		t.Fatalf("reports %+v; want the failed visibility change in VisibilityErr", reports)
	}
}
