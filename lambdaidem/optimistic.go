package lambdaidem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// checkOptimistic refuses, when SQS is built, an optimistic mode that
// could not keep its promise: an option only a lease can serve, or a store
// that cannot commit a run's outcome without one. Wrap refuses the option
// itself (it is in sqsOnly). It returns nil when nothing is refused.
func (c *config) checkOptimistic(store Store) *ConfigError {
	if !c.optimistic {
		return nil
	}
	needsLease := func(option, why string) *ConfigError {
		return &ConfigError{Option: "WithOptimisticCommit and " + option, Err: &reason{
			text:  fmt.Sprintf("%v: %s", ErrNeedsLease, why),
			named: []error{ErrNeedsLease, ErrInvalidOption},
		}}
	}
	switch {
	case c.atMostOnce:
		return needsLease("WithAtMostOnce", "WithAtMostOnce dead-letters an attempt whose outcome is unknown, which only a lease taken before the handler runs can tell")
	case c.heartbeat > 0:
		return needsLease("WithHeartbeat", "WithHeartbeat extends a lease, and no lease is held while the handler runs")
	}
	if _, ok := store.(idemstore.Committer); !ok {
		name := fmt.Sprintf("%T", store)
		if caps, ok := idemstore.CapabilitiesOf(store); ok && caps.Store != "" {
			name = caps.Store
		}
		return &ConfigError{Option: "WithOptimisticCommit", Store: name, Err: &reason{
			text:  fmt.Sprintf("%v: %s does not implement idemstore.Committer", ErrCommitUnsupported, name),
			named: []error{ErrCommitUnsupported, ErrUnsupportedOption},
		}}
	}
	return nil
}

// unclaimedFirst reports whether a message runs without a claim: the
// optimistic mode's first delivery. A message SQS delivered before may
// have crashed the process on its first run, so it is claimed, and its
// attempts counted, as in lease mode.
func (p *sqsProcessor) unclaimedFirst(msg events.SQSMessage) bool {
	if !p.c.optimistic {
		return false
	}
	n, err := strconv.Atoi(msg.Attributes["ApproximateReceiveCount"])
	return err != nil || n <= 1
}

// commitToken is a new commit's token: 26 characters of the invocation's
// randomness, letters and digits.
func (p *sqsProcessor) commitToken(t timing) string {
	const digits = "0123456789abcdefghijklmnopqrstuvwxyz"
	var b [26]byte
	for i := 0; i < len(b); i += 13 {
		n := t.int64N(1 << 62)
		for j := range 13 {
			b[i+j] = digits[n%36]
			n /= 36
		}
	}
	return string(b[:])
}

// optimistic runs a first delivery without a claim and commits its outcome
// (WithOptimisticCommit): the handler first, then one conditional write of
// the completion with its writes, or of the failure.
func (p *sqsProcessor) optimistic(ctx context.Context, t timing, msg events.SQSMessage, hash string, r RecordReport) RecordReport {
	now := t.now()
	// The handler holds no lease; the lease it is given only bounds its
	// context as a claim's would (the invocation's deadline, capped).
	st := &recordState{lease: Lease{Namespace: p.c.namespace, Key: r.Key, Until: p.leaseUntil(t, now)}, unleased: true}
	copyMsg := msg
	copyMsg.Attributes = maps.Clone(msg.Attributes)
	copyMsg.MessageAttributes = cloneMessageAttributes(msg.MessageAttributes)
	now = t.now()
	herr := p.runHandler(ctx, t, st, now, func(ctx context.Context) error { return p.handler(ctx, copyMsg) })
	end := t.now()
	r.HandlerDuration = end.Sub(now)
	r.HandlerRan = true

	dctx, dcancel := p.detached(ctx, t)
	defer dcancel()
	if herr == nil {
		now = end
		req := idemstore.CommitRequest{
			Namespace: p.c.namespace, Key: r.Key, PayloadHash: hash, MessageID: msg.MessageId,
			Token: p.commitToken(t), Now: now, Grace: p.c.grace, Status: StatusCompleted,
			Writes: st.takeWrites(), ExpiresAt: p.retentionUntil(now, true),
		}
		if p.c.resultRetention < p.c.retention {
			req.ResultUntil = now.Add(p.c.resultRetention)
		}
		res, err := p.commit(dctx, t, &r, req)
		switch {
		case err == nil && res.Committed:
			r.Attempt = res.Record.Attempts
			p.cache.add(r.Key, hash, now, minNonZero(req.ExpiresAt, req.ResultUntil))
			r.Outcome, r.Acked = OutcomeProcessed, true
			return p.logged(ctx, slog.LevelDebug, r)
		case err == nil:
			// The record that refused the commit decides, as it decides a
			// refused claim: a duplicate, a key conflict, a key in
			// progress under another consumer's lease, a dead letter.
			// Nothing of this run was written.
			return p.refused(ctx, t, msg, hash, &res.Record, r)
		case errors.Is(err, ErrStoreUnavailable):
			// The commit may or may not have applied, with its writes:
			// keep the message. Its redelivery is claimed in lease mode
			// and finds out.
			r.Outcome, r.Err = OutcomeStoreError, err
			return p.logged(ctx, slog.LevelError, r)
		default:
			// Refused for what it carried (a write's condition, a
			// limit): nothing was committed; a failure like any other.
			herr = err
		}
	}
	return p.optimisticFailed(ctx, dctx, t, msg, hash, herr, r)
}

// commit sends a commit, retried as every store write is. A retry is the
// same request with the same token, so a try that applied with its answer
// lost is recognised as this commit's own. A try whose answer was lost
// may also still land later; so once a try failed that way, a later
// refusal proves nothing about it, and the outcome is unknown
// (ErrStoreUnavailable) rather than a refusal.
func (p *sqsProcessor) commit(ctx context.Context, t timing, r *RecordReport, req idemstore.CommitRequest) (idemstore.CommitResult, error) {
	var res idemstore.CommitResult
	unknown := false
	err := retryStore(ctx, t, r, func(ctx context.Context) error {
		var err error
		res, err = p.store.(idemstore.Committer).Commit(ctx, req)
		if errors.Is(err, ErrStoreUnavailable) {
			unknown = true
		}
		return err
	})
	if err == nil && unknown && !res.Committed {
		return idemstore.CommitResult{}, fmt.Errorf("%w: commit of %q: an earlier try's outcome is unknown and it may still apply; a later try was refused", ErrStoreUnavailable, req.Key)
	}
	return res, err
}

// optimisticFailed records a failed first delivery of the optimistic mode
// with one commit of FAILED, which counts the attempt. A poison message, a
// handler that declared its outcome unknown, or a failure that reaches the
// attempts limit, is dead-lettered under a lease claimed for it: the
// dead-letter copy is sent only by a holder the store confirms. (Should
// that claim fail, the message is kept, and its redelivery is claimed in
// lease mode and runs the handler again: at-least-once's answer to an
// attempt that could not record its outcome.)
func (p *sqsProcessor) optimisticFailed(ctx, dctx context.Context, t timing, msg events.SQSMessage, hash string, herr error, r RecordReport) RecordReport {
	r.Err = herr
	// The mode is at-least-once (WithAtMostOnce is refused with it), so
	// only the handler's own declarations dead-letter at once.
	switch v, why := p.c.judge(herr, false, false); v {
	case verdictUnknown:
		cause := fmt.Errorf("%w: first delivery: %s: %w", ErrOutcomeUnknown, why, herr)
		return p.claimToDeadLetter(ctx, dctx, t, msg, hash, ReasonOutcomeUnknown, cause, r)
	case verdictPoison:
		return p.claimToDeadLetter(ctx, dctx, t, msg, hash, ReasonPoison, herr, r)
	}
	now := t.now()
	req := idemstore.CommitRequest{
		Namespace: p.c.namespace, Key: r.Key, PayloadHash: hash, MessageID: msg.MessageId,
		Token: p.commitToken(t), Now: now, Grace: p.c.grace, Status: StatusFailed,
		Error: herr.Error(), MaxAttempts: p.c.maxAttempts, ExpiresAt: p.retentionUntil(now, false),
	}
	res, err := p.commit(dctx, t, &r, req)
	switch {
	case err != nil:
		// Not counted: SQS keeps the message, and its redelivery is
		// claimed and counted in lease mode.
		r.Outcome = OutcomeFailed
		p.log(ctx, slog.LevelError, "lambdaidem: could not record failure",
			slog.String("key", r.Key), slog.String("message_id", r.MessageID), slog.Any("error", err))
		return p.logged(ctx, slog.LevelWarn, r)
	case res.AtLimit:
		return p.claimToDeadLetter(ctx, dctx, t, msg, hash, ReasonMaxAttempts, herr, r)
	case !res.Committed:
		r.Err = nil
		return p.refused(ctx, t, msg, hash, &res.Record, r)
	}
	r.Attempt = res.Record.Attempts
	r.Outcome = OutcomeFailed
	var ra *RetryAfterError
	if errors.As(herr, &ra) {
		p.changeVisibility(ctx, t, msg, ra.Delay, &r)
	} else if p.c.backoff != nil {
		p.changeVisibility(ctx, t, msg, p.c.backoff(r.Attempt), &r)
	}
	return p.logged(ctx, slog.LevelWarn, r)
}

// claimToDeadLetter claims the key of a failed first delivery, so that its
// dead-lettering is fenced as in lease mode, and dead-letters it; a
// refused claim decides as a refused claim always does.
func (p *sqsProcessor) claimToDeadLetter(ctx, dctx context.Context, t timing, msg events.SQSMessage, hash string, reason Reason, cause error, r RecordReport) RecordReport {
	r.StoreCalls++
	cr, err := p.store.Claim(dctx, p.claimRequest(t, r.Key, hash, msg.MessageId, t.now()))
	switch {
	case err != nil:
		r.Outcome, r.Err = OutcomeStoreError, errors.Join(cause, fmt.Errorf("dead-letter not sent: %w", err))
		r.StoreErrors++
		return p.logged(ctx, slog.LevelError, r)
	case !cr.Claimed:
		r.Err = nil
		return p.refused(ctx, t, msg, hash, &cr.Record, r)
	}
	r.Attempt = cr.Lease.Attempt
	return p.deadLetter(ctx, t, msg, &cr.Lease, &cr.Record, reason, cause, r)
}
