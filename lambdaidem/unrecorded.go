package lambdaidem

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
)

// maxUnrecorded bounds the completions a container remembers it could not
// write; beyond it the oldest are forgotten (their keys then behave as
// after a crash).
const maxUnrecorded = 1024

// unrecordedCompletions remembers, per key, a completion this container
// could not write although the handler succeeded, so a redelivery of the
// key to this container writes it (fenced by the lease token, so it
// applies only if nobody took the key over) instead of running the
// handler again.
type unrecordedCompletions struct {
	n     atomic.Int32 // len(items), read without the lock
	mu    sync.Mutex
	order []string
	items map[string]unrecordedCompletion
}

type unrecordedCompletion struct {
	hash string
	req  CompleteRequest
}

func newUnrecorded() *unrecordedCompletions {
	return &unrecordedCompletions{items: map[string]unrecordedCompletion{}}
}

func (u *unrecordedCompletions) add(key, hash string, req CompleteRequest) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.items[key]; !ok {
		u.order = append(u.order, key)
	}
	u.items[key] = unrecordedCompletion{hash: hash, req: req}
	for len(u.order) > maxUnrecorded {
		delete(u.items, u.order[0])
		u.order = u.order[1:]
	}
	u.n.Store(int32(len(u.items)))
}

// get returns the remembered completion of key with this payload hash.
func (u *unrecordedCompletions) get(key, hash string) (CompleteRequest, bool) {
	if u.n.Load() == 0 {
		return CompleteRequest{}, false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	it, ok := u.items[key]
	return it.req, ok && it.hash == hash
}

func (u *unrecordedCompletions) drop(key string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.items[key]; !ok {
		return
	}
	delete(u.items, key)
	u.n.Store(int32(len(u.items)))
	for i, k := range u.order {
		if k == key {
			u.order = append(u.order[:i], u.order[i+1:]...)
			break
		}
	}
}

// recordLate writes a completion this container could not write when the
// handler succeeded, now that its key came back (WithFailBatchOnAnyFailure
// returns the whole batch, say). The write is fenced by that attempt's
// lease token: it applies only if nobody took the key over since. done is
// false when the key must be claimed as usual.
func (p *sqsProcessor) recordLate(ctx context.Context, t timing, hash string, req CompleteRequest, r RecordReport) (RecordReport, bool) {
	dctx, cancel := p.detached(ctx, t)
	defer cancel()
	r.Attempt = req.Lease.Attempt
	err := retryStore(dctx, &r, func(ctx context.Context) error {
		req.Now = t.now()
		return p.store.Complete(ctx, req)
	})
	switch {
	case err == nil:
		p.unrecorded.drop(r.Key)
		p.cache.add(r.Key, hash, req.Now, minNonZero(req.ExpiresAt, req.ResultUntil))
		r.Outcome, r.Acked = OutcomeDuplicate, true
		return p.logged(ctx, slog.LevelInfo, r), true
	case errors.Is(err, ErrStoreUnavailable):
		// Still cannot write it: keep the message, never run it again here.
		r.Outcome, r.Err = OutcomeStoreError, err
		return p.logged(ctx, slog.LevelError, r), true
	default:
		// Taken over, forgotten or refused: the store decides, as usual.
		p.unrecorded.drop(r.Key)
		return r, false
	}
}
