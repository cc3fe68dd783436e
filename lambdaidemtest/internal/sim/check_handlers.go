package sim

import (
	"context"
	"slices"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// handle is the user's handler: it reads its behaviour from the body and
// records its effect in the ledger (or commits it with the completion).
func (s *Scenario) handle(ctx context.Context, msg events.SQSMessage) error {
	w := s.w
	b := s.body(msg.Body)
	lease, leased := lambdaidem.LeaseFromContext(ctx)
	if !leased {
		// A first delivery of the optimistic mode: no lease, so no claim's
		// facts either; two copies may run at once, and the commit decides.
		lease.Key = s.storedKeyOf(msg)
	}
	k := lease.Key
	f := s.key(k)
	s.bodyOf[msg.MessageId] = msg.Body
	if s.Cfg.Observe {
		s.obs.Handler(ctx, msg.MessageId, "")
	}
	if leased {
		me := &running{ctx: ctx, proc: w.cur.owner, msg: msg.MessageId, token: lease.Token}
		s.enter(k, me, lease.Attempt)
		defer s.leave(k, me)
		if d := f.decided[lease.Fence.Generation]; d != "" {
			s.violate(InvResolve, "key %s: message %s runs attempt %d of generation %s, which an operator resolved as %s: it must never run again",
				k, msg.MessageId, lease.Attempt, lease.Fence.Generation, d)
		} else {
			s.notUnknown(f, k, lease, msg.MessageId)
		}
	}
	f.runs++
	w.Logf("handler %s key %s attempt %d (leased %v)", msg.MessageId, k, lease.Attempt, leased)
	s.inOrder(msg.MessageId)
	if tc, ok := s.tokens[lease.Token]; ok && tc.msg != msg.MessageId {
		s.violate(InvWhose, "key %s: the handler runs message %s under the lease message %s claimed", k, msg.MessageId, tc.msg)
	}
	if dl, ok := ctx.Deadline(); ok && leased {
		// A slow claim may leave a handler little time, but its context
		// must end after the claim was made: one that ended before gives
		// every attempt a dead context, whatever the store's luck.
		if at, ok := s.claimAt[lease.Token]; ok && !dl.After(at) {
			s.violate(InvProgress, "handler for %s on key %s got a context that ended at %.3fs, before its claim at %.3fs: no attempt can succeed",
				msg.MessageId, k, dl.Sub(Epoch).Seconds(), at.Sub(Epoch).Seconds())
		}
	}
	effect := func() error { return s.effect(ctx, f, k, lease, msg.MessageId, msg.Body) }
	slow := func() error {
		for range b.Slow {
			w.Sleep(time.Second)
			s.stopped(ctx, k, lease)
			if b.Honour && ctx.Err() != nil {
				return ctx.Err()
			}
		}
		return nil
	}
	switch {
	case b.Kind == "poison":
		return lambdaidem.Poison(errPoison)
	case b.Kind == "poison1" && f.runs == 1:
		if err := slow(); err != nil {
			return err
		}
		return lambdaidem.Poison(errPoison)
	case b.Kind == "poison1":
		return effect()
	case b.Panic && f.runs == 1:
		panic("simulated handler panic on message " + msg.MessageId)
	case f.runs <= b.Fail && b.NA:
		return lambdaidem.NotApplied(errTransient)
	case f.runs <= b.Fail && b.RetryIn > 0:
		return lambdaidem.RetryAfter(time.Duration(b.RetryIn)*time.Second, errTransient)
	case f.runs <= b.Fail:
		return errTransient
	case b.After == unknownBefore && f.runs == 1:
		return lambdaidem.OutcomeUnknown(errAnswerLost)
	case b.After != 0 && f.runs == 1:
		if err := effect(); err != nil {
			return err
		}
		if b.After == afterUnknown {
			return lambdaidem.OutcomeUnknown(errAnswerLost)
		}
		if !s.Cfg.Tx {
			// At-least-once retries it, and the effect repeats; at most
			// once must not.
			f.failedAfterEffect++
		}
		return errAnswerLost
	case b.First:
		if err := effect(); err != nil {
			return err
		}
		if err := slow(); err != nil {
			if !s.Cfg.Tx {
				f.failedAfterEffect++
			}
			return err
		}
		return nil
	}
	if err := slow(); err != nil {
		return err
	}
	return effect()
}

// notUnknown checks a handler starting under lease on key k: its
// generation's outcome must not have been recorded unknown (the handler
// said so, or at-most-once mode found it so), in either mode, unless an
// operator reset or released the record since.
func (s *Scenario) notUnknown(f *keyFacts, k string, lease idemstore.Lease, by string) {
	if f.unknownGen[lease.Fence.Generation] {
		s.violate(InvAMO, "outcome unknown: key %s runs again (%s, attempt %d) in generation %s, whose outcome was recorded unknown",
			k, by, lease.Attempt, lease.Fence.Generation)
	}
}

// enter records a handler starting on key k, and checks that no other
// handler on k still runs with a live context: its lease would still be
// valid, or the decorator failed to end its context when the lease ended.
//
// An operator who forces a release or a forget revokes a lease that is
// still valid: the key is taken over only once the revoked lease has run
// out, so this holds then too; and once the holder's heartbeat had an
// extension refused, its context must have ended at once.
func (s *Scenario) enter(k string, me *running, attempt int) {
	for _, o := range s.run[k] {
		if o.proc.Dead() || o.ctx.Err() != nil {
			continue
		}
		switch {
		case s.refused[o.token]:
			s.violate(InvTwoHandlers, "key %s: %s's lease extension was refused (an operator revoked the lease), but its handler's context is still live as %s starts (attempt %d)", k, o.msg, me.msg, attempt)
		default:
			s.violate(InvTwoHandlers, "two handlers on key %s at once: %s (context still live) and %s (attempt %d)", k, o.msg, me.msg, attempt)
		}
	}
	s.run[k] = append(s.run[k], me)
	s.beats(me)
}

// stopped checks a running handler: once its heartbeat's extension was
// refused, its context must have ended (the decorator cancels it at once).
func (s *Scenario) stopped(ctx context.Context, k string, lease idemstore.Lease) {
	s.alive(ctx, k, lease)
	if s.refused[lease.Token] && ctx.Err() == nil {
		s.violate(InvTwoHandlers, "key %s: the store refused attempt %d's lease extension (the lease was revoked), but its handler's context is still live", k, lease.Attempt)
		delete(s.refused, lease.Token) // once per lease
	}
}

func (s *Scenario) leave(k string, me *running) {
	s.run[k] = slices.DeleteFunc(s.run[k], func(r *running) bool { return r == me })
}

// effect has the handler's effect on key k: committed with the completion
// (Tx), or written to the ledger at once; a kill point follows.
//
// Whose effect: the effect must come from the payload the generation was
// first claimed with (body, for SQS messages; "" when the checker has no
// body to compare).
func (s *Scenario) effect(ctx context.Context, f *keyFacts, k string, lease idemstore.Lease, by, body string) error {
	w := s.w
	s.stopped(ctx, k, lease)
	s.effectKey(ctx, k, lease, by)
	gen := lease.Fence.Generation
	if tc, ok := s.tokens[lease.Token]; ok && tc.hash != f.genHash[gen] {
		s.violate(InvWhose, "whose effect: key %s has an effect by %s, whose payload is not the one generation %s was first claimed with", k, by, gen)
	} else if first := f.genBody[gen]; body != "" && first != "" && body != first {
		s.violate(InvWhose, "whose effect: key %s has an effect by %s with body %s, but generation %s was first claimed with body %s", k, by, body, gen, first)
	}
	if s.Cfg.Tx {
		return lambdaidem.AddCompletionWrite(ctx, Effect{Key: k, By: by})
	}
	if s.Cfg.Keyed && !s.keyedEffect(ctx, f, k, gen, by) {
		return nil // the downstream recognised the repeat: nothing happened
	}
	s.ledger.Plain[k] = append(s.ledger.Plain[k], by)
	f.gens[gen]++
	// At most once: one effect per generation, and one more for each time
	// an operator decided to run it again although its outcome was
	// unknown (a not_applied decision, or a redrive asked by name to send
	// outcome_unknown copies back). Redrives of other copies add none:
	// their attempts never had the effect.
	switch n := f.gens[gen]; {
	case !s.Cfg.AtMostOnce || n <= 1+f.reruns[gen]:
	case f.notApplied[gen] > 0:
		s.violate(InvResolve, "key %s had its effect %d times in generation %s, though an operator resolved it as not applied only %d times (and ran it again %d times in all): each decision runs it at most once more",
			k, n, gen, f.notApplied[gen], f.reruns[gen])
	default:
		s.violate(InvAMO, "at-most-once: key %s had its effect %d times in one generation (%d operator decisions to run it again)", k, n, f.reruns[gen])
	}
	if s.Cfg.Kill > 0 && w.rng.Float64() < s.Cfg.Kill {
		w.Logf("kill %s after the effect", w.cur.owner.Name)
		w.KillCurrent()
	}
	return nil
}

// completedUntilAfter reports whether a completion of the key had its
// record and result still kept at t.
func (f *keyFacts) completedUntilAfter(t time.Time) bool {
	for _, until := range f.completions {
		if until.IsZero() || until.After(t) {
			return true
		}
	}
	return false
}

func (s *Scenario) onClaim(req idemstore.ClaimRequest, res idemstore.ClaimResult) {
	f := s.key(req.Key)
	f.claims++
	f.token = res.Lease.Token
	s.claimAt[res.Lease.Token] = req.Now
	if req.Namespace == s.ns {
		s.sqsKeys[req.Key] = true
	}
	gen := res.Lease.Fence.Generation
	tc := claimFacts{key: req.Key, gen: gen, hash: req.PayloadHash, msg: req.MessageID, body: s.svc.Body(req.MessageID)}
	s.tokens[res.Lease.Token] = tc
	if first, ok := f.genHash[gen]; !ok {
		f.genHash[gen], f.genBody[gen] = req.PayloadHash, tc.body
	} else if first != req.PayloadHash {
		s.violate(InvWhose, "key conflict: message %s claimed key %s with another payload than generation %s's first claim: it must be refused as a key conflict", req.MessageID, req.Key, gen)
	}
	switch res.Previous {
	case idemstore.StatusFailed:
		if r := res.Record; r.DeadLetterReason != "" {
			// A failure ends a dead-lettering whose copy was not sent:
			// left on the record, its reason would be the one a
			// takeover of this new claim finishes the dead-lettering
			// with (poison, say, where the abandoned run's outcome is
			// unknown).
			s.violate(InvReasons, "key %s: %s claimed a FAILED record that still carries a pending dead-letter mark (%s, message %s)", req.Key, req.MessageID, r.DeadLetterReason, r.DeadLetteredMessageID)
		}
	case idemstore.StatusInProgress:
		f.takeovers++
		var by string
		if w := s.w; w.cur != nil && w.cur.owner != nil {
			by = s.container[w.cur.owner]
		}
		s.w.Logf("takeover of %s by %s in %s (attempt %d)", req.Key, req.MessageID, by, res.Lease.Attempt)
		if c, ok := f.unrecorded[res.Lease.Attempt-1]; ok && c == by && by != "" && !f.revoked[res.Lease.Attempt-1] {
			// The container remembers that attempt's completion: it must
			// write it, never run the handler again.
			s.violate(InvUnrecorded, "key %s: %s took over attempt %d, whose completion it acknowledged unrecorded and remembers", req.Key, by, res.Lease.Attempt-1)
		}
	case "":
		// A new record (the first, or after a forget or an expiry):
		// attempts count from 1 again, so what a container remembers of
		// the old record's attempts names other leases.
		clear(f.unrecorded)
		clear(f.revoked)
		if f.claims > 1 {
			f.fresh++
			s.w.Logf("fresh generation of %s by %s", req.Key, req.MessageID)
		}
	}
}

// keyedEffect is the handler's effect sent to a downstream system keyed by
// lambdaidem.EffectKey (Config.Keyed): it reports whether the downstream
// applied it, which it does once per effect key. It checks that a
// generation's runs all give one effect key, so that the downstream sees
// every retry, takeover and redrive of the generation as a repeat.
func (s *Scenario) keyedEffect(ctx context.Context, f *keyFacts, k, gen, by string) bool {
	ek, ok := lambdaidem.EffectKey(ctx)
	if !ok {
		// An optimistic first delivery has no generation, so no key: the
		// downstream cannot tell its repeat (docs/effects.md).
		return true
	}
	if prev, seen := f.effectKey[gen]; seen && prev != ek {
		// The keys themselves are left out: they derive from the
		// generation, which is random, and traces must replay alike.
		s.violate(InvKeyed, "effect key: the run of key %s by %s gave the downstream another effect key than the generation's earlier runs: the downstream takes it for new work", k, by)
	}
	f.effectKey[gen] = ek
	if s.ledger.Keyed[ek] {
		s.w.Logf("the downstream recognises the effect key of %s (run by %s): nothing happens", k, by)
		return false
	}
	s.ledger.Keyed[ek] = true
	return true
}
