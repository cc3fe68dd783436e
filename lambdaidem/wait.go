package lambdaidem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/lambdaidem/go-lambdaidem/internal/mutant"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// The poll schedule of WithWaitForCompletion: the first interval between
// two reads of the record is WaitPollStart, each next one twice the one
// before, up to WaitPollCap. Each pause is drawn at random from the second
// half of its interval, so waiters that started together spread out. A
// wait therefore reads the record at most 5 times in its first 0.8 s and
// at most twice a second after that (4/3 a second on average), and learns
// that the run ended at most one pause, at most WaitPollCap, after it did.
const (
	WaitPollStart = 50 * time.Millisecond
	WaitPollCap   = time.Second
)

// WithWaitForCompletion makes Wrap (and httpidem, through its
// WithWrapOptions) wait for a run of the same key and payload that is in
// progress elsewhere, for up to limit, instead of returning an
// *InProgressError (httpidem: 409) at once. Off by default; a limit of zero
// or less turns it off.
//
// A call whose claim is refused because another holder's lease is live
// reads the record (Store.Get, one consistent read) on the schedule of
// WaitPollStart and WaitPollCap until the run ends. When it ends, the call
// answers as a repeat would, from what the store holds, without running the
// function:
//   - completed: the stored result, as a replay (httpidem: the stored
//     response, marked replayed); ErrResultNotStored when the result could
//     not be stored; ErrLateReplay when its result retention has ended;
//   - failed: a *RunFailedError with the failure as the store recorded it
//     (the text of the error the first call returned). The key stays
//     retryable: the next call runs the function again;
//   - dead-lettered: ErrDeadLettered (ErrOutcomeUnknown in at-most-once
//     mode).
//
// If the run's lease runs out with no outcome (its holder crashed or ran
// out of time), or the record is gone (expired, forgotten), the call
// claims the key and runs the function itself, as a repeat after the lease
// would (with WithAtMostOnce it returns ErrOutcomeUnknown instead). If the
// key holds another payload by then (the record expired or was forgotten,
// and a call with another payload claimed it), the call returns
// ErrKeyConflict. A call with another payload than the run in progress
// never waits: it gets ErrKeyConflict at once.
//
// The wait ends at the first of: limit after the call's claim was refused;
// the end of the call's context (its deadline or cancellation); the
// invocation's deadline less its margin (WithDeadlineMargin). If the run is
// still in progress then, the call returns an *InProgressError whose
// Waited says how long it waited; when the context ended, the error also
// wraps the context's error. If the last read failed, the call returns
// that read's error (ErrStoreUnavailable) instead: whether the run ended is
// not known.
//
// The SQS handler refuses the option when it is built: it panics with a
// *ConfigError wrapping ErrUnsupportedOption and ErrWaitUnsupported. An
// SQS message whose key is held elsewhere is made visible again when that
// lease ends, which is the queue's own way of waiting. A negative limit is
// refused too (ErrInvalidOption); zero turns waiting off.
func WithWaitForCompletion(limit time.Duration) Option {
	return option("WithWaitForCompletion", whenf(limit < 0, "a negative limit (%s)", limit), func(c *config) { c.wait = limit })
}

// held reports whether rec is a run of the same payload under a live
// lease: what a call with WithWaitForCompletion waits for.
func (e *engine) held(rec idemstore.Record, hash string, now time.Time) bool {
	return rec.Status == StatusInProgress && rec.PayloadHash == hash && !rec.LeaseExpired(now, e.c.grace)
}

// waiter is one call's wait for a run in progress. Its bound, its pauses
// and the lease decisions are measured by the engine's one clock.
type waiter struct {
	e        *engine
	t        timing
	start    time.Time
	end      time.Time // the bound, or the deadline less the margin
	interval time.Duration
	polls    int
	lastErr  error // the last read's error, nil once a read succeeds
}

// waitFor starts a call's wait. It is called once per call: a wait that
// claims the key and finds it held again keeps its bound.
func (e *engine) waitFor(t timing) *waiter {
	start := t.now()
	end := start.Add(e.c.wait)
	if !t.deadline.IsZero() {
		end = minTime(end, t.deadline.Add(-t.margin))
	}
	return &waiter{e: e, t: t, start: start, end: end, interval: WaitPollStart}
}

// waitOutcome is what a wait found.
type waitOutcome int

const (
	// waitSettled: the run ended with an outcome; answer from the record.
	waitSettled waitOutcome = iota
	// waitClaim: the key is free to claim (the lease ran out, the record
	// is gone); claim it, as a repeat would.
	waitClaim
)

// wait reads the record on the poll schedule until it is no longer held.
// rec is the record the refused claim returned. It returns the record
// found and what to do with it, or the error that ended the wait.
func (wt *waiter) wait(ctx context.Context, rec idemstore.Record, key, hash string) (idemstore.Record, waitOutcome, error) {
	e, t := wt.e, wt.t
	for {
		now := t.now()
		if !now.Before(wt.end) {
			return rec, 0, wt.ended(ctx, rec)
		}
		pause := wt.pause()
		// Wake when the lease may be taken over, so a run whose holder
		// crashed is taken over without delay.
		if untilTakeover := rec.LeaseUntil.Add(e.c.grace).Sub(now) + time.Millisecond; untilTakeover < pause {
			pause = max(untilTakeover, 0)
		}
		pause = min(pause, wt.end.Sub(now))
		if !t.rt.Sleep(ctx, pause) {
			return rec, 0, wt.ended(ctx, rec)
		}
		wt.polls++
		got, err := e.store.Get(ctx, idemstore.GetRequest{Namespace: e.c.namespace, Key: key, Now: t.now()})
		switch {
		case errors.Is(err, idemstore.ErrNotFound):
			return rec, waitClaim, nil
		case err != nil:
			wt.lastErr = err
			if ctx.Err() != nil {
				return rec, 0, wt.ended(ctx, rec)
			}
			continue
		}
		wt.lastErr = nil
		rec = got
		switch now := t.now(); {
		case e.held(rec, hash, now):
			continue
		case rec.Status == StatusInProgress && rec.PayloadHash == hash:
			return rec, waitClaim, nil // the lease ran out: take it over
		}
		return rec, waitSettled, nil
	}
}

// pause returns the next pause: a random point in the second half of the
// current interval, which then doubles up to the cap.
func (wt *waiter) pause() time.Duration {
	d := wt.interval
	wt.interval = min(2*wt.interval, WaitPollCap)
	return d/2 + time.Duration(wt.t.int64N(int64(d/2)+1))
}

// waited is how long the call has waited so far.
func (wt *waiter) waited() time.Duration { return wt.t.now().Sub(wt.start) }

// ended is the error of a wait that ended with the run still in progress
// (as far as the call knows).
func (wt *waiter) ended(ctx context.Context, rec idemstore.Record) error {
	waited := wt.waited()
	if wt.lastErr != nil && ctx.Err() == nil {
		return fmt.Errorf("lambdaidem: waited %s for the run in progress; the last read of its record failed: %w", waited.Round(time.Millisecond), wt.lastErr)
	}
	ip := &InProgressError{RetryAfter: max(rec.LeaseUntil.Add(wt.e.c.grace).Sub(wt.t.now()), 0), Waited: waited}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("lambdaidem: stopped waiting: %w: %w", err, ip)
	}
	return ip
}

// logged writes the wait's line: how long it waited, how many reads it
// made and how it ended. It is where the wait's figures leave the engine.
func (wt *waiter) logged(ctx context.Context, key string, next waitOutcome, err error) {
	if !wt.e.c.logger.Enabled(ctx, slog.LevelDebug) {
		return
	}
	ended := "the run ended"
	switch {
	case err != nil:
		ended = "the wait ended first"
	case next == waitClaim:
		ended = "the key is free to claim"
	}
	wt.e.log(ctx, slog.LevelDebug, "lambdaidem: waited for the run in progress",
		slog.String("namespace", wt.e.c.namespace), slog.String("key", key),
		slog.Duration("waited", wt.waited()), slog.Int("reads", wt.polls), slog.String("ended", ended))
}

// settle answers a call from the record of the run it waited for, which
// is no longer in progress: the failure it recorded, or what a repeat
// gets (replay).
func (w *wrapper[In, Out]) settle(t timing, rec idemstore.Record, hash, key string, r *RecordReport) (Out, error) {
	var zero Out
	if rec.Status == StatusFailed && rec.PayloadHash == hash {
		if mutant.On("waiter-answers-failed-run-as-success") {
			// The bug: a run that is no longer in progress is taken for
			// done, and the waiter answers with a result nobody stored.
			r.Outcome = OutcomeDuplicate
			return zero, nil
		}
		r.Outcome = OutcomeFailed
		r.Err = &RunFailedError{Key: key, Attempt: rec.Attempts, Message: rec.LastError}
		return zero, r.Err
	}
	return w.replay(t, rec, hash, key, r)
}
