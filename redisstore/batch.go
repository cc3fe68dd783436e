package redisstore

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

var _ lambdaidem.Batcher = (*Store)(nil)

// ClaimBatch claims several keys in one round trip: the claim script of
// each key, sent together in one pipeline (a cluster client sends one per
// node, and every key of a namespace lives in one slot). Each script is
// the one Claim runs, so each key's answer is Claim's; see
// [lambdaidem.Batcher]. A script the server has not cached yet is loaded
// and that key claimed on its own.
func (s *Store) ClaimBatch(ctx context.Context, reqs []lambdaidem.ClaimRequest) []lambdaidem.BatchClaim {
	out := make([]lambdaidem.BatchClaim, len(reqs))
	calls := make([]*claimCall, len(reqs))
	cmds := make([]*redis.Cmd, len(reqs))
	some := false
	for i, req := range reqs {
		calls[i], out[i].Err = s.claimCall(req)
		some = some || out[i].Err == nil
	}
	if !some {
		return out
	}
	_, _ = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, c := range calls {
			if c != nil {
				cmds[i] = c.script.EvalSha(ctx, p, c.keys.all(), c.args...)
			}
		}
		return nil
	})
	for i, c := range calls {
		if c == nil {
			continue
		}
		if redis.HasErrorPrefix(cmds[i].Err(), "NOSCRIPT") {
			// Nothing ran: claim it on its own, which loads the script.
			out[i].Result, out[i].Err = s.Claim(ctx, reqs[i])
			continue
		}
		out[i].Result, out[i].Err = c.reply(cmds[i].Slice())
	}
	return out
}

// CompleteBatch completes several leases in one round trip: the fenced
// write script of each, sent together in one pipeline; see
// [lambdaidem.Batcher].
func (s *Store) CompleteBatch(ctx context.Context, reqs []lambdaidem.CompleteRequest) []error {
	errs := make([]error, len(reqs))
	calls := make([]*finishCall, len(reqs))
	cmds := make([]*redis.Cmd, len(reqs))
	some := false
	for i, req := range reqs {
		w, err := s.completeWrite(req)
		if err == nil {
			calls[i], err = s.finishCall("complete", req.Lease, req.Now, w)
		}
		errs[i] = err
		some = some || err == nil
	}
	if !some {
		return errs
	}
	_, _ = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, c := range calls {
			if c != nil {
				cmds[i] = finishScript.EvalSha(ctx, p, c.scriptKeys, c.args...)
			}
		}
		return nil
	})
	for i, c := range calls {
		if c == nil {
			continue
		}
		if redis.HasErrorPrefix(cmds[i].Err(), "NOSCRIPT") {
			errs[i] = s.Complete(ctx, reqs[i])
			continue
		}
		errs[i] = c.reply(cmds[i].StringSlice())
	}
	return errs
}
