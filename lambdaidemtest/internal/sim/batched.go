package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// Batched writes (lambdaidem.WithBatchedWrites) through the simulated
// stores: a batch is one request, so it meets the faults (an outage, an
// error before, throttling, a request held in the network, an answer lost
// after it applied, a kill before or after) once, as a whole; inside, the
// wrapped store's own batch code answers each key, and the checker sees
// each claim and completion that applied, as it sees single ones.

var (
	_ idemstore.Batcher = (*FaultStore)(nil)
	_ idemstore.Batcher = (*TxStore)(nil)
)

// ClaimBatch implements idemstore.Batcher.
func (s *FaultStore) ClaimBatch(ctx context.Context, reqs []idemstore.ClaimRequest) []idemstore.BatchClaim {
	s.Batches++
	if keyTwice(reqs) {
		s.KeyTwice++
	}
	var got []idemstore.BatchClaim
	ferr := s.call("claim-batch", true, func() {
		c := context.WithoutCancel(ctx)
		got = claimEach(c, s.Store, reqs)
		if s.OnClaim == nil {
			return
		}
		for i, a := range got {
			if a.Err == nil && a.Result.Claimed {
				s.OnClaim(reqs[i], a.Result)
			}
		}
	})
	if ferr != nil {
		out := make([]idemstore.BatchClaim, len(reqs))
		for i := range out {
			out[i].Err = ferr
		}
		return out
	}
	return got
}

// CompleteBatch implements idemstore.Batcher.
func (s *FaultStore) CompleteBatch(ctx context.Context, reqs []idemstore.CompleteRequest) []error {
	s.Batches++
	var got []error
	ferr := s.call("complete-batch", true, func() {
		c := context.WithoutCancel(ctx)
		got = completeEach(c, s.Store, reqs)
		if s.OnComplete == nil {
			return
		}
		for i, err := range got {
			if err == nil {
				s.OnComplete(reqs[i])
			}
		}
	})
	if ferr != nil {
		out := make([]error, len(reqs))
		for i := range out {
			out[i] = ferr
		}
		return out
	}
	return got
}

// ClaimBatch implements idemstore.Batcher: claims carry no effects.
func (s *TxStore) ClaimBatch(ctx context.Context, reqs []idemstore.ClaimRequest) []idemstore.BatchClaim {
	return claimEach(ctx, s.Store, reqs)
}

// CompleteBatch implements idemstore.Batcher: each completion's Effects
// apply to the ledger in the same step as it, once per lease token, only
// when it applied, as in Complete.
func (s *TxStore) CompleteBatch(ctx context.Context, reqs []idemstore.CompleteRequest) []error {
	errs := make([]error, len(reqs))
	fx := make([][]Effect, len(reqs))
	var pass []idemstore.CompleteRequest
	var which []int
	for i, req := range reqs {
		var rest []any
		fx[i], rest = effectsOf(req.Writes)
		if len(fx[i]) > 0 && !s.Ledger.tokens[req.Lease.Token] && s.Refuse != nil && s.Refuse() {
			errs[i] = fmt.Errorf("sim: effect's condition failed: %w", idemstore.ErrWriteRefused)
			continue
		}
		req.Writes = rest
		pass = append(pass, req)
		which = append(which, i)
	}
	for j, err := range completeEach(ctx, s.Store, pass) {
		i := which[j]
		errs[i] = err
		token := reqs[i].Lease.Token
		if err == nil && len(fx[i]) > 0 && !s.Ledger.tokens[token] {
			s.Ledger.tokens[token] = true
			for _, e := range fx[i] {
				s.Ledger.Tx[e.Key] = append(s.Ledger.Tx[e.Key], e.By)
			}
		}
	}
	return errs
}

// claimEach claims reqs through store's own batch when it has one, else
// one claim after another.
func claimEach(ctx context.Context, store idemstore.Store, reqs []idemstore.ClaimRequest) []idemstore.BatchClaim {
	if b, ok := store.(idemstore.Batcher); ok {
		return b.ClaimBatch(ctx, reqs)
	}
	out := make([]idemstore.BatchClaim, len(reqs))
	for i, req := range reqs {
		out[i].Result, out[i].Err = store.Claim(ctx, req)
	}
	return out
}

// completeEach completes reqs through store's own batch when it has one,
// else one completion after another.
func completeEach(ctx context.Context, store idemstore.Store, reqs []idemstore.CompleteRequest) []error {
	if len(reqs) == 0 {
		return nil
	}
	if b, ok := store.(idemstore.Batcher); ok {
		return b.CompleteBatch(ctx, reqs)
	}
	errs := make([]error, len(reqs))
	for i, req := range reqs {
		errs[i] = store.Complete(ctx, req)
	}
	return errs
}

// batchedEnv draws whether a new execution environment's decorator is
// built WithBatchedWrites (Config.Batched).
func (s *Scenario) batchedEnv() bool {
	c := s.Cfg
	if c.Batched <= 0 {
		return false
	}
	return c.Batched >= 1 || s.w.rng.Float64() < c.Batched
}

// buildBatched builds a decorator WithBatchedWrites (and in the
// optimistic mode too when optimistic is set). What batching cannot keep
// (a heartbeat, the optimistic mode) must be refused when the decorator
// is built, with ErrInvalidOption; the environment then runs without
// batching, as a user would after reading the panic.
func (s *Scenario) buildBatched(opts []lambdaidem.Option, optimistic bool) SQSHandler {
	with := append(slices.Clone(opts), lambdaidem.WithBatchedWrites())
	if optimistic {
		with = append(with, lambdaidem.WithOptimisticCommit())
	}
	refused := s.Cfg.Heartbeat > 0 || optimistic
	var h SQSHandler
	err := lambdaidem.Check(func() { h = s.build(with) })
	switch {
	case refused && !errors.Is(err, idemstore.ErrInvalidOption):
		s.violate(InvAckEffect, "WithBatchedWrites with WithHeartbeat or WithOptimisticCommit was built (%v): a completion would wait past its heartbeat, or there is no claim to batch", err)
	case refused:
		s.w.Logf("decorator refused WithBatchedWrites: %v; built without it", err)
		if optimistic {
			return s.buildOptimistic(opts)
		}
		return s.build(opts)
	case err != nil:
		s.violate(InvAckEffect, "WithBatchedWrites refused on a store that batches: %v", err)
		return s.build(opts)
	}
	s.nBatched++
	return h
}
