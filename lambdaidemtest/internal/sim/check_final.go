package sim

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

// final checks what must hold once everything has stopped.
func (s *Scenario) final() {
	now := s.w.now
	if s.redriveEnded != s.redriveRuns {
		s.violate(InvRedriveEnds, "%d of %d redrive runs never ended", s.redriveRuns-s.redriveEnded, s.redriveRuns)
	}
	for _, id := range s.acked {
		k, ok := s.msgKey[id]
		if !ok {
			continue
		}
		if len(s.ledger.Plain[k])+len(s.ledger.Tx[k]) == 0 && s.copies[id] == 0 {
			s.violate(InvLost, "lost: message %s (key %s) was acknowledged with no effect and no dead-letter copy", id, k)
		}
	}
	for _, id := range s.badAcked {
		if s.copies[id] == 0 {
			s.violate(InvLost, "lost: message %s, whose key cannot be derived, was acknowledged with no dead-letter copy", id)
		}
	}
	keys := make([]string, 0, len(s.facts))
	for k := range s.facts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	queued := map[string]bool{}
	for _, q := range []*Queue{s.src, s.backstop} {
		if q != nil {
			for _, m := range q.Messages() {
				queued[s.keyOfMessage(m)] = true
			}
		}
	}
	for _, k := range keys {
		f := s.facts[k]
		if n := len(s.ledger.Tx[k]); n > 1+f.fresh {
			s.violate(InvTxOnce, "key %s: %d transactional effects (%d fresh generations): not exactly once", k, n, f.fresh)
		}
		if n := len(s.ledger.Plain[k]); n > 1+f.fresh+f.takeovers+f.failedAfterEffect+f.released+f.redrives {
			s.violate(InvRepeats, "key %s: %d effects, but only %d takeovers, %d releases, %d redrives, %d fresh generations and %d failures after an effect explain repeats",
				k, n, f.takeovers, f.released, f.redrives, f.fresh, f.failedAfterEffect)
		}
		rec, err := s.raw.Get(context.Background(), idemstore.GetRequest{Namespace: s.ns, Key: k, Now: now})
		if err != nil {
			continue
		}
		switch rec.Status {
		case idemstore.StatusCompleted:
			if len(s.ledger.Plain[k])+len(s.ledger.Tx[k]) == 0 {
				s.violate(InvFinal, "key %s is COMPLETED in the store but its effect never happened", k)
			}
		case idemstore.StatusDeadLettered:
			if s.keyDLQ[k] == 0 {
				s.violate(InvFinal, "key %s is DEAD_LETTERED in the store but no copy was ever sent to the dead-letter queue", k)
			}
		case idemstore.StatusInProgress:
			// Every lease has ended and deliveries have stopped: an
			// unfinished record must be explained by an effect that
			// happened (an unrecorded completion), a message still
			// queued, or a dead-letter copy. Requests (Wrap) are left
			// out: their clients may simply have stopped retrying.
			if s.sqsKeys[k] && len(s.ledger.Plain[k])+len(s.ledger.Tx[k]) == 0 && !queued[k] && s.keyDLQ[k] == 0 {
				s.violate(InvFinal, "key %s is stuck IN_PROGRESS with no effect, no queued message and no dead-letter copy", k)
			}
		}
	}
	for _, m := range s.dlq.Messages() {
		dm, err := sqsqueue.ParseEvent(s.dlq.Event(m))
		if err != nil {
			s.violate(InvReasons, "dead-letter copy %s cannot be parsed: %v", m.ID, err)
			continue
		}
		if dm.Metadata.Reason == "" {
			s.violate(InvReasons, "dead-letter copy %s has no reason", m.ID)
		}
		s.stranded(m.ID, dm, queued, now)
	}
	s.eventually()
}

// redrivenFor reports whether rec was reset by a redrive of this copy, or
// of another copy of the same payload (a message dead-lettered twice): its
// payload went back to the queue, whatever a claim held in the network did
// to the record after the reset. This copy is then sent again with
// RedriveOptions.Resend, or is a spare of the copy that went back (deleted
// as done once the key completes with its payload; by hand when the key
// was the message ID and the payload ran under a new one).
func redrivenFor(rec idemstore.Record, copyID string, md sqsqueue.Metadata) bool {
	return rec.RedrivenFrom != "" && (rec.RedrivenFrom == copyID || md.PayloadHash != "" && rec.PayloadHash == md.PayloadHash)
}

// hadEffect reports whether a message with body had its effect on key:
// then a copy of it is not unrun, even when the completion that followed
// was never recorded (the copy's work is done; it stays in the DLQ).
func (s *Scenario) hadEffect(key, body string) bool {
	for _, by := range slices.Concat(s.ledger.Plain[key], s.ledger.Tx[key]) {
		if s.bodyOf[by] == body {
			return true
		}
	}
	return false
}

// stranded checks that a lease holder's dead-letter copy whose payload
// never completed its key can still be redriven: its record is
// DEAD_LETTERED (by it or a later copy), reset by it, or a message of its
// key is still queued to take the record over. A record still IN_PROGRESS
// with nothing left to deliver, or gone without an operator's forget or a
// retention that allows it, leaves the copy in the DLQ for good; one
// whose payload a redrive sent back does not (redrivenFor).
func (s *Scenario) stranded(copyID string, dm sqsqueue.DeadLetterMessage, queued map[string]bool, now time.Time) {
	md := dm.Metadata
	switch md.Reason {
	case idemstore.ReasonPoison, idemstore.ReasonMaxAttempts, idemstore.ReasonOutcomeUnknown:
	default:
		return
	}
	f := s.facts[md.Key]
	if md.Namespace != s.ns || f == nil || f.completedBody[dm.Body] || queued[md.Key] || s.hadEffect(md.Key, dm.Body) {
		return
	}
	rec, err := s.raw.Get(context.Background(), idemstore.GetRequest{Namespace: s.ns, Key: md.Key, Now: now})
	switch {
	case errors.Is(err, idemstore.ErrNotFound) && f.forgotten == 0 && s.Cfg.UnfinishedRet == 0 && s.Cfg.Retention == 0:
		s.violate(InvRedriveKeeps, "stranded: DLQ copy of %s (key %s, %s) has no record left, nothing of its key is queued and its payload never completed: redrive can never send it back",
			md.MessageID, md.Key, md.Reason)
	case err == nil && rec.Status == idemstore.StatusInProgress && !redrivenFor(rec, copyID, md):
		s.violate(InvRedriveKeeps, "stranded: DLQ copy of %s (key %s, %s): the record stays IN_PROGRESS (dead-letter mark %q) with nothing of its key queued to take it over, and its payload never completed: redrive skips it for good",
			md.MessageID, md.Key, md.Reason, rec.DeadLetterReason)
	}
}
