package lambdaidem

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/lambdaidem/go-lambdaidem/internal/mutant"
)

// heartbeat extends the lease every interval while the handler runs. A
// refused extension cancels the handler with ErrLeaseLost; a store error is
// retried at the next tick (the lease may still be long enough).
type heartbeat struct {
	e      *engine
	t      timing
	ctx    context.Context
	lease  Lease
	length time.Duration
	cancel context.CancelCauseFunc
	// granted is told each extension the store accepted: written at now,
	// the lease now ends at until.
	granted func(now, until time.Time)

	mu      sync.Mutex
	stopped bool
	stopT   func() bool
}

// start begins the heartbeat and returns the function that stops it and
// waits for a tick in flight. Without a Runtime a goroutine ticks; with one,
// each tick is a Runtime timer that arms the next, so a single-threaded
// simulator can drive it.
func (hb *heartbeat) start() (stop func()) {
	if hb.t.rt != nil {
		hb.arm()
		return func() {
			hb.mu.Lock()
			hb.stopped = true
			if hb.stopT != nil {
				hb.stopT()
			}
			hb.mu.Unlock()
		}
	}
	done, quit := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick, stopTick := hb.e.c.ticker(hb.e.c.heartbeat)
		defer stopTick()
		for {
			select {
			case <-quit:
				return
			case <-tick:
			}
			if !hb.beat() {
				return
			}
		}
	}()
	return func() { close(quit); <-done }
}

// arm sets the Runtime timer of the next tick.
func (hb *heartbeat) arm() {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	if hb.stopped {
		return
	}
	hb.stopT = hb.t.rt.AfterFunc(hb.e.c.heartbeat, func() {
		hb.mu.Lock()
		stopped := hb.stopped
		hb.mu.Unlock()
		if !stopped && hb.beat() {
			hb.arm()
		}
	})
}

// beat writes one extension; it reports whether to keep beating.
func (hb *heartbeat) beat() bool {
	e := hb.e
	now := hb.t.now()
	rctx, rcancel := hb.t.withTimeout(hb.ctx, max(e.c.heartbeat, time.Second))
	until := now.Add(hb.length)
	// The record's expiry moves with the lease, so it is never forgotten
	// while held (unfinished retention exceeds the lease plus the grace).
	err := e.store.Extend(rctx, ExtendRequest{Lease: hb.lease, Now: now, LeaseUntil: until,
		ExpiresAt: e.retentionUntil(now, false)})
	rcancel()
	ignoreRefusal := mutant.On("heartbeat-refusal-ignored") // the bug: a refused extension does not cancel the handler
	switch {
	case errors.Is(err, ErrLeaseLost) && ignoreRefusal:
		return true
	case errors.Is(err, ErrLeaseLost):
		e.log(hb.ctx, slog.LevelWarn, "lambdaidem: lease lost while the handler runs",
			slog.String("key", hb.lease.Key), slog.Int("attempt", hb.lease.Attempt))
		hb.cancel(err)
		return false
	case err != nil:
		e.log(hb.ctx, slog.LevelWarn, "lambdaidem: could not extend lease",
			slog.String("key", hb.lease.Key), slog.Any("error", err))
	default:
		hb.granted(now, until)
	}
	return true
}
