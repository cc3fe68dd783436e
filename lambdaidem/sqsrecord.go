package lambdaidem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/internal/mutant"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// process takes one record from its derived key to its outcome, in the
// order the rest of this file follows: a key that could not be derived is
// dead-lettered (badInput); a cached duplicate needs no store request; too
// little time left starts nothing; a completion this container remembers
// as unrecorded is written instead of running the handler (recordLate), and
// a final dead-letter mark it could not write after sending the copy is
// written instead of sending another (markLate);
// otherwise the claim decides, refused or claimed.
func (p *sqsProcessor) process(ctx context.Context, t timing, msg events.SQSMessage, d derived) RecordReport {
	r, req, done := p.beforeClaim(ctx, t, msg, d)
	if done {
		return r
	}
	r.StoreCalls++
	cr, err := p.store.Claim(ctx, req)
	return p.afterClaim(ctx, t, msg, d.hash, cr, err, r)
}

// beforeClaim decides what it can without claiming the record's key: done
// reports that r is the record's outcome; otherwise req is the claim to
// make, and r the report so far.
func (p *sqsProcessor) beforeClaim(ctx context.Context, t timing, msg events.SQSMessage, d derived) (r RecordReport, req idemstore.ClaimRequest, done bool) {
	r = RecordReport{MessageID: msg.MessageId, MessageGroupID: msg.Attributes["MessageGroupId"]}
	if d.err != nil {
		return p.badInput(ctx, t, msg, d.err, r), req, true
	}
	hash := d.hash
	r.Key = d.key
	now := t.now()
	if p.cache.hit(r.Key, hash, now) {
		r.Outcome, r.Acked = OutcomeCachedDuplicate, true
		return r, req, true
	}
	if !t.canClaim(now) {
		r.Outcome = OutcomeNotStarted
		return p.logged(ctx, slog.LevelWarn, r), req, true
	}
	rerunUnrecorded := mutant.On("unrecorded-completion-reruns") // the bug: the handler runs again
	if it, ok := p.unrecorded.get(r.Key, hash); ok && !rerunUnrecorded {
		if it.mark != nil {
			if rep, done := p.markLate(ctx, t, msg, *it.mark, r); done {
				return rep, req, true
			}
		} else if rep, done := p.recordLate(ctx, t, hash, it.req, r); done {
			return rep, req, true
		}
	}
	if p.unclaimedFirst(msg) {
		return p.optimistic(ctx, t, msg, hash, r), req, true
	}
	return r, p.claimRequest(t, r.Key, hash, msg.MessageId, now), false
}

// afterClaim takes a record on from its claim's answer: a store error, a
// refusal, or the lease.
func (p *sqsProcessor) afterClaim(ctx context.Context, t timing, msg events.SQSMessage, hash string, cr idemstore.ClaimResult, err error, r RecordReport) RecordReport {
	if err != nil {
		r.Outcome, r.Err = OutcomeStoreError, err
		r.StoreErrors++
		return p.logged(ctx, slog.LevelError, r)
	}
	if !cr.Claimed {
		return p.refused(ctx, t, msg, hash, &cr.Record, r)
	}
	return p.claimed(ctx, t, msg, hash, &cr, r)
}

// recordLate writes a completion this container could not write when the
// handler succeeded, now that its key came back (WithFailBatchOnAnyFailure
// returns the whole batch, say). The write is fenced by that attempt's
// lease token: it applies only if nobody took the key over since. done is
// false when the key must be claimed as usual.
func (p *sqsProcessor) recordLate(ctx context.Context, t timing, hash string, req idemstore.CompleteRequest, r RecordReport) (RecordReport, bool) {
	dctx, cancel := p.detached(ctx, t)
	defer cancel()
	r.Attempt = req.Lease.Attempt
	err := retryStore(dctx, t, &r, func(ctx context.Context) error {
		req.Now = t.now()
		return p.store.Complete(ctx, req)
	})
	switch {
	case err == nil:
		p.unrecorded.drop(r.Key)
		p.cache.add(r.Key, hash, req.Now, minNonZero(req.ExpiresAt, req.ResultUntil))
		r.Outcome, r.Acked = OutcomeDuplicate, true
		return p.logged(ctx, slog.LevelInfo, r), true
	case errors.Is(err, ErrStoreUnavailable):
		// Still cannot write it: keep the message, never run it again here.
		r.Outcome, r.Err = OutcomeStoreError, err
		return p.logged(ctx, slog.LevelError, r), true
	default:
		// Taken over, forgotten or refused: the store decides, as usual.
		p.unrecorded.drop(r.Key)
		return r, false
	}
}

// refused decides what a refused claim means (the outcome table of docs/design.md).
func (p *sqsProcessor) refused(ctx context.Context, t timing, msg events.SQSMessage, hash string, rec *idemstore.Record, r RecordReport) RecordReport {
	now := t.now()
	r.Attempt = rec.Attempts
	otherPayloadDone := mutant.On("duplicate-of-other-payload") // the bug: a completed key acknowledges any payload as a duplicate
	switch {
	case rec.Status == StatusDeadLettered && rec.DeadLetteredMessageID == msg.MessageId:
		r.Outcome, r.Acked = OutcomeDeadLetteredDuplicate, true
		return p.logged(ctx, slog.LevelInfo, r)
	case rec.Status == StatusDeadLettered:
		return p.deadLetter(ctx, t, msg, nil, rec, ReasonKeyDeadLettered,
			fmt.Errorf("key %q was dead-lettered with message %s (%s)", r.Key, rec.DeadLetteredMessageID, rec.DeadLetterReason), r)
	case rec.PayloadHash != hash && !(otherPayloadDone && rec.Status == StatusCompleted):
		err := fmt.Errorf("%w: key %q is held by message %s (%s)", ErrKeyConflict, r.Key, rec.MessageID, rec.Status)
		if p.c.sink == nil {
			r.Outcome, r.Err = OutcomeConflict, err
			return p.logged(ctx, slog.LevelError, r)
		}
		return p.deadLetter(ctx, t, msg, nil, nil, ReasonKeyConflict, err, r)
	case rec.Status == StatusCompleted:
		if rec.ResultExpired(now) {
			r.Outcome, r.Acked = OutcomeLateReplay, true
			return p.logged(ctx, slog.LevelWarn, r)
		}
		p.cache.add(r.Key, hash, now, minNonZero(rec.ExpiresAt, rec.ResultUntil))
		r.Outcome, r.Acked = OutcomeDuplicate, true
		return p.logged(ctx, slog.LevelDebug, r)
	case p.c.atMostOnce && rec.Status == StatusInProgress && rec.LeaseExpired(now, p.c.grace):
		return p.outcomeUnknown(ctx, t, msg, hash, *rec, r)
	default:
		// IN_PROGRESS under a valid lease: come back when it ends.
		r.Outcome, r.Err = OutcomeInProgress, ErrInProgress
		if mutant.On("cache-in-progress-key") {
			p.cache.add(r.Key, hash, now, time.Time{}) // the bug: later copies are skipped as duplicates
		}
		wait := rec.LeaseUntil.Add(p.c.grace).Sub(now)
		wait += time.Duration(t.int64N(int64(time.Second)))
		p.changeVisibility(ctx, t, msg, wait, &r)
		return p.logged(ctx, slog.LevelInfo, r)
	}
}

// claimed runs the handler under the lease and records its outcome.
func (p *sqsProcessor) claimed(ctx context.Context, t timing, msg events.SQSMessage, hash string, cr *idemstore.ClaimResult, r RecordReport) RecordReport {
	run, done := p.runClaimed(ctx, t, msg, hash, cr, r)
	switch {
	case done:
		return run.r
	case run.herr != nil:
		return p.afterHandler(ctx, t, run)
	}
	dctx, dcancel := p.detached(ctx, t)
	defer dcancel()
	return p.completed(ctx, t, run, p.complete(dctx, t, run))
}

// claimRun is a claimed record whose handler has run: its report so far,
// the handler's error, and when it succeeded, the completion to write.
type claimRun struct {
	msg   events.SQSMessage
	hash  string
	lease Lease
	rec   *idemstore.Record // the record as the claim left it
	st    *recordState
	r     RecordReport
	herr  error
	// refused: herr is a completion refused for what it carried, after
	// the handler succeeded.
	refused bool
	req     idemstore.CompleteRequest // when herr is nil
	end     time.Time                 // when the handler returned
}

// runClaimed runs the handler under the lease. done reports that run.r is
// the record's outcome already (a takeover that finishes a dead-lettering,
// a message out of attempts); otherwise the handler ran, and run holds
// its error or the completion to write.
func (p *sqsProcessor) runClaimed(ctx context.Context, t timing, msg events.SQSMessage, hash string, cr *idemstore.ClaimResult, r RecordReport) (run *claimRun, done bool) {
	lease := cr.Lease
	r.Attempt = lease.Attempt
	r.Takeover = cr.Previous == StatusInProgress
	run = &claimRun{msg: msg, hash: hash, lease: lease, rec: &cr.Record}
	ignorePending := mutant.On("takeover-ignores-pending-mark") // the bug: the previous holder's decision to dead-letter is dropped, and the handler runs again
	if r.Takeover && pendingMark(cr.Record) && !ignorePending {
		// The previous holder was dead-lettering the message and may have
		// sent its copy: finish that instead of running the handler again.
		run.r = p.finishDeadLetter(ctx, t, msg, &lease, &cr.Record, r)
		return run, true
	}
	if lease.Attempt > p.c.maxAttempts {
		// The previous holders never recorded an outcome: the message crashes
		// or times out the function. Do not run it again.
		err := fmt.Errorf("claimed %d times (max %d); %d previous attempts were abandoned without an outcome",
			lease.Attempt, p.c.maxAttempts, cr.Record.Takeovers)
		run.r = p.deadLetter(ctx, t, msg, &lease, &cr.Record, ReasonMaxAttempts, err, r)
		return run, true
	}
	if r.Takeover {
		p.log(ctx, slog.LevelWarn, "lambdaidem: took over an abandoned lease",
			slog.String("key", r.Key), slog.String("message_id", r.MessageID), slog.Int("attempt", lease.Attempt))
	}

	st := &recordState{lease: lease}
	run.st = st
	copyMsg := msg
	if p.c.sink != nil || p.observed() {
		// The handler gets its own attribute maps, so the dead-letter copy
		// and the observers see the message as SQS delivered it. Nobody
		// else reads the maps after the handler, so without a sink or an
		// observer the copy (a fifth of a first delivery's allocations)
		// is skipped.
		copyMsg.Attributes = maps.Clone(msg.Attributes)
		copyMsg.MessageAttributes = cloneMessageAttributes(msg.MessageAttributes)
	}
	// The handler's start and end times double as "now".
	now := t.now()
	run.herr = p.runHandler(ctx, t, st, now, func(ctx context.Context) error { return p.handler(ctx, copyMsg) })
	end := t.now()
	r.HandlerDuration = end.Sub(now)
	r.HandlerRan = true
	run.end = end
	if run.herr == nil {
		run.req = idemstore.CompleteRequest{Lease: lease, ExpiresAt: p.retentionUntil(end, true), Writes: st.takeWrites(), Now: end}
		if p.c.resultRetention < p.c.retention {
			run.req.ResultUntil = end.Add(p.c.resultRetention)
		}
	}
	run.r = r
	return run, false
}

// complete writes a successful run's completion, retrying while the store
// is unavailable.
func (p *sqsProcessor) complete(dctx context.Context, t timing, run *claimRun) error {
	tries := 0
	return retryStore(dctx, t, &run.r, func(ctx context.Context) error {
		if tries++; tries > 1 {
			run.req.Now = t.now()
		}
		return p.store.Complete(ctx, run.req)
	})
}

// completed takes a successful run on from its completion's answer.
func (p *sqsProcessor) completed(ctx context.Context, t timing, run *claimRun, err error) RecordReport {
	r, req := run.r, run.req
	switch {
	case err == nil:
		// Never remember it longer than the store does, nor past the
		// result's retention (a later repeat is a late replay).
		limit := minNonZero(req.ExpiresAt, req.ResultUntil)
		if mutant.On("cache-outlives-retention") {
			limit = time.Time{} // the bug: remembered for the cache's TTL alone
		}
		p.cache.add(r.Key, run.hash, run.end, limit)
		r.Outcome, r.Acked = OutcomeProcessed, true
		return p.logged(ctx, slog.LevelDebug, r)
	case errors.Is(err, ErrLeaseLost):
		// Someone took the key over. Report the record failed rather
		// than acknowledge it: its redelivery finds the new holder's
		// outcome (a duplicate once completed), and if the new holder
		// fails, the message is still there to retry.
		r.Outcome, r.Err = OutcomeLeaseLost, err
		return p.logged(ctx, slog.LevelWarn, r)
	case errors.Is(err, ErrStoreUnavailable) && len(req.Writes) > 0:
		// The handler's writes commit with the completion, so they may
		// not have happened: keep the message. The record stays
		// IN_PROGRESS; once its lease ends the retry runs again, which
		// is safe because effect and completion are one transaction.
		r.Outcome, r.Err = OutcomeStoreError, err
		return p.logged(ctx, slog.LevelError, r)
	case errors.Is(err, ErrStoreUnavailable):
		// Never record failure after success: the effect happened. The
		// record stays IN_PROGRESS and its lease decides later; should
		// the key come back to this container, the completion is
		// written then instead of running the handler again.
		p.unrecorded.add(r.Key, run.hash, req)
		r.Outcome, r.Acked, r.Err = OutcomeUnrecorded, true, err
		return p.logged(ctx, slog.LevelError, r)
	default:
		// The completion was refused for what it carried (a transaction
		// write's condition, a limit): nothing was committed.
		run.r, run.herr, run.refused = r, err, true
		return p.afterHandler(ctx, t, run)
	}
}

// afterHandler records a run that failed: its handler's error, or a
// completion refused for what it carried. What the failure comes to is
// judge's verdict: poison and outcome unknown are dead-lettered, anything
// else is recorded FAILED (max_attempts on the last attempt).
func (p *sqsProcessor) afterHandler(ctx context.Context, t timing, run *claimRun) RecordReport {
	r, herr, msg, lease, st := run.r, run.herr, run.msg, run.lease, run.st
	r.Err = herr
	switch v, why := p.c.judge(herr, st.ctxEnded, run.refused); v {
	case verdictPoison:
		return p.deadLetter(ctx, t, msg, &lease, run.rec, ReasonPoison, herr, r)
	case verdictUnknown:
		// Whatever the attempt started may have happened: as unknown as
		// a crash, and never run again.
		cause := fmt.Errorf("%w: attempt %d: %s: %w", ErrOutcomeUnknown, lease.Attempt, why, herr)
		return p.deadLetter(ctx, t, msg, &lease, run.rec, ReasonOutcomeUnknown, cause, r)
	}
	if lease.Attempt >= p.c.maxAttempts {
		return p.deadLetter(ctx, t, msg, &lease, run.rec, ReasonMaxAttempts, herr, r)
	}
	r.Outcome = OutcomeFailed
	dctx, dcancel := p.detached(ctx, t)
	defer dcancel()
	p.fail(dctx, t, lease, herr, &r)
	var ra *RetryAfterError
	if errors.As(herr, &ra) {
		p.changeVisibility(ctx, t, msg, ra.Delay, &r)
	} else if p.c.backoff != nil {
		p.changeVisibility(ctx, t, msg, p.c.backoff(lease.Attempt), &r)
	}
	return p.logged(ctx, slog.LevelWarn, r)
}

// cloneMessageAttributes copies message attributes deeply enough that a
// handler changing any value (a byte slice's contents, a list's element)
// cannot change the message the decorator keeps for the dead-letter copy.
func cloneMessageAttributes(in map[string]events.SQSMessageAttribute) map[string]events.SQSMessageAttribute {
	if len(in) == 0 {
		return in
	}
	out := make(map[string]events.SQSMessageAttribute, len(in))
	for k, a := range in {
		if a.StringValue != nil {
			v := *a.StringValue
			a.StringValue = &v
		}
		if a.BinaryValue != nil {
			a.BinaryValue = append([]byte(nil), a.BinaryValue...)
		}
		if a.StringListValues != nil {
			a.StringListValues = append([]string(nil), a.StringListValues...)
		}
		if a.BinaryListValues != nil {
			bl := make([][]byte, len(a.BinaryListValues))
			for i, b := range a.BinaryListValues {
				if b != nil {
					bl[i] = append([]byte(nil), b...)
				}
			}
			a.BinaryListValues = bl
		}
		out[k] = a
	}
	return out
}
