package lambdaidem

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
)

// Wrap makes fn idempotent: the first call with a key runs fn and stores its
// result (JSON); later calls with the same key and payload get the stored
// result without running fn. A call while another holds the key returns an
// *InProgressError, the same key with a different payload ErrKeyConflict.
// The default key is the SHA-256 of the input's JSON encoding; set one with
// WithKeyJSONField or WithWrapKey. The result is accepted by lambda.Start.
// Wrap does not use the local cache (WithCache), which holds no results.
func Wrap[In, Out any](store Store, fn func(context.Context, In) (Out, error), opts ...Option) func(context.Context, In) (Out, error) {
	if fn == nil {
		panic("lambdaidem: nil function")
	}
	c := newConfig(opts)
	c.useHash(false)
	w := &wrapper[In, Out]{engine: newEngine(store, c), fn: fn}
	switch k := c.wrapKey.(type) {
	case nil:
		if c.jsonKey != nil {
			w.key = func(_ In, b []byte) (string, error) { return c.jsonKey(b) }
		} else {
			w.key = func(_ In, b []byte) (string, error) {
				sum := sha256.Sum256(b)
				return hex.EncodeToString(sum[:]), nil
			}
		}
	case func(In) (string, error):
		w.key = func(in In, _ []byte) (string, error) { return k(in) }
	default:
		panic(fmt.Sprintf("lambdaidem: WithWrapKey function %T does not take the wrapped input type", c.wrapKey))
	}
	return w.call
}

type wrapper[In, Out any] struct {
	*engine
	fn  func(context.Context, In) (Out, error)
	key func(In, []byte) (string, error)
}

func (w *wrapper[In, Out]) call(ctx context.Context, in In) (Out, error) {
	var zero Out
	b, err := json.Marshal(in)
	if err != nil {
		return zero, fmt.Errorf("%w: input is not JSON-encodable: %v", ErrMissingKey, err)
	}
	key, err := w.key(in, b)
	if err == nil && key == "" {
		err = ErrMissingKey
	}
	if err != nil {
		if !errors.Is(err, ErrMissingKey) {
			err = fmt.Errorf("%w: %w", ErrMissingKey, err)
		}
		return zero, err
	}
	key = storedKey(key)
	hash, err := w.c.hash(b)
	if err != nil {
		return zero, fmt.Errorf("%w: %w", ErrMissingKey, err)
	}
	t := w.timing(ctx)
	now := t.now()
	if !t.canClaim(now) {
		return zero, fmt.Errorf("lambdaidem: too little time left before the deadline to start: %w", context.DeadlineExceeded)
	}
	cr, err := w.store.Claim(ctx, ClaimRequest{
		Namespace: w.c.namespace, Key: key, PayloadHash: hash, Now: now,
		LeaseUntil: w.leaseUntil(t, now), Grace: w.c.grace, ExpiresAt: w.retentionUntil(now, false),
		NoTakeover: w.c.atMostOnce,
	})
	if err != nil {
		return zero, err
	}
	if !cr.Claimed {
		rec := cr.Record
		if w.c.atMostOnce && rec.Status == StatusInProgress && rec.PayloadHash == hash && rec.LeaseExpired(now, w.c.grace) {
			return zero, w.outcomeUnknown(ctx, t, rec, key, "lease ran out without a recorded outcome")
		}
		return w.replay(t, rec, hash, key)
	}

	st := &recordState{lease: cr.Lease}
	var out Out
	ferr := w.runHandler(ctx, t, st, now, func(ctx context.Context) (err error) {
		out, err = w.fn(ctx, in)
		return err
	})

	dctx, dcancel := w.detached(ctx, t)
	defer dcancel()
	var calls RecordReport // Wrap reports nothing; retryStore needs somewhere to count
	if ferr == nil {
		result, merr := json.Marshal(out)
		switch {
		case merr != nil:
			ferr = fmt.Errorf("lambdaidem: result is not JSON-encodable: %w", merr)
		case len(result) > w.c.maxResultBytes:
			ferr = fmt.Errorf("%w: %d bytes, limit %d", ErrResultTooLarge, len(result), w.c.maxResultBytes)
		default:
			done := t.now()
			writes := st.takeWrites()
			req := CompleteRequest{Lease: cr.Lease, Result: result, ExpiresAt: w.retentionUntil(done, true), Writes: writes}
			if w.c.resultRetention < w.c.retention {
				req.ResultUntil = done.Add(w.c.resultRetention)
			}
			err := retryStore(dctx, &calls, func(ctx context.Context) error {
				req.Now = t.now()
				return w.store.Complete(ctx, req)
			})
			switch {
			case err == nil:
				return out, nil
			case len(writes) > 0 && (errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrStoreUnavailable)):
				// The writes commit with the completion, so they may not
				// have happened: the caller must not take this for success.
				// The record stays IN_PROGRESS (or is the new holder's).
				return zero, fmt.Errorf("lambdaidem: completion and its writes not confirmed: %w", err)
			case errors.Is(err, ErrLeaseLost), errors.Is(err, ErrStoreUnavailable):
				// fn's effect happened: return its result, never record a
				// failure after success.
				w.log(ctx, slog.LevelError, "lambdaidem: completion not recorded",
					slog.String("namespace", w.c.namespace), slog.String("key", key), slog.Any("error", err))
				return out, nil
			default:
				ferr = err
			}
		}
	}
	if w.c.atMostOnce && st.ctxEnded {
		// fn gave up because its context ended: its effect may have
		// happened, so the key must never run again.
		return zero, w.outcomeUnknown(ctx, t, cr.Record, key, fmt.Sprintf("returned after its context ended: %v", ferr))
	}
	done := t.now()
	if err := retryStore(dctx, &calls, func(ctx context.Context) error {
		return w.store.Fail(ctx, FailRequest{Lease: cr.Lease, Now: t.now(), Error: ferr.Error(), ExpiresAt: w.retentionUntil(done, false)})
	}); err != nil {
		w.log(ctx, slog.LevelError, "lambdaidem: could not record failure",
			slog.String("namespace", w.c.namespace), slog.String("key", key), slog.Any("error", err))
	}
	return zero, ferr
}

// replay answers a refused claim.
func (w *wrapper[In, Out]) replay(t timing, rec Record, hash, key string) (Out, error) {
	var zero Out
	now := t.now()
	switch {
	case rec.Status == StatusDeadLettered && rec.DeadLetterReason == ReasonOutcomeUnknown:
		return zero, fmt.Errorf("%w: key %q", ErrOutcomeUnknown, key)
	case rec.Status == StatusDeadLettered:
		return zero, fmt.Errorf("%w: key %q (%s)", ErrDeadLettered, key, rec.DeadLetterReason)
	case rec.PayloadHash != hash:
		return zero, fmt.Errorf("%w: key %q", ErrKeyConflict, key)
	case rec.Status == StatusCompleted:
		if rec.ResultExpired(now) {
			w.log(context.Background(), slog.LevelWarn, "lambdaidem: late replay",
				slog.String("namespace", w.c.namespace), slog.String("key", key))
			return zero, fmt.Errorf("%w: key %q", ErrLateReplay, key)
		}
		var out Out
		if err := json.Unmarshal(rec.Result, &out); err != nil {
			return zero, fmt.Errorf("lambdaidem: stored result of key %q does not decode: %w", key, err)
		}
		return out, nil
	default:
		return zero, &InProgressError{RetryAfter: max(rec.LeaseUntil.Add(w.c.grace).Sub(now), 0)}
	}
}

// outcomeUnknown marks an attempt whose outcome is unknown in at-most-once
// mode (abandoned, or ended by its context), under that attempt's lease,
// fencing its late completion, and reports ErrOutcomeUnknown.
func (w *wrapper[In, Out]) outcomeUnknown(ctx context.Context, t timing, rec Record, key, why string) error {
	dctx, cancel := w.detached(ctx, t)
	defer cancel()
	var calls RecordReport // Wrap reports nothing; retryStore needs somewhere to count
	now := t.now()
	cause := fmt.Errorf("%w: key %q: attempt %d %s", ErrOutcomeUnknown, key, rec.Attempts, why)
	err := retryStore(dctx, &calls, func(ctx context.Context) error {
		return w.store.DeadLetter(ctx, DeadLetterRequest{
			Lease: leaseOf(rec), Now: t.now(), Reason: ReasonOutcomeUnknown, Error: cause.Error(),
			DeadLetterMessageID: "none", ExpiresAt: w.retentionUntil(now, false),
		})
	})
	if err != nil {
		return errors.Join(cause, err)
	}
	w.log(ctx, slog.LevelError, "lambdaidem: outcome unknown; not running again",
		slog.String("namespace", w.c.namespace), slog.String("key", key), slog.Int("attempt", rec.Attempts))
	return cause
}
