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
	if mutant.On("waiter-answers-expired-result") {
		// The bug: the run it waited for has only just ended, so its
		// result is taken as still kept.
		rec.ResultUntil = time.Time{}
	}
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
