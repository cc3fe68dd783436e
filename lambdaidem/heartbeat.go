package lambdaidem

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/lambdaidem/go-lambdaidem/internal/mutant"
	"github.com/lambdaidem/go-lambdaidem/internal/seam"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
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
	timer   seam.Timer
}

// start begins the heartbeat and returns the function that stops it. Each
// tick is a timer of the clock that arms the next once its extension was
// written, so ticks never overlap and a stopped heartbeat arms nothing.
func (hb *heartbeat) start() (stop func()) {
	hb.arm()
	return func() {
		hb.mu.Lock()
		hb.stopped = true
		if hb.timer != nil {
			hb.timer.Stop()
		}
		hb.mu.Unlock()
	}
}

// arm sets the timer of the next tick.
func (hb *heartbeat) arm() {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	if hb.stopped {
		return
	}
	hb.timer = hb.t.rt.AfterFunc(hb.e.c.heartbeat, hb.tick)
}

// tick writes one extension and arms the next, unless stopped.
func (hb *heartbeat) tick() {
	hb.mu.Lock()
	stopped := hb.stopped
	hb.mu.Unlock()
	if !stopped && hb.beat() {
		hb.arm()
	}
}

// beat writes one extension; it reports whether to keep beating.
func (hb *heartbeat) beat() bool {
	e := hb.e
	now := hb.t.now()
	rctx, rcancel := hb.t.withTimeout(hb.ctx, max(e.c.heartbeat, time.Second))
	until := now.Add(hb.length)
	if mutant.On("heartbeat-never-moves-lease") {
		until = hb.lease.Until // the bug: each extension asks for the end the claim granted
	}
	// The record's expiry moves with the lease, so it is never forgotten
	// while held (unfinished retention exceeds the lease plus the grace).
	err := e.store.Extend(rctx, idemstore.ExtendRequest{Lease: hb.lease, Now: now, LeaseUntil: until,
		ExpiresAt: e.retentionUntil(now, false)})
	rcancel()
	hb.mu.Lock()
	stopped := hb.stopped
	hb.mu.Unlock()
	ignoreRefusal := mutant.On("heartbeat-refusal-ignored") // the bug: a refused extension does not cancel the handler
	switch {
	case stopped:
		// The handler returned while the extension was on its way: its
		// outcome is being recorded, whatever the store said.
		return false
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
		if mutant.On("heartbeat-stops-after-error") {
			return false // the bug: one failed extension ends the heartbeat; the lease runs out under a live handler
		}
	default:
		hb.granted(now, until)
	}
	return true
}
