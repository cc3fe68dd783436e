package lambdaidem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/internal/mutant"
)

// deadLetter sends the message to the sink first and, only when that
// succeeded, marks the record (if we hold its lease) and acknowledges. A
// failed send leaves the message with SQS: nothing is lost. Holding a
// lease, it first confirms it with a pending mark, so a holder that lost
// its lease sends nothing; a final mark refused after the send is reported
// failed, never acknowledged as dead-lettered.
func (p *sqsProcessor) deadLetter(ctx context.Context, t timing, msg events.SQSMessage, lease *Lease, rec *Record, reason Reason, cause error, r RecordReport) RecordReport {
	r.Reason, r.Err = reason, cause
	dctx, cancel := p.detached(ctx, t)
	defer cancel()
	if p.c.sink == nil {
		r.Outcome = OutcomeDeadLetterFailed
		if lease != nil && reason != ReasonOutcomeUnknown {
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
			return p.store.DeadLetter(ctx, DeadLetterRequest{
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
		now := t.now()
		merr := retryStore(dctx, t, &r, func(ctx context.Context) error {
			return p.store.DeadLetter(ctx, DeadLetterRequest{
				Lease: *lease, Now: t.now(), Reason: reason, Error: cause.Error(),
				MessageID: msg.MessageId, DeadLetterMessageID: id, ExpiresAt: p.retentionUntil(now, false),
			})
		})
		switch {
		case errors.Is(merr, ErrLeaseLost) && !unconfirmed:
			// The lease was confirmed before the send but lost since: the
			// new holder decides the key. Never acknowledge this as
			// dead-lettered; the redelivery sees the new holder's outcome.
			r.Outcome, r.Err = OutcomeLeaseLost, errors.Join(cause, fmt.Errorf("dead-letter copy %s sent but the mark was refused: %w", id, merr))
			return p.logged(ctx, slog.LevelWarn, r)
		case merr != nil:
			// The copy is in the DLQ and the record is marked as being
			// dead-lettered; at worst a redelivery sends another copy.
			p.log(ctx, slog.LevelWarn, "lambdaidem: dead-lettered but could not mark the record",
				slog.String("key", r.Key), slog.String("message_id", r.MessageID), slog.Any("error", merr))
		}
	}
	r.Outcome, r.Acked = OutcomeDeadLettered, true
	return p.logged(ctx, slog.LevelWarn, r)
}

// copyHash is the payload hash a dead-letter copy of msg carries, so that
// a redrive can tell whether a completion of the key was this message's
// work: the hash the holder's claim stored when it holds a lease on rec,
// else the message's own, derived again ("" when it cannot be). It is
// never the hash of a record that refused the message (a key conflict or a
// key dead-lettered by another message may carry another payload).
func (p *sqsProcessor) copyHash(msg events.SQSMessage, lease *Lease, rec *Record) string {
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
func (p *sqsProcessor) outcomeUnknown(ctx context.Context, t timing, msg events.SQSMessage, hash string, rec Record, r RecordReport) RecordReport {
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
