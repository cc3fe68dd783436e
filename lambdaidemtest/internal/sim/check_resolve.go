package sim

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

// resolve is an operator deciding on the records whose outcome is unknown,
// with the real sqsqueue.Resolve against the simulated queues, as the
// CLI's resolve does. The operator finds out what a person would (the
// checker's ledger says whether the generation had its effect) and decides
// applied or not applied, or with chance Cfg.Abandon abandons the record;
// Resolve refuses a record marked less than the function's timeout ago
// (an abandoned attempt may still run until its invocation ends). The
// decisions go through decisionChecker, which notes what the checker then
// holds the world to (InvResolve).
func (s *Scenario) resolve() {
	a := s.admin()
	if a == nil {
		return
	}
	w := s.w
	ctx := context.Background()
	var recs []idemstore.Record
	for r, err := range a.ListOpen(ctx, idemstore.ListOpenRequest{Status: idemstore.StatusDeadLettered, Namespace: s.ns, Now: w.now}) {
		if err != nil {
			w.Logf("operator: resolve: list: %v", err)
			return
		}
		// SQS keys with a copy: a Wrap record's client may retry beside
		// the decision, which the checker does not model.
		if r.Uncertain() && r.DeadLetterMessageID != "" && s.sqsKeys[r.Key] {
			recs = append(recs, r)
		}
	}
	slices.SortFunc(recs, func(x, y idemstore.Record) int { return strings.Compare(x.Key, y.Key) })
	urls := s.svc.QueueURLs()
	sources := make([]string, 0, len(urls))
	for arn := range urls {
		sources = append(sources, arn)
	}
	slices.Sort(sources)
	for _, r := range recs {
		f := s.key(r.Key)
		d := idemstore.ResolutionNotApplied
		if f.gens[r.Fence.Generation] > 0 {
			d = idemstore.ResolutionApplied
		}
		if w.rng.Float64() < s.Cfg.Abandon {
			d = idemstore.ResolutionAbandoned
		}
		res, err := sqsqueue.Resolve(ctx, sqsqueue.ResolveOptions{
			Store: &decisionChecker{Admin: a, s: s}, Record: r, Decision: d, By: "sim operator", Note: "looked at the ledger",
			FunctionTimeout: s.Cfg.Timeout,
			Queue: sqsqueue.RedriveOptions{
				Client: s.svc, DeadLetterQueueURL: s.dlq.URL, SourceQueues: sources, QueueURLs: urls, WaitTime: -1,
			},
			Now: func() time.Time { return w.now },
		})
		switch {
		case errors.Is(err, sqsqueue.ErrTooSoon):
			w.Logf("operator: resolve %s: too soon", r.Key)
		case err != nil:
			w.Logf("operator: resolve %s as %s: %v", r.Key, d, err)
		default:
			w.Logf("operator: resolved %s as %s (copy %s: %s)", r.Key, d, r.DeadLetterMessageID, orNone(string(res.Copy.Outcome)))
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// decisionChecker is the store's Resolve with the checker watching: a
// decision that applied must have met a record whose outcome was unknown,
// and notes what the world must then do. It notes the decision as the
// store answers, before Resolve sends the copy back, so that no run of the
// key comes before the note.
type decisionChecker struct {
	idemstore.Admin
	s *Scenario
}

func (c *decisionChecker) Resolve(ctx context.Context, req idemstore.ResolveRequest) (idemstore.Record, error) {
	s := c.s
	before, gerr := c.Admin.Get(ctx, idemstore.GetRequest{Namespace: req.Namespace, Key: req.Key, Now: req.Now})
	rec, err := c.Admin.Resolve(ctx, req)
	if err != nil {
		return rec, err
	}
	if gerr != nil || !before.Uncertain() || before.LeaseToken != req.Token {
		s.violate(InvResolve, "a decision (%s) applied to key %s, whose record was %s (%s, resolution %q), not the uncertain record the operator read",
			req.Decision, req.Key, before.Status, before.DeadLetterReason, before.Resolution)
	}
	gen := before.Fence.Generation
	f := s.key(req.Key)
	s.decisions[req.Decision]++
	switch req.Decision {
	case idemstore.ResolutionApplied:
		// A completion of the generation's payload, as the decorator's
		// would have been: caches and duplicates may answer from it.
		f.decided[gen] = req.Decision
		f.completions = append(f.completions, rec.ExpiresAt)
		if b := f.genBody[gen]; b != "" {
			f.completedBody[b] = true
		}
	case idemstore.ResolutionAbandoned:
		f.decided[gen] = req.Decision
	case idemstore.ResolutionNotApplied:
		// A reset, as a redrive's: attempts count from 1 again.
		f.redrives++
		f.reruns[gen]++
		f.notApplied[gen]++
		delete(f.unknownGen, gen) // the operator's decision to run it again
		clear(f.unrecorded)
		clear(f.revoked)
	}
	return rec, nil
}
