package lambdaidem

import (
	"context"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// changeVisibility asks that msg become visible again after d (RetryAfter,
// backoff, another holder's lease), clamped to SQS's limits. Without a
// VisibilityChanger the queue's own timeout applies; a change that fails
// is noted in the record's report.
func (e *engine) changeVisibility(ctx context.Context, t timing, msg events.SQSMessage, d time.Duration, r *RecordReport) {
	if e.c.visibility == nil {
		return
	}
	d = min(max(d, 0), 12*time.Hour)
	dctx, cancel := e.detached(ctx, t)
	defer cancel()
	if err := e.c.visibility.ChangeVisibility(dctx, msg, d); err != nil {
		// The message comes back when the queue's own visibility timeout
		// ends, not when asked (RetryAfter, backoff): the report says so.
		r.VisibilityErr = err
		e.log(ctx, slog.LevelWarn, "lambdaidem: could not change visibility",
			slog.String("message_id", r.MessageID), slog.Duration("timeout", d), slog.Any("error", err))
		return
	}
	r.RetryDelay = d
}
