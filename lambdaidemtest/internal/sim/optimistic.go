package sim

import (
	"errors"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// optimisticEnv draws whether a new execution environment runs the
// optimistic mode (Config.Optimistic): only for effects committed with the
// completion, on a store that commits without a lease.
func (s *Scenario) optimisticEnv() bool {
	c := s.Cfg
	if c.Optimistic <= 0 || !c.Tx {
		return false
	}
	if !commits(s.store) {
		return false
	}
	return c.Optimistic >= 1 || s.w.rng.Float64() < c.Optimistic
}

// buildOptimistic builds a decorator in the optimistic mode. With an
// option only a lease can serve, the decorator must refuse the mode when
// built, naming ErrNeedsLease; the environment then runs in lease mode,
// as a user would after reading the panic.
func (s *Scenario) buildOptimistic(opts []lambdaidem.Option) SQSHandler {
	opts = append(opts, lambdaidem.WithOptimisticCommit())
	needsLease := s.Cfg.AtMostOnce || s.Cfg.Heartbeat > 0
	var h SQSHandler
	err := lambdaidem.Check(func() { h = s.build(opts) })
	switch {
	case needsLease && !errors.Is(err, lambdaidem.ErrNeedsLease):
		s.violate(InvCommit, "WithOptimisticCommit with WithAtMostOnce or WithHeartbeat was built (%v): the mode holds no lease for them", err)
	case needsLease:
		s.w.Logf("decorator refused WithOptimisticCommit: %v; built in lease mode", err)
		return s.build(opts[:len(opts)-1])
	case err != nil:
		s.violate(InvCommit, "WithOptimisticCommit refused on a store that commits: %v", err)
		return s.build(opts[:len(opts)-1])
	}
	s.nOptimistic++
	return h
}

// commits reports whether store commits without a lease all the way
// down: the simulation's wrappers implement idemstore.Committer whatever
// they wrap.
func commits(store idemstore.Store) bool {
	switch s := store.(type) {
	case *FaultStore:
		return commits(s.Store)
	case *TxStore:
		return commits(s.Store)
	}
	_, ok := store.(idemstore.Committer)
	return ok
}

// storedKeyOf is the stored key of an SQS message under the scenario's key
// option, for a run without a lease (which carries no key).
func (s *Scenario) storedKeyOf(msg events.SQSMessage) string {
	switch s.Cfg.KeyBy {
	case "id":
		return idemstore.StoredKey(msg.MessageId)
	case "attr":
		if a, ok := msg.MessageAttributes[keyAttribute]; ok && a.StringValue != nil {
			return idemstore.StoredKey(*a.StringValue)
		}
	}
	return idemstore.StoredKey(s.body(msg.Body).Key)
}

// onCommit checks a commit of the optimistic mode against the record it
// met, and records what an applied one wrote as a claim and a completion
// together.
//
// A commit applies only where a claim would: the key absent or expired,
// FAILED with the same payload, or IN_PROGRESS with the same payload under
// a lease that ended more than the grace ago and carries no pending
// dead-letter mark. Over a live lease it would
// let a lease-mode holder and an optimistic run both believe they own the
// key; over a COMPLETED or DEAD_LETTERED record or another payload it
// would commit a second effect, or the wrong payload's.
func (s *Scenario) onCommit(req idemstore.CommitRequest, res idemstore.CommitResult, before idemstore.Record, berr error) {
	if !res.Committed || res.AtLimit {
		return
	}
	f := s.key(req.Key)
	own := berr == nil && before.LeaseToken == req.Token && before.Status == req.Status
	if own {
		return // a retry that met its own earlier try
	}
	live := berr == nil
	switch {
	case live && before.PayloadHash != req.PayloadHash:
		s.violate(InvCommit, "key %s: a commit of message %s applied over a record of another payload (%s)", req.Key, req.MessageID, before.Status)
	case live && (before.Status == idemstore.StatusCompleted || before.Status == idemstore.StatusDeadLettered):
		s.violate(InvCommit, "key %s: a commit of message %s applied over a %s record", req.Key, req.MessageID, before.Status)
	case live && before.Status == idemstore.StatusInProgress && !before.LeaseUntil.Add(req.Grace).Before(req.Now):
		s.violate(InvCommit, "key %s: a commit of message %s applied over a live lease (attempt %d, until %s, now %s)",
			req.Key, req.MessageID, before.Attempts, before.LeaseUntil.Sub(Epoch), req.Now.Sub(Epoch))
	case live && before.Status == idemstore.StatusInProgress && before.DeadLetterReason != "":
		s.violate(InvCommit, "key %s: a commit of message %s applied over an abandoned lease that was dead-lettering its message (%s): only a claim may take it over, to finish that",
			req.Key, req.MessageID, before.DeadLetterReason)
	}
	s.nCommits++
	// What a claim would have noted: the record's token, its generation's
	// first payload.
	f.claims++
	f.token = req.Token
	switch {
	case !live:
		// A new record, as a claim's: attempts count from 1 again.
		clear(f.unrecorded)
		clear(f.revoked)
		if f.claims > 1 {
			f.fresh++
			s.w.Logf("fresh generation of %s by a commit of %s", req.Key, req.MessageID)
		}
	case before.Status == idemstore.StatusInProgress:
		f.takeovers++
		s.w.Logf("takeover of %s by a commit of %s", req.Key, req.MessageID)
	}
	gen := res.Record.Fence.Generation
	body := s.svc.Body(req.MessageID)
	s.tokens[req.Token] = claimFacts{key: req.Key, gen: gen, hash: req.PayloadHash, msg: req.MessageID, body: body}
	if first, ok := f.genHash[gen]; !ok {
		f.genHash[gen], f.genBody[gen] = req.PayloadHash, body
	} else if first != req.PayloadHash {
		s.violate(InvWhose, "key conflict: message %s committed key %s with another payload than generation %s's first claim", req.MessageID, req.Key, gen)
	}
	if req.Status != idemstore.StatusCompleted {
		return
	}
	// What a completion would have noted.
	until := req.ExpiresAt
	if !req.ResultUntil.IsZero() && (until.IsZero() || req.ResultUntil.Before(until)) {
		until = req.ResultUntil
	}
	f.completions = append(f.completions, until)
	if body != "" {
		f.completedBody[body] = true
	}
}
