package lambdaidem

import (
	"context"
	"log/slog"
	"time"
)

// engine is what SQS and Wrap share: the store, the options, the clock
// arithmetic and the retry-safe recording of outcomes.
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

func (e *engine) retentionUntil(now time.Time, finished bool) time.Time {
	if finished {
		return now.Add(e.c.retention)
	}
	return now.Add(e.c.unfinishedRetention)
}

// log writes one structured line if the level is enabled, so a quiet
// logger costs no allocations.
func (e *engine) log(ctx context.Context, level slog.Level, msg string, attrs ...slog.Attr) {
	if !e.c.logger.Enabled(ctx, level) {
		return
	}
	e.c.logger.LogAttrs(ctx, level, msg, attrs...)
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
