package lambdaidem

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/internal/mutant"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// deadLetter sends the message to the sink first and, only when that
// succeeded, marks the record (if we hold its lease) and acknowledges. A
// failed send leaves the message with SQS: nothing is lost. Holding a
// lease, it first confirms it with a pending mark, so a holder that lost
// its lease sends nothing; a final mark refused or not written after the
// send is reported failed, never acknowledged as dead-lettered (a mark the
// store could not take is remembered and written when the key comes back:
// markLate).
func (p *sqsProcessor) deadLetter(ctx context.Context, t timing, msg events.SQSMessage, lease *Lease, rec *idemstore.Record, reason Reason, cause error, r RecordReport) RecordReport {
	r.Reason, r.Err = reason, cause
	dctx, cancel := p.detached(ctx, t)
	defer cancel()
	if p.c.sink == nil {
		r.Outcome = OutcomeDeadLetterFailed
		switch {
		case lease != nil && reason == ReasonOutcomeUnknown:
			// Never FAILED, which would let a retry run the handler
			// again. The pending mark keeps the decision on the record:
			// the claim that takes this lease over finishes the
			// dead-lettering (finishDeadLetter) instead of running the
			// handler, in at-least-once mode too.
			p.markPending(dctx, t, msg, *lease, reason, cause, &r)
		case lease != nil:
			p.fail(dctx, t, *lease, cause, &r)
		}
		p.log(ctx, slog.LevelError, "lambdaidem: message should be dead-lettered but no sink is configured; SQS's redrive policy is the backstop",
			slog.String("key", r.Key), slog.String("message_id", r.MessageID), slog.String("reason", string(reason)), slog.Any("error", cause))
		return r
	}
	dl := DeadLetter{
		Message:       msg,
		Namespace:     p.c.namespace,
		Key:           r.Key,
		Reason:        reason,
		Error:         cause.Error(),
		Attempts:      r.Attempt,
		LastAttemptAt: t.now(),
	}
	if rec != nil {
		dl.FirstAttemptAt = rec.FirstAttemptAt
	}
	dl.PayloadHash = p.copyHash(msg, lease, rec)
	unconfirmed := mutant.On("dead-letter-without-lease") // the bug: neither confirms the lease nor heeds a refused mark
	if lease != nil && !unconfirmed {
		// Confirm the lease before sending: a holder that lost it (its
		// key taken over and perhaps completed) must never put a copy of
		// finished work in the DLQ.
		now := t.now()
		perr := retryStore(dctx, t, &r, func(ctx context.Context) error {
			return p.store.DeadLetter(ctx, idemstore.DeadLetterRequest{
				Lease: *lease, Now: t.now(), Reason: reason, Error: cause.Error(),
				MessageID: msg.MessageId, ExpiresAt: p.retentionUntil(now, false), Pending: true,
			})
		})
		switch {
		case errors.Is(perr, ErrLeaseLost):
			r.Outcome, r.Err = OutcomeLeaseLost, errors.Join(cause, fmt.Errorf("dead-letter not sent: %w", perr))
			return p.logged(ctx, slog.LevelWarn, r)
		case perr != nil:
			// Nothing sent, nothing recorded: SQS keeps the message and
			// the lease decides later.
			r.Outcome, r.Err = OutcomeStoreError, errors.Join(cause, fmt.Errorf("dead-letter not sent: %w", perr))
			return p.logged(ctx, slog.LevelError, r)
		}
		dl.LeaseProof = LeaseProof(lease.Token)
	}
	id, err := p.c.sink.Send(dctx, dl)
	if err != nil {
		if mutant.On("ack-failed-dead-letter-send") {
			r.Outcome, r.Acked = OutcomeDeadLettered, true // the bug: acknowledged, never sent
			return r
		}
		r.Outcome, r.Err = OutcomeDeadLetterFailed, errors.Join(cause, fmt.Errorf("dead-letter send: %w", err))
		if lease != nil && reason != ReasonOutcomeUnknown {
			p.fail(dctx, t, *lease, cause, &r)
		}
		if p.c.backoff != nil {
			p.changeVisibility(ctx, t, msg, p.c.backoff(max(r.Attempt, 1)), &r)
		}
		return p.logged(ctx, slog.LevelError, r)
	}
	if lease != nil {
		mark := idemstore.DeadLetterRequest{
			Lease: *lease, Reason: reason, Error: cause.Error(),
			MessageID: msg.MessageId, DeadLetterMessageID: id, ExpiresAt: p.retentionUntil(t.now(), false),
		}
		merr := retryStore(dctx, t, &r, func(ctx context.Context) error {
			mark.Now = t.now()
			return p.store.DeadLetter(ctx, mark)
		})
		switch {
		case errors.Is(merr, ErrLeaseLost) && !unconfirmed:
			// The lease was confirmed before the send but lost since: the
			// new holder decides the key. Never acknowledge this as
			// dead-lettered; the redelivery sees the new holder's outcome.
			r.Outcome, r.Err = OutcomeLeaseLost, errors.Join(cause, fmt.Errorf("dead-letter copy %s sent but the mark was refused: %w", id, merr))
			return p.logged(ctx, slog.LevelWarn, r)
		case merr != nil && !unconfirmed:
			if mutant.On("final-mark-failure-acknowledged") {
				break // the bug: acknowledged, the record left with only the pending mark, the copy stranded
			}
			// The copy is in the DLQ, but the record shows only the
			// pending mark, which redrive cannot reset. Keep the message:
			// its redelivery writes the mark (this container remembers
			// it) or, elsewhere, takes the record over and finishes the
			// dead-lettering. Acknowledged now, nothing would ever mark
			// the record, and the copy could never be redriven.
			p.unrecorded.addMark(r.Key, dl.PayloadHash, mark)
			r.Outcome, r.Err = OutcomeStoreError, errors.Join(cause, fmt.Errorf("dead-letter copy %s sent but the record could not be marked: %w", id, merr))
			return p.logged(ctx, slog.LevelError, r)
		case merr != nil:
			p.log(ctx, slog.LevelWarn, "lambdaidem: dead-lettered but could not mark the record",
				slog.String("key", r.Key), slog.String("message_id", r.MessageID), slog.Any("error", merr))
		}
	}
	r.Outcome, r.Acked = OutcomeDeadLettered, true
	return p.logged(ctx, slog.LevelWarn, r)
}

// markPending writes a pending dead-letter mark under lease without
// sending a copy, logging when it cannot: the record stays IN_PROGRESS
// and whoever takes it over finishes the dead-lettering.
func (p *sqsProcessor) markPending(dctx context.Context, t timing, msg events.SQSMessage, lease Lease, reason Reason, cause error, r *RecordReport) {
	now := t.now()
	err := retryStore(dctx, t, r, func(ctx context.Context) error {
		return p.store.DeadLetter(ctx, idemstore.DeadLetterRequest{
			Lease: lease, Now: t.now(), Reason: reason, Error: cause.Error(),
			MessageID: msg.MessageId, ExpiresAt: p.retentionUntil(now, false), Pending: true,
		})
	})
	if err != nil {
		p.log(dctx, slog.LevelError, "lambdaidem: could not mark the record as being dead-lettered",
			slog.String("key", r.Key), slog.String("message_id", r.MessageID), slog.String("reason", string(reason)), slog.Any("error", err))
	}
}

// copyHash is the payload hash a dead-letter copy of msg carries, so that
// a redrive can tell whether a completion of the key was this message's
// work: the hash the holder's claim stored when it holds a lease on rec,
// else the message's own, derived again ("" when it cannot be). It is
// never the hash of a record that refused the message (a key conflict or a
// key dead-lettered by another message may carry another payload).
func (p *sqsProcessor) copyHash(msg events.SQSMessage, lease *Lease, rec *idemstore.Record) string {
	if lease != nil && rec != nil {
		return rec.PayloadHash
	}
	if _, hash, err := p.keyAndHash(msg); err == nil {
		return storedHash(hash)
	}
	return ""
}

// outcomeUnknown handles an abandoned lease in at-most-once mode: the
// handler may or may not have had its effect, so it is not run again. First
// the abandoned lease is taken over (a claim conditioned on the old token),
// which fences the original owner: its late completion is refused. Holding
// the new lease, the message is sent to the DLQ and only then is the record
// marked DEAD_LETTERED with reason outcome_unknown. If the send fails, the
// record stays IN_PROGRESS (never FAILED, which would let a retry run the
// handler) and the next delivery, once this lease ends, does the same again.
// An abandoned holder that left a pending dead-letter mark is finished
// with its own reason (finishDeadLetter).
func (p *sqsProcessor) outcomeUnknown(ctx context.Context, t timing, msg events.SQSMessage, hash string, rec idemstore.Record, r RecordReport) RecordReport {
	now := t.now()
	r.StoreCalls++
	req := p.claimRequest(t, r.Key, hash, msg.MessageId, now)
	req.NoTakeover = false // take the abandoned lease over: that fences its owner
	cr, err := p.store.Claim(ctx, req)
	switch {
	case err != nil:
		r.Outcome, r.Err = OutcomeStoreError, err
		r.StoreErrors++
		return p.logged(ctx, slog.LevelError, r)
	case !cr.Claimed:
		// Another consumer got there first; its outcome decides.
		r.Outcome, r.Err = OutcomeInProgress, ErrInProgress
		return p.logged(ctx, slog.LevelInfo, r)
	}
	r.Attempt, r.Takeover = cr.Lease.Attempt, true
	if pendingMark(cr.Record) {
		// The abandoned holder was dead-lettering the message: its reason
		// stands, and its copy may be in the DLQ already.
		return p.finishDeadLetter(ctx, t, msg, &cr.Lease, &cr.Record, r)
	}
	cause := fmt.Errorf("%w: attempt %d's lease ran out at %s without a recorded outcome",
		ErrOutcomeUnknown, rec.Attempts, rec.LeaseUntil.UTC().Format(time.RFC3339))
	return p.deadLetter(ctx, t, msg, &cr.Lease, &cr.Record, ReasonOutcomeUnknown, cause, r)
}

// badInput handles a message no key can be derived from: it can never be
// processed, so it is dead-lettered when a sink is configured, and
// otherwise reported failed so SQS keeps it. A body the key or hash options
// cannot read (ErrMalformedBody) says so in its reason and outcome; any
// other underivable key is a missing key.
func (p *sqsProcessor) badInput(ctx context.Context, t timing, msg events.SQSMessage, err error, r RecordReport) RecordReport {
	reason, outcome := ReasonMissingKey, OutcomeMissingKey
	if errors.Is(err, ErrMalformedBody) {
		reason, outcome = ReasonMalformedBody, OutcomeMalformedBody
	}
	if mutant.On("bad-input-reason-poison") {
		reason = ReasonPoison // the bug: a message without a key dead-lettered as poison
	}
	if p.c.sink == nil {
		r.Outcome, r.Err = outcome, err
		return p.logged(ctx, slog.LevelError, r)
	}
	return p.deadLetter(ctx, t, msg, nil, nil, reason, err, r)
}

// pendingMark reports whether rec, IN_PROGRESS, carries a pending
// dead-letter mark: a holder was dead-lettering the message and may have
// sent its copy before it stopped (crashed, timed out, or could not write
// the final mark).
func pendingMark(rec idemstore.Record) bool {
	return rec.Status == StatusInProgress && rec.DeadLetterReason != ""
}

// finishDeadLetter completes, under a lease taken over from a holder that
// left a pending dead-letter mark, the dead-lettering that holder started,
// with its reason, instead of running the handler again: its decision
// (poison, too many attempts, an unknown outcome) stands. It sends a copy
// of its own, since nothing shows whether the previous one was sent: the
// record then names this copy, and a copy the previous holder did send is
// a spare that redrive deletes once the key completes with its payload.
func (p *sqsProcessor) finishDeadLetter(ctx context.Context, t timing, msg events.SQSMessage, lease *Lease, rec *idemstore.Record, r RecordReport) RecordReport {
	cause := fmt.Errorf("attempt %d was dead-lettering message %s (%s) when its lease ended: %s",
		rec.Attempts-1, rec.DeadLetteredMessageID, rec.DeadLetterReason, rec.LastError)
	return p.deadLetter(ctx, t, msg, lease, rec, rec.DeadLetterReason, cause, r)
}

// markLate writes a final dead-letter mark this container could not write
// after sending the copy, now that the key came back (its source message
// was kept for this). Fenced by that attempt's lease token, it applies
// only if nobody took the key over since; then the copy already sent is
// the record's, and no second copy is sent. The source message itself is
// acknowledged; another message of the key goes on to the claim, which
// finds the key dead-lettered. done is false when the key must be claimed
// as usual.
func (p *sqsProcessor) markLate(ctx context.Context, t timing, msg events.SQSMessage, mark idemstore.DeadLetterRequest, r RecordReport) (RecordReport, bool) {
	dctx, cancel := p.detached(ctx, t)
	defer cancel()
	r.Attempt, r.Reason = mark.Lease.Attempt, mark.Reason
	err := retryStore(dctx, t, &r, func(ctx context.Context) error {
		mark.Now = t.now()
		return p.store.DeadLetter(ctx, mark)
	})
	switch {
	case errors.Is(err, ErrStoreUnavailable):
		// Still cannot write it: keep the message, send no other copy.
		r.Outcome, r.Err = OutcomeStoreError, fmt.Errorf("dead-letter copy %s sent but the record could not be marked: %w", mark.DeadLetterMessageID, err)
		return p.logged(ctx, slog.LevelError, r), true
	case err == nil && msg.MessageId == mark.MessageID:
		p.unrecorded.drop(r.Key)
		r.Outcome, r.Acked = OutcomeDeadLettered, true
		r.Err = fmt.Errorf("%s (dead-letter copy %s, marked on redelivery)", mark.Error, mark.DeadLetterMessageID)
		return p.logged(ctx, slog.LevelWarn, r), true
	default:
		// Marked for another message of the key, or taken over, forgotten
		// or refused: the store decides, as usual.
		p.unrecorded.drop(r.Key)
		return r, false
	}
}

// LeaseProof is what a dead-letter copy carries of the lease token it was
// sent under (DeadLetter.LeaseProof): a one-way digest, so the copy shows
// that its sender held the record's lease without giving the token away.
// A redrive that finds a record still IN_PROGRESS with a pending
// dead-letter mark under that very token knows the copy is the one the
// mark announced, and may write the final mark for it.
func LeaseProof(token string) string {
	if token == "" {
		return ""
	}
	sum := sha256.Sum256([]byte("lambdaidem dead-letter lease proof\x00" + token))
	return hex.EncodeToString(sum[:16])
}
