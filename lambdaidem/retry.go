package lambdaidem

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lambdaidem/go-lambdaidem/internal/mutant"
)

// retryStore retries a store write that failed as unavailable, within ctx.
// The Store is retry-safe: a write that applied but whose answer was lost
// is recognised as ours on the retry. A retry is started only while the
// time left in ctx covers the wait and a try as slow as the slowest so far,
// so the last try is not cut off by the deadline. Times and waits are the
// invocation's clock's.
//
// A try that failed as unavailable may still apply later: a request held
// in the network lands after the client gave up on it. So when a later try
// is refused because a completion write's condition failed
// (ErrWriteRefused), that refusal only says the earlier try had not landed
// yet, not that it never will: retryStore then reports the write as
// unavailable (its outcome unknown), never as refused, and the caller keeps
// what it would keep for a write whose answer was lost. Other refusals
// stand: a lost lease fences the earlier try by the same token, and what
// can never apply (a result too large, a write the store cannot commit)
// could not have applied the first time either.
func retryStore(ctx context.Context, t timing, r *RecordReport, write func(ctx context.Context) error) error {
	err, unknown := retryStoreTries(ctx, t, r, write)
	if unknown {
		return afterUnknownTry(err)
	}
	return err
}

// afterUnknownTry is err, the answer of a write retried after a try whose
// outcome is unknown (it failed as unavailable, in retryStore's loop or in
// a batch): a refusal for what the write carries (ErrWriteRefused) is
// reported as unavailable, since the earlier try may still land.
func afterUnknownTry(err error) error {
	if mutant.On("refusal-after-timeout-trusted") {
		return err // the bug: the refusal is taken as final though the earlier try may still land
	}
	if errors.Is(err, ErrWriteRefused) && !errors.Is(err, ErrLeaseLost) {
		return fmt.Errorf("%w: an earlier try's outcome is unknown and it may still apply; a later try was refused (%v)", ErrStoreUnavailable, err)
	}
	return err
}

// retryStoreTries is retryStore's loop; unknown reports whether a try
// before the last failed as unavailable.
func retryStoreTries(ctx context.Context, t timing, r *RecordReport, write func(ctx context.Context) error) (err error, unknown bool) {
	var slowest time.Duration
	for attempt := 0; attempt < 4; attempt++ {
		r.StoreCalls++
		start := t.now()
		err = write(ctx)
		slowest = max(slowest, t.now().Sub(start))
		if err != nil && !errors.Is(err, ErrLeaseLost) {
			r.StoreErrors++
		}
		if err == nil || !errors.Is(err, ErrStoreUnavailable) || attempt == 3 {
			return err, unknown
		}
		unknown = true
		wait := time.Duration(25<<attempt) * time.Millisecond
		if dl, ok := ctx.Deadline(); ok && dl.Sub(t.now()) < wait+slowest {
			return err, unknown
		}
		waitFrom := t.now()
		slept := t.rt.Sleep(ctx, wait)
		r.Waited += t.now().Sub(waitFrom)
		if !slept {
			return err, unknown
		}
	}
	return err, unknown
}
