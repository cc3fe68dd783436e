package lambdaidem

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/internal/mutant"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// checkBatched refuses, when SQS is built, batched writes that could not
// keep their promise. It returns nil when nothing is refused.
func (c *config) checkBatched(store Store) *ConfigError {
	if !c.batched {
		return nil
	}
	pair := func(option, why string) *ConfigError {
		return &ConfigError{Option: "WithBatchedWrites and " + option, Err: fmt.Errorf("%w: %s", ErrInvalidOption, why)}
	}
	switch {
	case c.heartbeat > 0:
		return pair("WithHeartbeat", "a heartbeat stops extending a lease when its handler returns, and a batched completion is written only when the batch's last handler has returned")
	case c.optimistic:
		return pair("WithOptimisticCommit", "an optimistic first delivery takes no claim, so there is no claim to batch; give one")
	}
	if _, ok := store.(idemstore.Batcher); !ok {
		name := fmt.Sprintf("%T", store)
		if caps, ok := idemstore.CapabilitiesOf(store); ok && caps.Store != "" {
			name = caps.Store
		}
		return &ConfigError{Option: "WithBatchedWrites", Store: name, Err: &reason{
			text:  fmt.Sprintf("%v: %s does not implement idemstore.Batcher", ErrBatchUnsupported, name),
			named: []error{ErrBatchUnsupported, ErrUnsupportedOption},
		}}
	}
	return nil
}

// batchLanes is the number of requests a wave's claims, and its
// completions, are sent in, side by side: a wave of 10 records costs 4
// requests rather than 2. One request makes the store do every key's work
// before any answer comes back, and the handlers wait for all of it; with
// two, the store works on the second half while the first half's
// answers are read, its handlers run and its completions go out, so the
// round trip and the store's work overlap instead of adding up. Each
// lane holds at least two records: a lane of one would be a single call.
const batchLanes = 2

// runBatched runs groups of fresh records with batched claims and
// completions, WithConcurrency groups at a time, each wave split into
// lanes (batchLanes) that run side by side.
func (p *sqsProcessor) runBatched(ctx context.Context, t timing, recs []events.SQSMessage, keys []derived, groups [][]int, reports []RecordReport) {
	for len(groups) > 0 {
		wave := groups[:min(p.c.concurrency, len(groups))]
		groups = groups[len(wave):]
		lanes := lanesOf(wave)
		t.rt.Each(len(lanes), len(lanes), func(j int) {
			p.batchWave(ctx, t, recs, keys, lanes[j], reports)
		})
	}
}

// lanesOf splits a wave into batchLanes lanes of about equal size, fewer
// when a lane would hold fewer than two groups.
func lanesOf(wave [][]int) [][][]int {
	n := max(1, min(batchLanes, len(wave)/2))
	lanes := make([][][]int, 0, n)
	for j := range n {
		lanes = append(lanes, wave[j*len(wave)/n:(j+1)*len(wave)/n])
	}
	return lanes
}

// batchWave runs a lane of a wave's groups side by side: the first
// record of each is claimed in one request, their handlers run, the
// successful ones are completed in one request; then the rest of each
// group runs in order, as runGroup would have run it.
func (p *sqsProcessor) batchWave(ctx context.Context, t timing, recs []events.SQSMessage, keys []derived, wave [][]int, reports []RecordReport) {
	n := len(wave)
	type head struct {
		ctx    context.Context
		r      RecordReport
		claim  idemstore.ClaimRequest
		ask    bool // the claim is to be made
		run    *claimRun
		failed *claimRun // a handler that failed, its outcome still to record
	}
	heads := make([]head, n)
	obase := p.observerBase(ctx, t)

	// What each first record decides without its claim (a malformed
	// message, a cached duplicate, a late completion) it decides now.
	t.rt.Each(n, p.c.concurrency, func(k int) {
		h, i := &heads[k], wave[k][0]
		h.ctx = p.recordContext(ctx, obase, recs, keys, i)
		r, req, done := p.beforeClaim(h.ctx, t, recs[i], keys[i])
		if done {
			reports[i] = r
			return
		}
		h.r, h.claim, h.ask = r, req, true
	})

	// One request claims them all.
	asked := make([]int, 0, n)
	reqs := make([]idemstore.ClaimRequest, 0, n)
	for k := range heads {
		if heads[k].ask {
			asked = append(asked, k)
			reqs = append(reqs, heads[k].claim)
		}
	}
	answers := p.claimAll(ctx, reqs)
	claims := make([]*idemstore.BatchClaim, n)
	for j, k := range asked {
		claims[k] = &answers[j]
	}

	// The handlers run side by side; a success waits for the completions,
	// a failure is recorded after them.
	t.rt.Each(n, p.c.concurrency, func(k int) {
		h, i := &heads[k], wave[k][0]
		a := claims[k]
		if a == nil {
			return
		}
		h.r.StoreCalls++
		if a.Err != nil || !a.Result.Claimed {
			reports[i] = p.afterClaim(h.ctx, t, recs[i], keys[i].hash, a.Result, a.Err, h.r)
			return
		}
		run, done := p.runClaimed(h.ctx, t, recs[i], keys[i].hash, &a.Result, h.r)
		switch {
		case done:
			reports[i] = run.r
		case run.herr != nil:
			h.failed = run
		default:
			h.run = run
		}
	})

	// One request completes the successes; a completion the store could
	// not answer is retried alone, as it would have been.
	done := make([]int, 0, n)
	creqs := make([]idemstore.CompleteRequest, 0, n)
	now := t.now()
	for k := range heads {
		if run := heads[k].run; run != nil {
			run.req.Now = now
			done = append(done, k)
			creqs = append(creqs, run.req)
		}
	}
	if len(done) > 0 {
		dctx, dcancel := p.detached(ctx, t)
		defer dcancel()
		errs := p.completeAll(dctx, creqs)
		t.rt.Each(len(done), p.c.concurrency, func(j int) {
			k := done[j]
			h, i, err := &heads[k], wave[k][0], errs[j]
			h.run.r.StoreCalls++
			if errors.Is(err, ErrStoreUnavailable) {
				h.run.r.StoreErrors++
				if mutant.On("batched-completion-unanswered-acked") {
					err = nil // the bug: a completion nobody confirmed counts as written
				} else {
					// The batch's try may still land: a refusal of
					// the retry alone proves nothing about it.
					h.run.req.Now = t.now()
					err = afterUnknownTry(p.complete(dctx, t, h.run))
				}
			}
			reports[i] = p.completed(h.ctx, t, h.run, err)
		})
	}

	// The failures are recorded once the successes' completions are sent:
	// a success's effect waits unrecorded for the lane's last handler and
	// no longer. A handler that honours its context returns a margin
	// before the deadline, room for one write, not for a batch-mate's
	// failure (a dead-lettering takes three writes and a send) and the
	// completions after it; a failure waiting one write more loses
	// nothing.
	var failed []int
	for k := range heads {
		if heads[k].failed != nil {
			failed = append(failed, k)
		}
	}
	t.rt.Each(len(failed), p.c.concurrency, func(j int) {
		h := &heads[failed[j]]
		reports[wave[failed[j]][0]] = p.afterHandler(h.ctx, t, h.failed)
	})
	if p.observed() {
		for k := range heads {
			i := wave[k][0]
			p.recordEnd(heads[k].ctx, &reports[i])
		}
	}

	// The rest of each group, in order, once its first record is done.
	var rest [][]int
	for _, g := range wave {
		if len(g) > 1 {
			rest = append(rest, g)
		}
	}
	t.rt.Each(len(rest), p.c.concurrency, func(j int) {
		g := rest[j]
		p.runRecords(ctx, t, recs, keys, g[1:], stopsGroup(reports[g[0]]), reports)
	})
}

// claimAll claims reqs in one request (a single Claim for one).
func (p *sqsProcessor) claimAll(ctx context.Context, reqs []idemstore.ClaimRequest) []idemstore.BatchClaim {
	switch len(reqs) {
	case 0:
		return nil
	case 1:
		cr, err := p.store.Claim(ctx, reqs[0])
		return []idemstore.BatchClaim{{Result: cr, Err: err}}
	}
	out := p.store.(idemstore.Batcher).ClaimBatch(ctx, reqs)
	if len(out) != len(reqs) {
		// A store that answered another number of keys answered none
		// of them that can be trusted.
		err := fmt.Errorf("%w: ClaimBatch answered %d of %d claims", ErrStoreUnavailable, len(out), len(reqs))
		out = make([]idemstore.BatchClaim, len(reqs))
		for i := range out {
			out[i].Err = err
		}
	}
	return out
}

// completeAll completes reqs in one request (a single Complete for one).
func (p *sqsProcessor) completeAll(ctx context.Context, reqs []idemstore.CompleteRequest) []error {
	if len(reqs) == 1 {
		return []error{p.store.Complete(ctx, reqs[0])}
	}
	errs := p.store.(idemstore.Batcher).CompleteBatch(ctx, reqs)
	if len(errs) != len(reqs) {
		err := fmt.Errorf("%w: CompleteBatch answered %d of %d completions", ErrStoreUnavailable, len(errs), len(reqs))
		errs = make([]error, len(reqs))
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
}
