package lambdaidem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/lambdaidem/go-lambdaidem/internal/mutant"
)

// MessageHandler handles one SQS message. Return nil when done, an error to
// have the message retried, Poison(err) to dead-letter it now, or
// RetryAfter(d, err) to retry it after d.
type MessageHandler func(ctx context.Context, msg events.SQSMessage) error

// SQS wraps handler into a Lambda SQS handler that processes each message
// once in effect and reports a partial batch response. The result is
// accepted by lambda.Start unchanged. The event source mapping must enable
// ReportBatchItemFailures, or use WithFailBatchOnAnyFailure.
func SQS(store Store, handler MessageHandler, opts ...Option) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	if handler == nil {
		panic("lambdaidem: nil handler")
	}
	c := newConfig(opts)
	c.useHash(true)
	p := &sqsProcessor{engine: newEngine(store, c), handler: handler}
	return p.handle
}

type sqsProcessor struct {
	*engine
	handler MessageHandler
}

func (p *sqsProcessor) handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	t := p.timing(ctx)
	defer p.share(ctx, &t)()
	reports := make([]RecordReport, len(ev.Records))
	keys, first, later := p.plan(ev.Records)

	// Fresh records (and FIFO groups) run concurrently, bounded; records
	// delivered before run one at a time afterwards, so a message that
	// crashes the process takes only itself down on its retries.
	if len(first) == 1 || p.c.concurrency == 1 {
		// Nothing to overlap: run in this goroutine, without a scheduling
		// hop per record.
		later = append(first, later...)
		first = nil
	}
	if t.rt != nil {
		// A simulated world: no goroutines, groups in the Runtime's order.
		if t.rt.Order != nil && len(first) > 1 {
			perm := t.rt.Order(len(first))
			ordered := make([][]int, 0, len(first))
			for _, j := range perm {
				ordered = append(ordered, first[j])
			}
			first = ordered
		}
		later = append(first, later...)
		first = nil
	}
	sem := make(chan struct{}, p.c.concurrency)
	var wg sync.WaitGroup
	for _, group := range first {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			p.runGroup(ctx, t, ev.Records, keys, group, reports)
		}()
	}
	wg.Wait()
	for _, group := range later {
		p.runGroup(ctx, t, ev.Records, keys, group, reports)
	}

	var resp events.SQSEventResponse
	failed := 0
	for i := range reports {
		if !reports[i].Acked {
			failed++
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: ev.Records[i].MessageId})
		}
	}
	if p.c.hook != nil {
		rep := &InvocationReport{Namespace: p.c.namespace, Records: reports, Failed: failed}
		if lc, ok := lambdacontext.FromContext(ctx); ok {
			rep.RequestID = lc.AwsRequestID
		}
		p.c.hook(rep)
	}
	if failed > 0 && (p.c.failOnAny || (failed == len(reports) && p.c.allFailedError)) {
		return resp, &BatchError{Failed: failed, Total: len(reports)}
	}
	return resp, nil
}

// plan splits the batch into groups of record indices that run in order,
// and derives each record's key once. On a FIFO queue a group is a message
// group. On a standard queue a group is the records sharing a key, so a
// duplicate in the same batch waits for its original and is then skipped
// as a duplicate, instead of being turned away as "in progress". Groups
// holding a redelivered record go last, one at a time.
func (p *sqsProcessor) plan(recs []events.SQSMessage) (keys []derived, first, later [][]int) {
	if len(recs) == 0 {
		return nil, nil, nil
	}
	keys = make([]derived, len(recs))
	for i, m := range recs {
		keys[i] = p.derive(m)
	}
	fifo := strings.HasSuffix(recs[0].EventSourceARN, ".fifo")
	index := make(map[string]int, len(recs))
	groups := make([][]int, 0, len(recs))
	// Most groups hold one record: they share one backing array, each a
	// full slice of its own cell, so a second record copies that group out.
	cells := make([]int, len(recs))
	one := func(i int) []int { cells[i] = i; return cells[i : i+1 : i+1] }
	for i, m := range recs {
		var g string
		switch {
		case fifo:
			g = m.Attributes["MessageGroupId"]
		case keys[i].err == nil:
			g = keys[i].key
		default:
			groups = append(groups, one(i))
			continue
		}
		if j, ok := index[g]; ok {
			groups[j] = append(groups[j], i)
			continue
		}
		index[g] = len(groups)
		groups = append(groups, one(i))
	}
	first = make([][]int, 0, len(groups))
	for _, g := range groups {
		isLate := false
		for _, i := range g {
			isLate = isLate || p.redelivered(recs[i])
		}
		if isLate {
			later = append(later, g)
		} else {
			first = append(first, g)
		}
	}
	return keys, first, later
}

// redelivered reports whether isolation applies to a record SQS delivered
// before.
func (p *sqsProcessor) redelivered(m events.SQSMessage) bool {
	if !p.c.isolate {
		return false
	}
	n, err := strconv.Atoi(m.Attributes["ApproximateReceiveCount"])
	return err == nil && n > 1
}

// derived is a record's stored key and payload hash, or why it has none.
type derived struct {
	key, hash string
	err       error
}

func (p *sqsProcessor) derive(msg events.SQSMessage) derived {
	key, hash, err := p.keyAndHash(msg)
	if err != nil {
		if !errors.Is(err, ErrMissingKey) {
			err = fmt.Errorf("%w: %w", ErrMissingKey, err)
		}
		return derived{err: err}
	}
	return derived{key: storedKey(key), hash: storedHash(hash)}
}

// keyAndHash runs the key and hash functions; a panic in either is that
// record's error, never the batch's crash.
func (p *sqsProcessor) keyAndHash(msg events.SQSMessage) (key, hash string, err error) {
	defer func() {
		if v := recover(); v != nil {
			if mutant.On("key-panic-crash") {
				panic(v) // issue 11 bug 10: one record crashes the batch
			}
			err = fmt.Errorf("%w: key or hash function panicked: %v", ErrMissingKey, v)
		}
	}()
	key, err = p.c.keyFunc(msg)
	if err == nil {
		hash, err = p.c.hash(bodyBytes(msg.Body))
	}
	return key, hash, err
}

// runGroup runs records in order; once one is not acknowledged, the rest of
// its group (FIFO group, or copies of one key) is reported failed without
// running.
func (p *sqsProcessor) runGroup(ctx context.Context, t timing, recs []events.SQSMessage, keys []derived, group []int, reports []RecordReport) {
	stopped := false
	for _, i := range group {
		if stopped {
			reports[i] = RecordReport{MessageID: recs[i].MessageId, MessageGroupID: recs[i].Attributes["MessageGroupId"], Key: keys[i].key, Outcome: OutcomeSkippedGroup}
			continue
		}
		reports[i] = p.process(ctx, t, recs[i], keys[i])
		stopped = !reports[i].Acked && len(group) > 1
	}
}

func (p *sqsProcessor) process(ctx context.Context, t timing, msg events.SQSMessage, d derived) RecordReport {
	r := RecordReport{MessageID: msg.MessageId, MessageGroupID: msg.Attributes["MessageGroupId"]}
	if d.err != nil {
		return p.badInput(ctx, t, msg, d.err, r)
	}
	hash := d.hash
	r.Key = d.key
	now := t.now()
	if p.cache.hit(r.Key, hash, now) {
		r.Outcome, r.Acked = OutcomeCachedDuplicate, true
		return r
	}
	if !t.canClaim(now) {
		r.Outcome = OutcomeNotStarted
		return p.logged(ctx, slog.LevelWarn, r)
	}
	if req, ok := p.unrecorded.get(r.Key, hash); ok && !mutant.On("unrecorded-rerun") { // issue 11 bug 8 when on
		if rep, done := p.recordLate(ctx, t, hash, req, r); done {
			return rep
		}
	}
	r.StoreCalls++
	cr, err := p.store.Claim(ctx, ClaimRequest{
		Namespace:   p.c.namespace,
		Key:         r.Key,
		PayloadHash: hash,
		MessageID:   msg.MessageId,
		Now:         now,
		LeaseUntil:  p.leaseUntil(t, now),
		Grace:       p.c.grace,
		NoTakeover:  p.c.atMostOnce,
		ExpiresAt:   p.retentionUntil(now, false),
	})
	if err != nil {
		r.Outcome, r.Err = OutcomeStoreError, err
		r.StoreErrors++
		return p.logged(ctx, slog.LevelError, r)
	}
	if !cr.Claimed {
		return p.refused(ctx, t, msg, hash, cr.Record, r)
	}
	return p.claimed(ctx, t, msg, hash, cr, r)
}

// refused decides what a refused claim means (the outcome table of docs/design.md).
func (p *sqsProcessor) refused(ctx context.Context, t timing, msg events.SQSMessage, hash string, rec Record, r RecordReport) RecordReport {
	now := t.now()
	r.Attempt = rec.Attempts
	switch {
	case rec.Status == StatusDeadLettered && rec.DeadLetteredMessageID == msg.MessageId:
		r.Outcome, r.Acked = OutcomeDeadLetteredDuplicate, true
		return p.logged(ctx, slog.LevelInfo, r)
	case rec.Status == StatusDeadLettered:
		return p.deadLetter(ctx, t, msg, nil, &rec, ReasonKeyDeadLettered,
			fmt.Errorf("key %q was dead-lettered with message %s (%s)", r.Key, rec.DeadLetteredMessageID, rec.DeadLetterReason), r)
	case rec.PayloadHash != hash:
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
		return p.outcomeUnknown(ctx, t, msg, hash, rec, r)
	default:
		// IN_PROGRESS under a valid lease: come back when it ends.
		r.Outcome, r.Err = OutcomeInProgress, ErrInProgress
		if mutant.On("cache-non-completed") {
			p.cache.add(r.Key, hash, now, time.Time{})
		}
		wait := rec.LeaseUntil.Add(p.c.grace).Sub(now)
		wait += time.Duration(t.int64N(int64(time.Second)))
		p.changeVisibility(ctx, t, msg, wait, &r)
		return p.logged(ctx, slog.LevelInfo, r)
	}
}

// claimed runs the handler under the lease and records its outcome.
func (p *sqsProcessor) claimed(ctx context.Context, t timing, msg events.SQSMessage, hash string, cr ClaimResult, r RecordReport) RecordReport {
	lease := cr.Lease
	r.Attempt = lease.Attempt
	r.Takeover = cr.Previous == StatusInProgress
	if lease.Attempt > p.c.maxAttempts {
		// The previous holders never recorded an outcome: the message crashes
		// or times out the function. Do not run it again.
		err := fmt.Errorf("claimed %d times (max %d); %d previous attempts were abandoned without an outcome",
			lease.Attempt, p.c.maxAttempts, cr.Record.Takeovers)
		return p.deadLetter(ctx, t, msg, &lease, &cr.Record, ReasonMaxAttempts, err, r)
	}
	if r.Takeover {
		p.log(ctx, slog.LevelWarn, "lambdaidem: took over an abandoned lease",
			slog.String("key", r.Key), slog.String("message_id", r.MessageID), slog.Int("attempt", lease.Attempt))
	}

	st := &recordState{lease: lease}
	copyMsg := msg
	copyMsg.Attributes = maps.Clone(msg.Attributes)
	copyMsg.MessageAttributes = cloneMessageAttributes(msg.MessageAttributes)
	// Reading the clock costs about 0.1 µs here: with the real clock, the
	// handler's start and end times double as "now".
	start := p.wall(t)
	now := p.nowAt(t, start)
	herr := p.runHandler(ctx, t, st, now, func(ctx context.Context) error { return p.handler(ctx, copyMsg) })
	end := p.wall(t)
	r.HandlerDuration = end.Sub(start)
	r.HandlerRan = true

	dctx, dcancel := p.detached(ctx, t)
	defer dcancel()
	if herr == nil {
		now = p.nowAt(t, end)
		writes := st.takeWrites()
		req := CompleteRequest{Lease: lease, ExpiresAt: p.retentionUntil(now, true), Writes: writes, Now: now}
		if p.c.resultRetention < p.c.retention {
			req.ResultUntil = now.Add(p.c.resultRetention)
		}
		tries := 0
		err := retryStore(dctx, &r, func(ctx context.Context) error {
			if tries++; tries > 1 {
				req.Now = t.now()
			}
			return p.store.Complete(ctx, req)
		})
		switch {
		case err == nil:
			// Never remember it longer than the store does, nor past the
			// result's retention (a later repeat is a late replay).
			if mutant.On("cache-outlives-retention") {
				// issue 11 bugs 5 and 6: remembered for the cache's TTL alone.
				p.cache.add(r.Key, hash, now, time.Time{})
			} else {
				p.cache.add(r.Key, hash, now, minNonZero(req.ExpiresAt, req.ResultUntil))
			}
			r.Outcome, r.Acked = OutcomeProcessed, true
			return p.logged(ctx, slog.LevelDebug, r)
		case errors.Is(err, ErrLeaseLost):
			// Someone took the key over. Report the record failed rather
			// than acknowledge it: its redelivery finds the new holder's
			// outcome (a duplicate once completed), and if the new holder
			// fails, the message is still there to retry.
			r.Outcome, r.Err = OutcomeLeaseLost, err
			return p.logged(ctx, slog.LevelWarn, r)
		case errors.Is(err, ErrStoreUnavailable) && len(writes) > 0:
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
			p.unrecorded.add(r.Key, hash, req)
			r.Outcome, r.Acked, r.Err = OutcomeUnrecorded, true, err
			return p.logged(ctx, slog.LevelError, r)
		default:
			// The completion was refused for what it carried (a transaction
			// write's condition, a limit): nothing was committed.
			herr = err
		}
	}

	r.Err = herr
	var poison *PoisonError
	var panicked *PanicError
	switch {
	case errors.As(herr, &poison):
		return p.deadLetter(ctx, t, msg, &lease, &cr.Record, ReasonPoison, herr, r)
	case p.c.atMostOnce && st.ctxEnded && !mutant.On("amo-cancel-retry"): // issue 11 bug 7 when on
		// The handler gave up because its context ended (the deadline,
		// a lost lease): whatever it had started may have happened. That is
		// as unknown as a crash, and this mode never runs it again.
		cause := fmt.Errorf("%w: attempt %d returned after its context ended: %w", ErrOutcomeUnknown, lease.Attempt, herr)
		return p.deadLetter(ctx, t, msg, &lease, &cr.Record, ReasonOutcomeUnknown, cause, r)
	case p.c.atMostOnce && errors.As(herr, &panicked):
		// A panic stops the handler wherever it was, possibly after its
		// effect: as unknown as a crash.
		cause := fmt.Errorf("%w: attempt %d panicked: %w", ErrOutcomeUnknown, lease.Attempt, herr)
		return p.deadLetter(ctx, t, msg, &lease, &cr.Record, ReasonOutcomeUnknown, cause, r)
	case lease.Attempt >= p.c.maxAttempts:
		return p.deadLetter(ctx, t, msg, &lease, &cr.Record, ReasonMaxAttempts, herr, r)
	}
	r.Outcome = OutcomeFailed
	p.fail(dctx, t, lease, herr, &r)
	var ra *RetryAfterError
	if errors.As(herr, &ra) {
		p.changeVisibility(ctx, t, msg, ra.Delay, &r)
	} else if p.c.backoff != nil {
		p.changeVisibility(ctx, t, msg, p.c.backoff(lease.Attempt), &r)
	}
	return p.logged(ctx, slog.LevelWarn, r)
}

// recordLate writes a completion this container could not write when the
// handler succeeded, now that its key came back (WithFailBatchOnAnyFailure
// returns the whole batch, say). The write is fenced by that attempt's
// lease token: it applies only if nobody took the key over since. done is
// false when the key must be claimed as usual.
func (p *sqsProcessor) recordLate(ctx context.Context, t timing, hash string, req CompleteRequest, r RecordReport) (RecordReport, bool) {
	dctx, cancel := p.detached(ctx, t)
	defer cancel()
	r.Attempt = req.Lease.Attempt
	err := retryStore(dctx, &r, func(ctx context.Context) error {
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

// fail records a retryable failure; if that cannot be written the lease
// runs out and the next claim takes over.
func (p *sqsProcessor) fail(ctx context.Context, t timing, lease Lease, herr error, r *RecordReport) {
	now := t.now()
	err := retryStore(ctx, r, func(ctx context.Context) error {
		return p.store.Fail(ctx, FailRequest{Lease: lease, Now: t.now(), Error: herr.Error(), ExpiresAt: p.retentionUntil(now, false)})
	})
	if err != nil {
		p.log(ctx, slog.LevelError, "lambdaidem: could not record failure",
			slog.String("key", r.Key), slog.String("message_id", r.MessageID), slog.Any("error", err))
	}
}

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
	if lease != nil && !mutant.On("stale-poison") { // issue 11 bug 12 when on
		// Confirm the lease before sending: a holder that lost it (its
		// key taken over and perhaps completed) must never put a copy of
		// finished work in the DLQ.
		now := t.now()
		perr := retryStore(dctx, &r, func(ctx context.Context) error {
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
	if err != nil && mutant.On("ack-before-dlq-send") {
		r.Outcome, r.Acked = OutcomeDeadLettered, true
		return r
	}
	if err != nil {
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
		merr := retryStore(dctx, &r, func(ctx context.Context) error {
			return p.store.DeadLetter(ctx, DeadLetterRequest{
				Lease: *lease, Now: t.now(), Reason: reason, Error: cause.Error(),
				MessageID: msg.MessageId, DeadLetterMessageID: id, ExpiresAt: p.retentionUntil(now, false),
			})
		})
		switch {
		case errors.Is(merr, ErrLeaseLost) && !mutant.On("stale-poison"):
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
	cr, err := p.store.Claim(ctx, ClaimRequest{
		Namespace: p.c.namespace, Key: r.Key, PayloadHash: hash, MessageID: msg.MessageId, Now: now,
		LeaseUntil: p.leaseUntil(t, now), Grace: p.c.grace, ExpiresAt: p.retentionUntil(now, false),
	})
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

// leaseOf rebuilds the lease of a record's latest claim.
func leaseOf(rec Record) Lease {
	return Lease{Namespace: rec.Namespace, Key: rec.Key, Token: rec.LeaseToken, Until: rec.LeaseUntil, Fence: rec.Fence, Attempt: rec.Attempts}
}

// badInput handles a message no key can be derived from: it can never be
// processed, so it is dead-lettered when a sink is configured, and
// otherwise reported failed so SQS keeps it.
func (p *sqsProcessor) badInput(ctx context.Context, t timing, msg events.SQSMessage, err error, r RecordReport) RecordReport {
	if p.c.sink == nil {
		r.Outcome, r.Err = OutcomeMissingKey, err
		return p.logged(ctx, slog.LevelError, r)
	}
	return p.deadLetter(ctx, t, msg, nil, nil, ReasonMissingKey, err, r)
}

func (p *sqsProcessor) changeVisibility(ctx context.Context, t timing, msg events.SQSMessage, d time.Duration, r *RecordReport) {
	if p.c.visibility == nil {
		return
	}
	d = min(max(d, 0), 12*time.Hour)
	dctx, cancel := p.detached(ctx, t)
	defer cancel()
	if err := p.c.visibility.ChangeVisibility(dctx, msg, d); err != nil {
		// The message comes back when the queue's own visibility timeout
		// ends, not when asked (RetryAfter, backoff): the report says so.
		r.VisibilityErr = err
		p.log(ctx, slog.LevelWarn, "lambdaidem: could not change visibility",
			slog.String("message_id", r.MessageID), slog.Duration("timeout", d), slog.Any("error", err))
	}
}

// logged writes the record's one line and returns it.
func (p *sqsProcessor) logged(ctx context.Context, level slog.Level, r RecordReport) RecordReport {
	if !p.c.logger.Enabled(ctx, level) {
		return r
	}
	attrs := []slog.Attr{
		slog.String("namespace", p.c.namespace),
		slog.String("key", r.Key),
		slog.String("message_id", r.MessageID),
		slog.Int("attempt", r.Attempt),
		slog.String("outcome", string(r.Outcome)),
		slog.Bool("acked", r.Acked),
	}
	if r.Reason != "" {
		attrs = append(attrs, slog.String("reason", string(r.Reason)))
	}
	if r.MessageGroupID != "" {
		attrs = append(attrs, slog.String("message_group_id", r.MessageGroupID))
	}
	if r.Err != nil {
		attrs = append(attrs, slog.String("error", r.Err.Error()))
	}
	p.c.logger.LogAttrs(ctx, level, "lambdaidem: record "+string(r.Outcome), attrs...)
	return r
}

func minNonZero(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero():
		return a
	}
	return minTime(a, b)
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
