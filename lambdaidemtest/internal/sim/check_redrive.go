package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

// operators schedules redrives, forgets and releases at random moments,
// out of band: an operator acts whatever the function is doing, and may
// force a live lease.
func (s *Scenario) operators() {
	c, w := s.Cfg, s.w
	span := c.SendOver + Horizon/2
	for range c.Redrive {
		at := time.Duration(w.rng.Int64N(int64(span)))
		w.At(at, nil, func() { w.Spawn("redrive", nil, s.redrive) })
	}
	s.inspections()
	for range c.Forget {
		at := time.Duration(w.rng.Int64N(int64(span)))
		w.At(at, nil, func() { w.Spawn("forget", nil, s.forget) })
		at = time.Duration(w.rng.Int64N(int64(span)))
		w.At(at, nil, func() { w.Spawn("release", nil, s.release) })
	}
	for range c.Resolve {
		at := time.Duration(w.rng.Int64N(int64(span)))
		w.At(at, nil, func() { w.Spawn("resolve", nil, s.resolve) })
	}
}

// redrive runs the real sqsqueue.Redrive against the simulated queues,
// resetting records through the store's conditional reset, and checks
// each reset.
func (s *Scenario) redrive() {
	w := s.w
	s.redriveRuns++
	run := s.redriveRuns
	w.Logf("operator: redrive run %d", run)
	defer func() {
		s.redriveEnded++
		w.Logf("operator: redrive run %d ended", run)
	}()
	urls := s.svc.QueueURLs()
	sources := make([]string, 0, len(urls))
	for arn := range urls {
		sources = append(sources, arn)
	}
	slices.Sort(sources)
	// Sometimes the operator sends outcome_unknown copies back too, by
	// name: a decision to run them again.
	uncertain := s.Cfg.RedriveUncertain > 0 && w.rng.Float64() < s.Cfg.RedriveUncertain
	if uncertain {
		w.Logf("operator: redrive run %d sends outcome_unknown copies back too", run)
	}
	rc := &resetChecker{s: s, run: run, sent: map[string]bool{}, uncertain: uncertain}
	_, err := sqsqueue.Redrive(context.Background(), sqsqueue.RedriveOptions{
		Client:                s.svc,
		DeadLetterQueueURL:    s.dlq.URL,
		SourceQueues:          sources,
		QueueURLs:             urls,
		WaitTime:              -1,
		Resetter:              rc,
		Records:               s.store.Store,
		IncludeOutcomeUnknown: uncertain,
		Marker:                s.store.Store,
		Progress: func(ev sqsqueue.RedriveEvent) {
			if ev.NewMessageID != "" {
				rc.sent[ev.Metadata.Key] = true
			}
			if ev.Outcome == sqsqueue.RedriveAlreadyDone {
				s.checkDone(run, ev)
			}
		},
		MaxRedrives: s.Cfg.MaxRedrives,
		Now:         func() time.Time { return s.w.now },
	})
	if err != nil {
		w.Logf("redrive: %v", err)
	}
}

// resetChecker is redrive's reset step: the store's conditional reset. It
// checks that a reset that applied only ever cleared a record this very
// DLQ copy dead-lettered, that a run never resets a key it already sent
// back (so it ends even on a message that is still poison), and that the
// record counts its redrives within the limit.
type resetChecker struct {
	s    *Scenario
	run  int
	sent map[string]bool // keys this run sent back to their queue
	// uncertain is set when the run was asked to send outcome_unknown
	// copies back (RedriveOptions.IncludeOutcomeUnknown).
	uncertain bool
}

func (r *resetChecker) ResetDeadLetter(ctx context.Context, req idemstore.ResetRequest) (idemstore.Record, error) {
	s := r.s
	// Each step of a redrive takes time, in which the function may take
	// the messages already sent back (and dead-letter them again).
	s.w.Sleep(time.Duration(1+s.w.rng.IntN(2000)) * time.Millisecond)
	// Read at the reset's own time: the record may have expired since.
	before, gerr := s.raw.Get(ctx, idemstore.GetRequest{Namespace: req.Namespace, Key: req.Key, Now: req.Now})
	rs, ok := s.store.Store.(idemstore.DeadLetterResetter)
	if !ok {
		return idemstore.Record{}, fmt.Errorf("sim: store %T has no conditional reset", s.store.Store)
	}
	rec, err := rs.ResetDeadLetter(ctx, req)
	if err == nil && (gerr != nil || before.Status != idemstore.StatusDeadLettered || before.DeadLetterMessageID != req.DeadLetterMessageID) {
		s.violate(InvRedriveReset, "redrive reset key %s whose record was %s (DLQ copy %s), not dead-lettered by copy %s",
			req.Key, before.Status, before.DeadLetterMessageID, req.DeadLetterMessageID)
	}
	if err != nil {
		return rec, err
	}
	f := s.key(req.Key)
	f.redrives++
	clear(f.unknownGen) // the operator's decision to run it again
	s.resets++
	if gerr == nil && before.DeadLetterReason == idemstore.ReasonOutcomeUnknown {
		if r.uncertain {
			f.reruns[before.Fence.Generation]++
		} else {
			s.violate(InvAMO, "redrive run %d reset key %s, dead-lettered as outcome_unknown by copy %s, without being asked to send such copies back: its effect may have happened",
				r.run, req.Key, req.DeadLetterMessageID)
		}
	}
	// The reset record counts attempts from 1 again: what a container
	// remembers of earlier attempts names leases of before the reset.
	clear(f.unrecorded)
	clear(f.revoked)
	s.w.Logf("redrive run %d reset %s (copy %s, redriven %d times)", r.run, req.Key, req.DeadLetterMessageID, rec.Redrives)
	switch {
	case r.sent[req.Key]:
		s.violate(InvRedriveEnds, "redrive run %d reset key %s again after sending it back: a run must handle each key once, or it never ends on a message that is still poison", r.run, req.Key)
	case gerr == nil && rec.Redrives != before.Redrives+1:
		s.violate(InvRedriveEnds, "redrive reset key %s from %d redrives to %d: the record must count each redrive", req.Key, before.Redrives, rec.Redrives)
	case req.MaxRedrives > 0 && rec.Redrives > req.MaxRedrives:
		s.violate(InvRedriveEnds, "redrive reset key %s to %d redrives, beyond the limit %d", req.Key, rec.Redrives, req.MaxRedrives)
	}
	return rec, nil
}

// pickKey returns one key the world has claimed, or "". With live set it
// prefers a key whose handler runs now (what a forced operator action
// would cut short).
func (s *Scenario) pickKey(live bool) string {
	keys := make([]string, 0, len(s.facts))
	if live {
		for k, rs := range s.run {
			if len(rs) > 0 {
				keys = append(keys, k)
			}
		}
	}
	if len(keys) == 0 {
		for k := range s.facts {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return ""
	}
	slices.Sort(keys)
	return keys[s.w.rng.IntN(len(keys))]
}

// checkDone checks a copy redrive deleted as done: some message with the
// copy's body must have had its effect on the copy's key. Otherwise the
// copy's payload never ran, and deleting it lost the message.
func (s *Scenario) checkDone(run int, ev sqsqueue.RedriveEvent) {
	k, body := ev.Metadata.Key, s.bodyOf[ev.DeadLetterMessageID]
	for _, by := range slices.Concat(s.ledger.Plain[k], s.ledger.Tx[k]) {
		if s.bodyOf[by] == body {
			return
		}
	}
	s.violate(InvRedriveKeeps, "redrive run %d deleted DLQ copy %s (message %s, key %s) as done, but no message with its body had an effect on the key: its payload never ran (the record completed with payload hash %s)",
		run, ev.DeadLetterMessageID, ev.Metadata.MessageID, k, ev.Record.PayloadHash)
}

// admin is the store's operator interface, nil when the store has none
// (the scenario then runs no forget or release).
func (s *Scenario) admin() idemstore.Admin {
	a, _ := s.raw.(idemstore.Admin)
	return a
}

// forget is an operator forgetting one key with the store's Forget, as
// the CLI's forget does: sometimes forced (a live lease is revoked and the
// record forgotten once it has run out), sometimes abandoning a
// dead-lettered record's copy. It goes straight to the store: a forget
// held in the network and landing later would leave the checker behind.
func (s *Scenario) forget() {
	a := s.admin()
	if a == nil {
		return
	}
	rng := s.w.rng
	force := rng.Float64() < s.Cfg.ForceOps
	// A forced forget aims at a key whose handler runs, when there is one.
	k := s.pickKey(force)
	if k == "" {
		return
	}
	req := idemstore.ForgetRequest{
		Namespace: s.ns, Key: k, Now: s.w.now, Grace: s.Cfg.Grace,
		Force:       force,
		AbandonCopy: rng.Float64() < s.Cfg.AbandonCopy,
	}
	res, err := a.Forget(context.Background(), req)
	if err == nil {
		// Straight to the store, past OnDelete: count it here, so the
		// stranded check knows a forget (perhaps abandoning a copy) took
		// the record.
		s.key(k).forgotten++
	}
	switch {
	case err != nil:
		s.w.Logf("operator: forget %s (force %t, abandon copy %t) refused: %s", k, req.Force, req.AbandonCopy, refusal(err))
	case res.Revoked:
		s.revoke(k, res.Record.Attempts)
		s.w.Logf("operator: forget %s revoked the lease of %s; forgotten at %.3fs", k, res.Record.MessageID, res.ForgottenAt.Sub(Epoch).Seconds())
	default:
		s.w.Logf("operator: forget %s (was %s)", k, res.Record.Status)
	}
}

// revoke notes an operator's revocation of attempt's live lease on k: the
// key runs again once that lease has run out, even in a container that
// remembers (or will remember) the attempt's completion it could not
// record, whose late write the new token refuses.
func (s *Scenario) revoke(k string, attempt int) {
	s.nRevoked++
	s.key(k).revoked[attempt] = true
}

// refusal names why an operator call was refused, in words that do not
// depend on the run (an error's text holds the namespace, which does).
func refusal(err error) string {
	for _, e := range []error{idemstore.ErrNotFound, idemstore.ErrInProgress, idemstore.ErrWouldAbandonCopy,
		idemstore.ErrRecordChanged, idemstore.ErrNotInProgress, idemstore.ErrStoreUnavailable} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return "another error"
}

// release is an operator releasing a lease with the store's Release, as
// the CLI's release does: an IN_PROGRESS record whose lease ended becomes
// FAILED, so the next delivery runs at once instead of after a takeover;
// a live lease is refused, or when forced revoked, and then taken over
// once it has run out.
func (s *Scenario) release() {
	a := s.admin()
	if a == nil {
		return
	}
	force := s.w.rng.Float64() < s.Cfg.ForceOps
	// A forced release aims at a key whose handler runs, when there is one.
	k := s.pickKey(force)
	if k == "" {
		return
	}
	now := s.w.now
	rec, err := a.Get(context.Background(), idemstore.GetRequest{Namespace: s.ns, Key: k, Now: now})
	if err != nil || rec.Status != idemstore.StatusInProgress {
		return
	}
	if s.Cfg.AtMostOnce && !(force && idemstore.LeaseLive(rec, now, s.Cfg.Grace)) {
		// At most once: releasing an ended lease is the operator deciding
		// to run the key again, which the invariant would count against
		// the library. Revoking a live one is not: the key is then taken
		// over, and dead-lettered as outcome_unknown.
		return
	}
	out, err := a.Release(context.Background(), idemstore.ReleaseRequest{
		Namespace: s.ns, Key: k, Token: rec.LeaseToken, Now: now, Grace: s.Cfg.Grace, Force: force,
	})
	switch {
	case err != nil:
		s.w.Logf("operator: release %s (force %t) refused: %s", k, force, refusal(err))
	case out.Status == idemstore.StatusFailed:
		s.w.Logf("operator: release %s", k)
		s.key(k).released++
		clear(s.key(k).unknownGen) // the operator's decision to run it again
	default:
		s.revoke(k, out.Attempts)
		s.w.Logf("operator: release %s revoked the live lease of %s", k, out.MessageID)
	}
}
