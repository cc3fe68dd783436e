package sim

import (
	"context"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

// hook checks each invocation's reports as the decorator hands them over.
func (s *Scenario) hook(rep *lambdaidem.InvocationReport) {
	w := s.w
	var start time.Time
	if w.cur != nil && w.cur.owner != nil {
		start = s.starts[w.cur.owner]
	}
	if s.Cfg.FIFO {
		// FIFO order within the batch: once a record of a group is not
		// acknowledged, the group's later records neither run nor are
		// acknowledged.
		var stoppedBy map[string]string
		for _, r := range rep.Records {
			if r.Outcome == lambdaidem.OutcomeSkippedGroup {
				s.groupStops++
			}
			if by := stoppedBy[r.MessageGroupID]; by != "" && (r.HandlerRan || r.Acked) {
				s.violate(InvFIFO, "FIFO order: message %s of group %s ran or was acknowledged (%s) although %s, before it in the batch, was not acknowledged",
					r.MessageID, r.MessageGroupID, r.Outcome, by)
			}
			if !r.Acked && stoppedBy[r.MessageGroupID] == "" {
				if stoppedBy == nil {
					stoppedBy = map[string]string{}
				}
				stoppedBy[r.MessageGroupID] = r.MessageID
			}
		}
	}
	for _, r := range rep.Records {
		if r.Key != "" {
			s.msgKey[r.MessageID] = r.Key
		}
		if r.Outcome == lambdaidem.OutcomeUnrecorded && w.cur != nil && w.cur.owner != nil {
			s.key(r.Key).unrecorded[r.Attempt] = s.container[w.cur.owner]
		}
		switch r.Outcome {
		case lambdaidem.OutcomeDuplicate:
			s.duplicateAnswer(r)
		case lambdaidem.OutcomeProcessed:
			if s.Cfg.Tx && len(s.ledger.Tx[r.Key]) == 0 {
				s.violate(InvAckEffect, "message %s acknowledged as processed but its effect on %s never committed", r.MessageID, r.Key)
			}
		case lambdaidem.OutcomeCachedDuplicate:
			// The answer came at some moment of this invocation: a
			// completion of the key must have applied by now, with its
			// record and result not yet expired when the invocation
			// started. An operator's delete may not reach this
			// environment's cache within its TTL (documented staleness),
			// and the completions the checker saw still count then. (A
			// store may keep its times a little longer: timeSlack.)
			f := s.key(r.Key)
			switch {
			case len(f.completions) == 0:
				rec, err := s.raw.Get(context.Background(), idemstore.GetRequest{Namespace: s.ns, Key: r.Key, Now: w.now})
				s.violate(InvCache, "message %s answered from the cache, but %s never completed (the store has it %s, %v)", r.MessageID, r.Key, rec.Status, err)
			case !f.completedUntilAfter(start.Add(-timeSlack(s.raw))):
				s.violate(InvCache, "message %s answered from the cache after every completion of %s had expired or its result retention ended (a late replay)", r.MessageID, r.Key)
			}
		}
	}
}

// checkedSink is the real SQS sink, with the checker watching each copy
// and kill points around the send.
type checkedSink struct {
	s    *Scenario
	sink *sqsqueue.Sink
}

func (k *checkedSink) Send(ctx context.Context, dl lambdaidem.DeadLetter) (string, error) {
	s := k.s
	w := s.w
	if s.Cfg.Kill > 0 && w.cur != nil && w.cur.owner != nil && w.rng.Float64() < s.Cfg.Kill {
		w.Logf("kill %s before the dead-letter send", w.cur.owner.Name)
		w.KillCurrent()
	}
	if dl.Reason == "" {
		s.violate(InvReasons, "dead-letter copy of %s without a reason", dl.Message.MessageId)
	}
	// The reason must say why. A message that cannot be keyed goes with
	// the reason that says why.
	switch kind := s.body(dl.Message.Body).Kind; {
	case kind == "malformed" && s.unkeyable(kind) && dl.Reason != idemstore.ReasonMalformedBody,
		kind != "malformed" && dl.Reason == idemstore.ReasonMalformedBody:
		s.violate(InvReasons, "message %s (%s body) dead-lettered as %s: a malformed body, and only one, is dead-lettered as %s", dl.Message.MessageId, kind, dl.Reason, idemstore.ReasonMalformedBody)
	case kind == "badkey" && s.unkeyable(kind) && dl.Reason != idemstore.ReasonMissingKey:
		s.violate(InvReasons, "message %s, whose key function panics, dead-lettered as %s, want %s", dl.Message.MessageId, dl.Reason, idemstore.ReasonMissingKey)
	}
	switch dl.Reason {
	case idemstore.ReasonPoison, idemstore.ReasonMaxAttempts, idemstore.ReasonOutcomeUnknown:
		// Sent by a lease holder: the work must not be done already.
		if dl.Key == "" {
			s.violate(InvReasons, "message %s dead-lettered as %s, a lease holder's reason, but no key could be derived from it", dl.Message.MessageId, dl.Reason)
			break
		}
		rec, err := s.raw.Get(ctx, idemstore.GetRequest{Namespace: s.ns, Key: dl.Key, Now: w.now})
		if err == nil && rec.Status == idemstore.StatusCompleted {
			s.violate(InvReasons, "message %s dead-lettered (%s) although key %s is COMPLETED: a stale holder sends finished work to the DLQ", dl.Message.MessageId, dl.Reason, dl.Key)
		}
	case idemstore.ReasonKeyConflict:
		// Another payload holds the key. (Checked while the key has had
		// one generation: the record read now is the one the claim met.)
		rec, err := s.raw.Get(ctx, idemstore.GetRequest{Namespace: s.ns, Key: dl.Key, Now: w.now})
		if f := s.facts[dl.Key]; err == nil && f != nil && len(f.genHash) == 1 && f.genBody[rec.Fence.Generation] == dl.Message.Body {
			s.violate(InvReasons, "message %s dead-lettered as key_conflict, but its payload is the one key %s was first claimed with", dl.Message.MessageId, dl.Key)
		}
	case idemstore.ReasonMissingKey:
		if dl.Key != "" {
			s.violate(InvReasons, "message %s dead-lettered as missing_key, but it has the key %s", dl.Message.MessageId, dl.Key)
		}
	}
	id, err := k.sink.Send(ctx, dl)
	s.largeCopy(dl, err)
	if err != nil {
		return id, err
	}
	s.copies[dl.Message.MessageId]++
	s.keyDLQ[dl.Key]++
	if dl.Reason == idemstore.ReasonKeyConflict {
		s.conflicts++
	}
	s.bodyOf[id] = dl.Message.Body
	w.Logf("dead-lettered %s (%s) as %s", dl.Message.MessageId, dl.Reason, id)
	if s.Cfg.Kill > 0 && w.cur != nil && w.cur.owner != nil && w.rng.Float64() < s.Cfg.Kill {
		w.Logf("kill %s after the dead-letter send", w.cur.owner.Name)
		w.KillCurrent()
	}
	return id, nil
}
