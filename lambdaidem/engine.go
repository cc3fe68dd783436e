package lambdaidem

import (
	"context"
	"log/slog"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// engine is what SQS and Wrap share: the store, the options, the cache of
// completed keys and the completions this container could not write. Its
// methods live with their concept: timing.go (deadlines and the clock),
// claim.go, handler.go (running the handler under the lease),
// heartbeat.go, retry.go (retrying store writes), unrecorded.go and
// visibility.go; this file holds the record's log line and its failure
// mark.
type engine struct {
	store      Store
	c          *config
	cache      *completedCache
	unrecorded *unrecordedCompletions
}

func newEngine(store Store, c *config) *engine {
	if store == nil {
		panic("lambdaidem: nil Store")
	}
	return &engine{store: store, c: c, cache: newCompletedCache(c.cacheSize, c.cacheTTL), unrecorded: newUnrecorded()}
}

// retentionUntil is when a record written at now may be forgotten: the
// key retention once finished, the unfinished retention before.
func (e *engine) retentionUntil(now time.Time, finished bool) time.Time {
	if finished {
		return now.Add(e.c.retention)
	}
	return now.Add(e.c.unfinishedRetention)
}

// failRecord marks the record FAILED (retryable) under the lease. If that
// cannot be written the lease runs out and the next claim takes over.
func (e *engine) failRecord(ctx context.Context, t timing, r *RecordReport, lease Lease, cause error) error {
	now := t.now()
	return retryStore(ctx, t, r, func(ctx context.Context) error {
		return e.store.Fail(ctx, idemstore.FailRequest{Lease: lease, Now: t.now(), Error: cause.Error(), ExpiresAt: e.retentionUntil(now, false)})
	})
}

// fail records a retryable failure, logging when it cannot be written
// (the lease then runs out and the next claim takes over).
func (e *engine) fail(ctx context.Context, t timing, lease Lease, cause error, r *RecordReport) {
	if err := e.failRecord(ctx, t, r, lease, cause); err != nil {
		e.log(ctx, slog.LevelError, "lambdaidem: could not record failure",
			slog.String("key", r.Key), slog.String("message_id", r.MessageID), slog.Any("error", err))
	}
}

// log writes one structured line if the level is enabled, so a quiet
// logger costs no allocations.
func (e *engine) log(ctx context.Context, level slog.Level, msg string, attrs ...slog.Attr) {
	if !e.c.logger.Enabled(ctx, level) {
		return
	}
	e.c.logger.LogAttrs(ctx, level, msg, attrs...)
}

// logged writes the record's one line and returns it.
func (e *engine) logged(ctx context.Context, level slog.Level, r RecordReport) RecordReport {
	if !e.c.logger.Enabled(ctx, level) {
		return r
	}
	attrs := []slog.Attr{
		slog.String("namespace", e.c.namespace),
		slog.String("key", r.Key),
		slog.String("message_id", r.MessageID),
		slog.Int("attempt", r.Attempt),
		slog.String("outcome", string(r.Outcome)),
		slog.Bool("acked", r.Acked),
	}
	if r.Reason != "" {
		attrs = append(attrs, slog.String("reason", string(r.Reason)))
	}
	if r.MessageGroupID != "" {
		attrs = append(attrs, slog.String("message_group_id", r.MessageGroupID))
	}
	if r.Err != nil {
		attrs = append(attrs, slog.String("error", r.Err.Error()))
	}
	e.c.logger.LogAttrs(ctx, level, "lambdaidem: record "+string(r.Outcome), attrs...)
	return r
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func minNonZero(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero():
		return a
	}
	return minTime(a, b)
}
