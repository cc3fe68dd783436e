package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// Batched writes (lambdaidem.WithBatchedWrites) through the simulated
// stores: a batch is one request, so it meets its faults once (an outage,
// an error or a throttle before it, a kill before or after it, a late
// landing, an answer lost after it applied) and travels once; inside, the
// wrapped store answers each item, with its own batch code when it has
// one, and the checker sees every item that applied.

var (
	_ lambdaidem.Batcher = (*FaultStore)(nil)
	_ lambdaidem.Batcher = (*TxStore)(nil)
)

// claimBatch claims reqs through store's ClaimBatch, or one at a time
// when it has none. An answer of another length than reqs is made one
// error per request, as the decorator would take it.
func claimBatch(ctx context.Context, store lambdaidem.Store, reqs []lambdaidem.ClaimRequest) []lambdaidem.BatchClaim {
	b, ok := store.(lambdaidem.Batcher)
	if !ok {
		out := make([]lambdaidem.BatchClaim, len(reqs))
		for i, req := range reqs {
			out[i].Result, out[i].Err = store.Claim(ctx, req)
		}
		return out
	}
	out := b.ClaimBatch(ctx, reqs)
	if len(out) != len(reqs) {
		err := fmt.Errorf("sim: %T answered %d of %d claims: %w", store, len(out), len(reqs), lambdaidem.ErrStoreUnavailable)
		out = make([]lambdaidem.BatchClaim, len(reqs))
		for i := range out {
			out[i].Err = err
		}
	}
	return out
}

// completeBatch completes reqs through store's CompleteBatch, or one at a
// time when it has none, as claimBatch claims.
func completeBatch(ctx context.Context, store lambdaidem.Store, reqs []lambdaidem.CompleteRequest) []error {
	b, ok := store.(lambdaidem.Batcher)
	if !ok {
		errs := make([]error, len(reqs))
		for i, req := range reqs {
			errs[i] = store.Complete(ctx, req)
		}
		return errs
	}
	errs := b.CompleteBatch(ctx, reqs)
	if len(errs) != len(reqs) {
		err := fmt.Errorf("sim: %T answered %d of %d completions: %w", store, len(errs), len(reqs), lambdaidem.ErrStoreUnavailable)
		errs = make([]error, len(reqs))
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
}

// ClaimBatch implements lambdaidem.Batcher: one request, whose faults
// answer every item alike. OnClaim sees each claim that applied.
func (s *FaultStore) ClaimBatch(ctx context.Context, reqs []lambdaidem.ClaimRequest) []lambdaidem.BatchClaim {
	s.Batches++
	var out []lambdaidem.BatchClaim
	ferr := s.call("claim-batch", true, func() {
		got := claimBatch(context.WithoutCancel(ctx), s.Store, reqs)
		if s.OnClaim != nil {
			for i, a := range got {
				if a.Err == nil && a.Result.Claimed {
					s.OnClaim(reqs[i], a.Result)
				}
			}
		}
		out = got
	})
	if ferr != nil {
		// (A late batch lands after this answer, into a slice nobody
		// reads any more.)
		out = make([]lambdaidem.BatchClaim, len(reqs))
		for i := range out {
			out[i].Err = ferr
		}
	}
	return out
}

// CompleteBatch implements lambdaidem.Batcher: one request, whose faults
// answer every item alike. OnComplete sees each completion that applied.
func (s *FaultStore) CompleteBatch(ctx context.Context, reqs []lambdaidem.CompleteRequest) []error {
	s.Batches++
	var errs []error
	ferr := s.call("complete-batch", true, func() {
		got := completeBatch(context.WithoutCancel(ctx), s.Store, reqs)
		if s.OnComplete != nil {
			for i, err := range got {
				if err == nil {
					s.OnComplete(reqs[i])
				}
			}
		}
		errs = got
	})
	if ferr != nil {
		errs = make([]error, len(reqs))
		for i := range errs {
			errs[i] = ferr
		}
	}
	return errs
}

// ClaimBatch implements lambdaidem.Batcher with the wrapped store's.
func (s *TxStore) ClaimBatch(ctx context.Context, reqs []lambdaidem.ClaimRequest) []lambdaidem.BatchClaim {
	return claimBatch(ctx, s.Store, reqs)
}

// CompleteBatch implements lambdaidem.Batcher: each item as Complete
// would (its Effects taken out, its own condition drawn), the rest sent
// to the wrapped store in one batch; the Effects of the items that
// applied reach the ledger in the same step, once per lease token.
func (s *TxStore) CompleteBatch(ctx context.Context, reqs []lambdaidem.CompleteRequest) []error {
	errs := make([]error, len(reqs))
	fxs := make([][]Effect, len(reqs))
	var sent []int
	var pass []lambdaidem.CompleteRequest
	for i, req := range reqs {
		fxs[i], req.Writes = effects(req.Writes)
		if len(fxs[i]) > 0 && !s.Ledger.tokens[req.Lease.Token] && s.Refuse != nil && s.Refuse() {
			errs[i] = fmt.Errorf("sim: effect's condition failed: %w", lambdaidem.ErrWriteRefused)
			continue
		}
		sent = append(sent, i)
		pass = append(pass, req)
	}
	if len(pass) == 0 {
		return errs
	}
	for j, err := range completeBatch(ctx, s.Store, pass) {
		i := sent[j]
		errs[i] = err
		if err == nil {
			s.Ledger.apply(reqs[i].Lease.Token, fxs[i])
		}
	}
	return errs
}

// effects splits a completion's writes into its Effects and the rest.
func effects(writes []any) (fx []Effect, rest []any) {
	rest = writes[:0:0]
	for _, w := range writes {
		if e, ok := w.(Effect); ok {
			fx = append(fx, e)
		} else {
			rest = append(rest, w)
		}
	}
	return fx, rest
}

// apply puts fx on the ledger once per token: a retried completion the
// store recognises as applied does not apply its effects again.
func (l *Ledger) apply(token string, fx []Effect) {
	if len(fx) == 0 || l.tokens[token] {
		return
	}
	l.tokens[token] = true
	for _, e := range fx {
		l.Tx[e.Key] = append(l.Tx[e.Key], e.By)
	}
}

// batchedEnv draws whether a new execution environment's decorator runs
// WithBatchedWrites (Config.Batched). Every store of the simulation
// batches (the wrappers are Batchers, over stores that are).
func (s *Scenario) batchedEnv() bool {
	c := s.Cfg
	if c.Batched <= 0 {
		return false
	}
	return c.Batched >= 1 || s.w.rng.Float64() < c.Batched
}

// buildBatched builds a decorator with batched writes, in the optimistic
// mode too when optimistic. With what batching cannot keep (a heartbeat,
// the optimistic mode) the decorator must refuse it when built with a
// *lambdaidem.ConfigError; buildBatched then returns nil, and the
// environment is built without it, as a user would after reading the
// panic.
func (s *Scenario) buildBatched(opts []lambdaidem.Option, optimistic bool) SQSHandler {
	opts = append(slices.Clip(opts), lambdaidem.WithBatchedWrites())
	if optimistic {
		opts = append(opts, lambdaidem.WithOptimisticCommit())
	}
	var h SQSHandler
	err := lambdaidem.Check(func() { h = s.build(opts) })
	var ce *lambdaidem.ConfigError
	refused := errors.As(err, &ce) && (strings.Contains(ce.Option, "WithBatchedWrites") && errors.Is(err, lambdaidem.ErrInvalidOption) ||
		optimistic && errors.Is(err, lambdaidem.ErrNeedsLease))
	switch {
	case s.Cfg.Heartbeat > 0 && !refused:
		s.violate(InvRepeats, "WithBatchedWrites with WithHeartbeat(%s) was not refused when built (%v): the heartbeat stops as a handler returns, and the lease may run out before its batch's completion is written", s.Cfg.Heartbeat, err)
	case optimistic && !refused:
		s.violate(InvCommit, "WithBatchedWrites with WithOptimisticCommit was not refused when built (%v): an optimistic first delivery takes no claim to batch", err)
	case refused && (s.Cfg.Heartbeat > 0 || optimistic):
		s.w.Logf("decorator refused WithBatchedWrites: %v; built without it", err)
		return nil
	case err != nil:
		s.violate(InvProgress, "WithBatchedWrites refused on a store that batches: %v", err)
		return nil
	}
	if err != nil {
		return nil
	}
	s.nBatched++
	return h
}
