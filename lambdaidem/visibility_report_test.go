package lambdaidem_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

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
