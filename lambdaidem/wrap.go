package lambdaidem

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"

	"github.com/lambdaidem/go-lambdaidem/internal/mutant"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// notStoredPrefix starts the stored result of a key whose result could not
// be stored. JSON never starts with '!', so no real result can look like
// the marker.
const notStoredPrefix = "!lambdaidem: result not stored: "

// ResultNotStored reports whether a stored result is Wrap's mark for a
// result that could not be stored, and why. Tools that show records use
// it.
func ResultNotStored(result []byte) (reason string, ok bool) {
	r, ok := bytes.CutPrefix(result, []byte(notStoredPrefix))
	return string(r), ok
}

// NotStoredResult is the stored result that marks a completion whose
// result was not kept, saying why: a later Wrap call with the key gets
// ErrResultNotStored with the reason, and ResultNotStored reads it back.
// The operator tools store it when a person resolves an unknown outcome
// as applied (idemstore.ResolveRequest.Result): the effect happened, but
// no result was recorded.
func NotStoredResult(reason string) []byte { return notStoredMarker(errors.New(reason)) }

// maxNotStoredReason bounds the reason kept in the marker.
const maxNotStoredReason = 512

// notStoredMarker is the stored result of a call whose result could not be
// stored, saying why.
func notStoredMarker(why error) []byte {
	reason := why.Error()
	if len(reason) > maxNotStoredReason {
		reason = strings.ToValidUTF8(reason[:maxNotStoredReason], "") + "…"
	}
	return []byte(notStoredPrefix + reason)
}

// Wrap makes fn idempotent: the first call with a key runs fn and stores its
// result (JSON); later calls with the same key and payload get the stored
// result without running fn. A call while another holds the key returns an
// *InProgressError, or with WithWaitForCompletion waits for that run's
// outcome; the same key with a different payload returns ErrKeyConflict.
// The default key is the SHA-256 of the input's JSON encoding; set one with
// WithKeyJSONField or WithWrapKey. The result is accepted by lambda.Start.
// Wrap does not use the local cache (WithCache), which holds no results.
//
// A replay returns the stored JSON decoded into Out. Typed fields come
// back as they were; numbers held in interface values (any,
// map[string]any, []any) come back as json.Number, which keeps integers
// above 2^53 exact and encodes to the same JSON as the first call's
// result.
//
// Once fn has succeeded, Wrap never records a failure for the key:
//   - A result that cannot be stored (not JSON-encodable, larger than
//     WithMaxResultBytes or than the store can hold) completes the key
//     without a result: the first call returns fn's result, and a repeat
//     returns ErrResultNotStored without running fn again.
//   - If the completion cannot be recorded (the store is unavailable, the
//     lease was lost), the first call still returns fn's result and the
//     error is logged; the key stays in progress and a repeat after the
//     lease runs out runs fn again.
//   - With writes added by AddCompletionWrite the effect is those writes:
//     if they did not commit, or may not have, Wrap returns an error
//     wrapping ErrWritesNotCommitted instead of fn's result.
//
// A failed call's key stays retryable: the next call runs fn again. Two
// kinds of failure are never retried. An error that wraps
// OutcomeUnknown(err), in either mode, says fn cannot tell whether its
// effect happened. With WithAtMostOnce, so does every failure that does
// not declare the effect did not happen: an error that wraps neither
// NotApplied nor RetryAfter (after the context ended or not), a panic, a
// completion whose writes were refused or may not have committed. The key
// is then dead-lettered as outcome unknown and the call returns an error
// wrapping ErrOutcomeUnknown (and fn's error), as any later call with the
// key does; fn is never run again for it. Wrap has no dead-letter queue:
// Poison is a failure like any other, retryable (in at-most-once mode,
// like NotApplied, a declaration that nothing happened). Should the mark
// itself not be written (the store out of reach), the key stays in
// progress: in at-most-once mode a repeat after the lease writes it
// without running fn; in at-least-once mode a repeat after the lease runs
// fn again, as after a crash.
//
// An input holding a string that is not valid UTF-8 is refused with
// ErrMalformedBody (which wraps ErrMissingKey): its JSON encoding would be
// the same as another input's. So is an input with no JSON encoding.
func Wrap[In, Out any](store Store, fn func(context.Context, In) (Out, error), opts ...Option) func(context.Context, In) (Out, error) {
	if fn == nil {
		panic("lambdaidem: nil function")
	}
	c := newConfig(opts)
	c.check(handlerWrap, store)
	c.useHash(false)
	if c.hashFields != nil {
		c.hash = c.hashFields.hashIn // as for the key: json.Marshal's output is valid JSON
	}
	w := &wrapper[In, Out]{engine: newEngine(store, c), fn: fn}
	switch k := c.wrapKey.(type) {
	case nil:
		if f := c.keyField; f != nil {
			// The input's encoding comes from json.Marshal, which only
			// writes one valid JSON value: the key is read without
			// checking it again.
			w.key = func(_ In, b []byte) (string, error) { return f.keyIn(b) }
		} else {
			w.key = func(_ In, b []byte) (string, error) {
				sum := sha256.Sum256(b)
				return hex.EncodeToString(sum[:]), nil
			}
		}
	case func(In) (string, error):
		w.key = func(in In, _ []byte) (string, error) { return k(in) }
	default:
		panic(&ConfigError{Handler: handlerWrap, Option: "WithWrapKey",
			Err: fmt.Errorf("%w: the function %T does not take the wrapped input type", ErrInvalidOption, c.wrapKey)})
	}
	return w.call
}

type wrapper[In, Out any] struct {
	*engine
	fn  func(context.Context, In) (Out, error)
	key func(In, []byte) (string, error)
}

// identify derives the key and the payload hash of an input. A panic in
// the input's encoding, the key function or the hash function is an
// underivable key like any other, never a crash of the caller.
func (w *wrapper[In, Out]) identify(in In) (key, hash string, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w: %w", ErrMissingKey, &PanicError{Value: v, Stack: debug.Stack()})
		}
	}()
	b, err := json.Marshal(in)
	if err != nil {
		return "", "", fmt.Errorf("%w: input is not JSON-encodable: %v", ErrMalformedBody, err)
	}
	if err := checkEncodedInput(b); err != nil {
		return "", "", err
	}
	key, err = w.key(in, b)
	if err == nil && key == "" {
		err = ErrMissingKey
	}
	if err != nil {
		if !errors.Is(err, ErrMissingKey) {
			err = fmt.Errorf("%w: %w", ErrMissingKey, err)
		}
		return "", "", err
	}
	hash, err = w.c.hash(b)
	if err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrMissingKey, err)
	}
	return idemstore.StoredKey(key), storedHash(hash), nil
}

func (w *wrapper[In, Out]) call(ctx context.Context, in In) (Out, error) {
	key, hash, err := w.identify(in)
	if w.observed() {
		return w.observedCall(ctx, in, key, hash, err)
	}
	var r RecordReport // only counts, unless observed
	return w.run(ctx, in, key, hash, err, &r)
}

// observedCall is call with its observers told: the call is one record,
// whose report says what the call returned.
func (w *wrapper[In, Out]) observedCall(ctx context.Context, in In, key, hash string, kerr error) (Out, error) {
	ctx = w.recordStart(ctx, RecordInfo{Entry: w.c.entry, Namespace: w.c.namespace, Key: key, KeyErr: kerr})
	r := &RecordReport{Key: key}
	out, err := w.run(ctx, in, key, hash, kerr, r)
	r.Acked = err == nil
	w.recordEnd(ctx, r)
	return out, err
}

// run is one call once its key is derived (or not: kerr), noting its
// outcome in r.
func (w *wrapper[In, Out]) run(ctx context.Context, in In, key, hash string, kerr error, r *RecordReport) (Out, error) {
	var zero Out
	if kerr != nil {
		r.Outcome, r.Err = OutcomeMissingKey, kerr
		if errors.Is(kerr, ErrMalformedBody) {
			r.Outcome = OutcomeMalformedBody
		}
		return zero, kerr
	}
	t := w.timing(ctx)
	var wt *waiter // set once the call waits (WithWaitForCompletion)
	for {
		now := t.now()
		if !t.canClaim(now) {
			err := fmt.Errorf("lambdaidem: too little time left before the deadline to start: %w", context.DeadlineExceeded)
			r.Outcome, r.Err = OutcomeNotStarted, err
			return zero, err
		}
		r.StoreCalls++
		cr, err := w.store.Claim(ctx, w.claimRequest(t, key, hash, "", now))
		if err != nil {
			r.StoreErrors++
			r.Outcome, r.Err = OutcomeStoreError, err
			return zero, err
		}
		if cr.Claimed {
			r.Attempt, r.Takeover = cr.Lease.Attempt, cr.Previous == StatusInProgress
			return w.runClaimed(ctx, t, cr, key, now, in, r)
		}
		rec := cr.Record
		r.Attempt = rec.Attempts
		if w.c.atMostOnce && rec.Status == StatusInProgress && rec.PayloadHash == hash && rec.LeaseExpired(now, w.c.grace) {
			return zero, w.outcomeUnknown(ctx, t, rec, key, r)
		}
		if w.c.wait <= 0 || !w.held(rec, hash, now) {
			return w.replay(t, rec, hash, key, r)
		}
		// Another holder runs this key and payload: wait for its outcome.
		if wt == nil {
			wt = w.waitFor(t)
		}
		rec, next, err := wt.wait(ctx, rec, key, hash)
		wt.logged(ctx, key, next, err)
		r.Waited = wt.waited() // nothing else waits before the claim
		if err != nil {
			r.Outcome, r.Err = OutcomeInProgress, err
			return zero, err
		}
		if next == waitSettled {
			return w.settle(t, rec, hash, key, r)
		}
		// The lease ran out or the record is gone: claim it, as a repeat
		// would.
	}
}

// runClaimed runs fn under the lease the call claimed and records its
// outcome in r.
func (w *wrapper[In, Out]) runClaimed(ctx context.Context, t timing, cr idemstore.ClaimResult, key string, now time.Time, in In, r *RecordReport) (Out, error) {
	var zero Out
	st := &recordState{lease: cr.Lease}
	var out Out
	var start time.Time
	if w.observed() { // the duration is read only by observers
		start = t.now()
	}
	ferr := w.runHandler(ctx, t, st, now, func(hctx context.Context) (err error) {
		out, err = w.fn(hctx, in)
		return err
	})
	r.HandlerRan = true
	if w.observed() {
		r.HandlerDuration = t.now().Sub(start)
	}

	dctx, dcancel := w.detached(ctx, t)
	defer dcancel()
	if ferr == nil {
		return w.complete(ctx, dctx, t, cr.Lease, key, st.takeWrites(), out, r)
	}
	if v, why := w.c.judge(ferr, st.ctxEnded, false); v == verdictUnknown {
		// fn said it cannot tell, or (at-most-once mode) failed without
		// declaring that nothing happened: whatever it started may have
		// happened, as after a crash. Never retryable. (Poison has no
		// dead-letter queue to go to here: a failure like any other.)
		return zero, w.abandoned(ctx, dctx, t, cr.Lease, key, why, ferr, r)
	}
	r.Outcome, r.Err = OutcomeFailed, ferr
	w.failCall(ctx, dctx, t, cr.Lease, key, ferr, r)
	return zero, ferr
}

// complete records fn's success. It never records a failure for a call
// whose effect happened; see Wrap.
func (w *wrapper[In, Out]) complete(ctx, dctx context.Context, t timing, lease Lease, key string, writes []any, out Out, r *RecordReport) (Out, error) {
	var zero Out
	done := t.now()
	req := idemstore.CompleteRequest{Lease: lease, ExpiresAt: w.retentionUntil(done, true), Writes: writes}
	if w.c.resultRetention < w.c.retention {
		req.ResultUntil = done.Add(w.c.resultRetention)
	}
	result, why := w.encode(out)
	if why != nil {
		if mutant.On("wrap-fails-unstorable-result") {
			// The bug: failure recorded after success; a repeat runs fn again.
			ferr := fmt.Errorf("lambdaidem: result not stored: %w", why)
			r.Outcome, r.Err = OutcomeFailed, ferr
			w.failCall(ctx, dctx, t, lease, key, ferr, r)
			return zero, ferr
		}
		result = notStoredMarker(why)
	}
	req.Result = result
	write := func(ctx context.Context) error {
		req.Now = t.now()
		return w.store.Complete(ctx, req)
	}
	err := retryStore(dctx, t, r, write)
	if errors.Is(err, ErrResultTooLarge) && why == nil {
		// The store cannot hold this result: complete the key without it
		// rather than leave it open to a second run.
		why = err
		req.Result = notStoredMarker(why)
		err = retryStore(dctx, t, r, write)
	}
	attrs := []slog.Attr{slog.String("namespace", w.c.namespace), slog.String("key", key)}
	switch {
	case err == nil:
		if why != nil {
			w.log(ctx, slog.LevelWarn, "lambdaidem: call completed; its result was not stored and cannot be replayed",
				append(attrs, slog.Any("reason", why))...)
		}
		r.Outcome = OutcomeProcessed
		return out, nil
	case len(writes) == 0:
		// fn's effect happened: return its result, never record a
		// failure after success. The key stays in progress (or is the
		// new holder's).
		w.log(ctx, slog.LevelError, "lambdaidem: completion not recorded", append(attrs, slog.Any("error", err))...)
		r.Outcome, r.Err = OutcomeUnrecorded, err
		if errors.Is(err, ErrLeaseLost) {
			r.Outcome = OutcomeLeaseLost
		}
		return out, nil
	case errors.Is(err, ErrLeaseLost):
		// Our own condition refused the transaction: nothing of it was
		// written, and the key is someone else's now.
		r.Outcome, r.Err = OutcomeLeaseLost, fmt.Errorf("%w: %w", ErrWritesNotCommitted, err)
		return zero, r.Err
	case errors.Is(err, ErrStoreUnavailable) && w.c.atMostOnce:
		// The writes may or may not have committed, and whatever fn did
		// besides them happened: never retryable. The mark is fenced as
		// a failure mark is (below): it applies only while the completion
		// did not commit.
		cause := fmt.Errorf("%w: key %q: attempt %d: its completion writes may not have committed: %w: %w", ErrOutcomeUnknown, key, lease.Attempt, ErrWritesNotCommitted, err)
		return zero, w.markUnknown(ctx, dctx, t, lease, key, cause, r)
	case errors.Is(err, ErrStoreUnavailable):
		// The writes may or may not have committed. A failure mark is
		// fenced like the completion: it applies only while the record is
		// still in progress under our lease, which means the completion
		// did not commit, and once it applied the completion never can.
		r.Outcome = OutcomeStoreError
		if ferr := w.failRecord(dctx, t, r, lease, err); ferr == nil {
			r.Err = fmt.Errorf("%w (the key may be retried): %w", ErrWritesNotCommitted, err)
			return zero, r.Err
		}
		w.log(ctx, slog.LevelError, "lambdaidem: completion writes not confirmed", append(attrs, slog.Any("error", err))...)
		r.Err = fmt.Errorf("%w (not known whether they did): %w", ErrWritesNotCommitted, err)
		return zero, r.Err
	default:
		// The store refused the writes for good (a condition failed, or it
		// cannot commit them at all); nothing was written.
		ferr := fmt.Errorf("%w: %w", ErrWritesNotCommitted, err)
		if v, why := w.c.judge(ferr, false, true); v == verdictUnknown {
			// At-most-once mode: what fn did besides its writes happened.
			return zero, w.abandoned(ctx, dctx, t, lease, key, why, ferr, r)
		}
		r.Outcome, r.Err = OutcomeFailed, ferr
		w.failCall(ctx, dctx, t, lease, key, ferr, r)
		return zero, ferr
	}
}

// encode makes the stored result, or says why it cannot be stored.
func (w *wrapper[In, Out]) encode(out Out) (result []byte, why error) {
	result, err := json.Marshal(out)
	switch {
	case err != nil:
		return nil, fmt.Errorf("result is not JSON-encodable: %w", err)
	case len(result) > w.c.maxResultBytes:
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrResultTooLarge, len(result), w.c.maxResultBytes)
	}
	return result, nil
}

// failCall records fn's failure, logging when it cannot.
func (w *wrapper[In, Out]) failCall(ctx, dctx context.Context, t timing, lease Lease, key string, cause error, r *RecordReport) {
	if err := w.failRecord(dctx, t, r, lease, cause); err != nil {
		w.log(ctx, slog.LevelError, "lambdaidem: could not record failure",
			slog.String("namespace", w.c.namespace), slog.String("key", key), slog.Any("error", err))
	}
}

// abandoned dead-letters a key whose attempt has an unknown outcome (why
// says why) and reports ErrOutcomeUnknown, wrapping fn's error.
func (w *wrapper[In, Out]) abandoned(ctx, dctx context.Context, t timing, lease Lease, key, why string, ferr error, r *RecordReport) error {
	cause := fmt.Errorf("%w: key %q: attempt %d: %s; it may have had its effect: %w", ErrOutcomeUnknown, key, lease.Attempt, why, ferr)
	return w.markUnknown(ctx, dctx, t, lease, key, cause, r)
}

// markUnknown dead-letters the key as outcome unknown under lease and
// returns cause, joined with the store's error if the mark failed. An
// unmarked record stays in progress: once its lease runs out, a repeat
// finds it abandoned and marks it, without running fn.
func (w *wrapper[In, Out]) markUnknown(ctx, dctx context.Context, t timing, lease Lease, key string, cause error, r *RecordReport) error {
	now := t.now()
	err := retryStore(dctx, t, r, func(ctx context.Context) error {
		return w.store.DeadLetter(ctx, idemstore.DeadLetterRequest{
			Lease: lease, Now: t.now(), Reason: ReasonOutcomeUnknown, Error: cause.Error(),
			DeadLetterMessageID: idemstore.NoCopy, ExpiresAt: w.retentionUntil(now, false),
		})
	})
	if err != nil {
		r.Outcome, r.Err = OutcomeStoreError, errors.Join(cause, err)
		return r.Err
	}
	w.log(ctx, slog.LevelError, "lambdaidem: outcome unknown; not running again",
		slog.String("namespace", w.c.namespace), slog.String("key", key), slog.Int("attempt", lease.Attempt))
	r.Outcome, r.Reason, r.Err = OutcomeDeadLettered, ReasonOutcomeUnknown, cause
	return cause
}

// replay answers a refused claim, noting the outcome in r.
func (w *wrapper[In, Out]) replay(t timing, rec idemstore.Record, hash, key string, r *RecordReport) (Out, error) {
	out, err := w.replayed(t, rec, hash, key, r)
	r.Err = err
	return out, err
}

func (w *wrapper[In, Out]) replayed(t timing, rec idemstore.Record, hash, key string, r *RecordReport) (Out, error) {
	var zero Out
	now := t.now()
	answerOther := mutant.On("replay-answers-other-payload") // the bug: a completed record answers whatever payload asks
	keepExpired := mutant.On("late-replay-answered")         // the bug: a result past its retention is replayed
	switch {
	case rec.Status == StatusDeadLettered && rec.DeadLetterReason == ReasonOutcomeUnknown:
		r.Outcome, r.Reason = OutcomeDeadLetteredDuplicate, rec.DeadLetterReason
		return zero, fmt.Errorf("%w: key %q", ErrOutcomeUnknown, key)
	case rec.Status == StatusDeadLettered:
		r.Outcome, r.Reason = OutcomeDeadLetteredDuplicate, rec.DeadLetterReason
		return zero, fmt.Errorf("%w: key %q (%s)", ErrDeadLettered, key, rec.DeadLetterReason)
	case rec.PayloadHash != hash && !(answerOther && rec.Status == StatusCompleted):
		r.Outcome = OutcomeConflict
		return zero, fmt.Errorf("%w: key %q", ErrKeyConflict, key)
	case rec.Status == StatusCompleted:
		r.Outcome = OutcomeDuplicate
		if rec.ResultExpired(now) && !keepExpired {
			r.Outcome = OutcomeLateReplay
			w.log(context.Background(), slog.LevelWarn, "lambdaidem: late replay",
				slog.String("namespace", w.c.namespace), slog.String("key", key))
			return zero, fmt.Errorf("%w: key %q", ErrLateReplay, key)
		}
		if reason, ok := ResultNotStored(rec.Result); ok {
			return zero, fmt.Errorf("%w: key %q: %s", ErrResultNotStored, key, reason)
		}
		out, err := decodeResult[Out](rec.Result)
		if err != nil {
			return zero, fmt.Errorf("lambdaidem: stored result of key %q does not decode: %w", key, err)
		}
		return out, nil
	default:
		r.Outcome = OutcomeInProgress
		return zero, &InProgressError{RetryAfter: max(rec.LeaseUntil.Add(w.c.grace).Sub(now), 0)}
	}
}

// decodeResult decodes a stored result. Numbers that land in interface
// values become json.Number, not float64, so integers above 2^53 survive.
func decodeResult[Out any](b []byte) (Out, error) {
	var out Out
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if mutant.On("wrap-replays-through-float64") {
		dec = json.NewDecoder(bytes.NewReader(b)) // the bug: numbers in interface values become float64
	}
	if err := dec.Decode(&out); err != nil {
		return out, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return out, errors.New("data after the stored value")
	}
	return out, nil
}

// outcomeUnknown marks an abandoned attempt in at-most-once mode, fencing
// the original owner's late completion, and reports ErrOutcomeUnknown.
func (w *wrapper[In, Out]) outcomeUnknown(ctx context.Context, t timing, rec idemstore.Record, key string, r *RecordReport) error {
	dctx, cancel := w.detached(ctx, t)
	defer cancel()
	cause := fmt.Errorf("%w: key %q: attempt %d's lease ran out without a recorded outcome", ErrOutcomeUnknown, key, rec.Attempts)
	return w.markUnknown(ctx, dctx, t, rec.Lease(), key, cause, r)
}
