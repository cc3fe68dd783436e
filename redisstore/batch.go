package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

var _ idemstore.Batcher = (*Store)(nil)

// ClaimBatch claims several keys in one round trip: one script call per
// namespace (every key of a namespace lives in one cluster slot) that
// runs the claim step of each key in turn, the step Claim runs, so each
// key's answer is Claim's; see [idemstore.Batcher]. The calls of several
// namespaces go out in one pipeline. A key whose step raised an error is
// claimed again on its own, which answers it as Claim does (a claim
// whose step had applied is found to be its own and held).
func (s *Store) ClaimBatch(ctx context.Context, reqs []idemstore.ClaimRequest) []idemstore.BatchClaim {
	out := make([]idemstore.BatchClaim, len(reqs))
	calls := make([]*claimCall, len(reqs))
	b := s.newBatch()
	for i, req := range reqs {
		c, err := s.claimCall(req)
		if err != nil {
			out[i].Err = err
			continue
		}
		calls[i] = c
		b.add(i, c.batch, c.keys, c.keys.all(), c.args)
	}
	replies := b.run(ctx, s.client)
	for i, c := range calls {
		if c == nil {
			continue
		}
		v, err := itemReply(replies[i])
		if errors.Is(err, errStep) || errors.Is(err, errAlone) {
			out[i].Result, out[i].Err = c.reply(c.script.Run(ctx, s.client, c.keys.all(), c.args...).Slice())
			continue
		}
		out[i].Result, out[i].Err = c.reply(v, err)
	}
	return out
}

// CompleteBatch completes several leases in one round trip: one script
// call per namespace that runs the fenced write step of each completion
// in turn (the step Complete runs, its commands included); see
// [idemstore.Batcher]. A completion whose step raised an error is sent
// again on its own.
func (s *Store) CompleteBatch(ctx context.Context, reqs []idemstore.CompleteRequest) []error {
	errs := make([]error, len(reqs))
	calls := make([]*finishCall, len(reqs))
	b := s.newBatch()
	for i, req := range reqs {
		w, err := s.completeWrite(req)
		if err == nil {
			calls[i], err = s.finishCall("complete", req.Lease, req.Now, w)
		}
		if err != nil {
			errs[i] = err
			continue
		}
		b.add(i, finishManyScript, calls[i].keys, calls[i].scriptKeys, calls[i].args)
	}
	replies := b.run(ctx, s.client)
	for i, c := range calls {
		if c == nil {
			continue
		}
		v, err := itemReply(replies[i])
		if errors.Is(err, errStep) || errors.Is(err, errAlone) {
			errs[i] = c.reply(finishScript.Run(ctx, s.client, c.scriptKeys, c.args...).StringSlice())
			continue
		}
		errs[i] = c.reply(stringsOf(v), err)
	}
	return errs
}

// errStep is an item of a batch whose step raised an error in the
// script; the caller sends it again on its own.
var errStep = errors.New("redisstore: the batch step raised an error")

// errAlone is an item too long for a batch call of its own (a batch call
// carries a few arguments more than a single one); the caller sends it
// on its own.
var errAlone = errors.New("redisstore: the item is sent on its own")

// batch gathers the script calls of a batch: per script and namespace
// (its open sets), calls carrying their items' keys and arguments in the
// layout many reads, as many calls as the store's request limits need.
type batch struct {
	calls    []*batchCall
	index    map[batchKey]*batchCall // the call of a script and namespace items join
	alone    []int                   // items sent on their own
	maxArgs  int
	maxBytes int
}

type batchKey struct {
	script *redis.Script
	set    string
}

type batchCall struct {
	script *redis.Script
	items  []int // the request index of each item, in call order
	keys   []string
	args   []any
	n      int // the call's arguments, EVALSHA included
	bytes  int // and their bytes
}

func (s *Store) newBatch() *batch {
	return &batch{index: map[batchKey]*batchCall{}, maxArgs: s.maxArgs, maxBytes: s.maxBytes}
}

// add adds item i to the call of its script and namespace, or to a new
// one when the item would make that call longer than the store's request
// limits. An item too long for a call of its own is answered errAlone.
func (b *batch) add(i int, script *redis.Script, k keys, scriptKeys []string, args []any) {
	n, bytes := requestSize(scriptKeys, args)
	n += 2 // its numbers of keys and arguments
	if n+1 > b.maxArgs || bytes+20 > b.maxBytes {
		b.alone = append(b.alone, i)
		return
	}
	bk := batchKey{script, k.open[0]}
	c := b.index[bk]
	if c == nil || c.n+n-3 > b.maxArgs || c.bytes+bytes > b.maxBytes {
		c = &batchCall{script: script, args: []any{0}, n: 4, bytes: 20}
		b.index[bk] = c
		b.calls = append(b.calls, c)
	}
	c.items = append(c.items, i)
	c.keys = append(c.keys, scriptKeys...)
	c.args = append(append(c.args, len(scriptKeys), len(args)), args...)
	c.args[0] = len(c.items)
	c.n += n - 3
	c.bytes += bytes
}

// run sends the calls, in one pipeline when there are several, and
// returns each request's reply by its index: a []any, or an error for
// the request's whole call.
func (b *batch) run(ctx context.Context, client redis.UniversalClient) map[int]any {
	out := map[int]any{}
	for _, i := range b.alone {
		out[i] = errAlone
	}
	answer := func(c *batchCall, v []any, err error) {
		if err == nil && len(v) != len(c.items) {
			err = fmt.Errorf("%d replies to a batch of %d", len(v), len(c.items))
		}
		for k, i := range c.items {
			if err != nil {
				out[i] = err
			} else {
				out[i] = v[k]
			}
		}
	}
	switch len(b.calls) {
	case 0:
	case 1:
		c := b.calls[0]
		v, err := c.script.Run(ctx, client, c.keys, c.args...).Slice()
		answer(c, v, err)
	default:
		cmds := make([]*redis.Cmd, len(b.calls))
		_, _ = client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for k, c := range b.calls {
				cmds[k] = c.script.EvalSha(ctx, p, c.keys, c.args...)
			}
			return nil
		})
		for k, c := range b.calls {
			cmd := cmds[k]
			if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
				// Nothing ran: this call again, loading its script.
				cmd = c.script.Run(ctx, client, c.keys, c.args...)
			}
			v, err := cmd.Slice()
			answer(c, v, err)
		}
	}
	return out
}

// itemReply is one item's reply out of a batch call's: the step's reply,
// errStep when the step raised an error, or the call's own error.
func itemReply(r any) ([]any, error) {
	switch r := r.(type) {
	case error:
		return nil, r
	case []any:
		if len(r) == 2 && r[0] == "error" {
			return nil, fmt.Errorf("%w: %v", errStep, r[1])
		}
		return r, nil
	default:
		return nil, fmt.Errorf("unexpected reply %T in a batch", r)
	}
}

// stringsOf is a reply whose elements are all strings, as StringSlice reads
// one; another element makes the reply unexpected, and empty.
func stringsOf(v []any) []string {
	out := make([]string, 0, len(v))
	for _, e := range v {
		s, ok := e.(string)
		if !ok {
			return nil
		}
		out = append(out, s)
	}
	return out
}
