package lambdaidem

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/lambdaidem/go-lambdaidem/internal/mutant"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
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
	c.check(handlerSQS, store)
	c.useHash(true)
	p := &sqsProcessor{engine: newEngine(store, c), handler: handler}
	return p.handle
}

type sqsProcessor struct {
	*engine
	handler MessageHandler
}

func (p *sqsProcessor) handle(invocation context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	// Assigned once, so the goroutines below copy it rather than share it.
	ctx := p.startInvocation(invocation, ev)
	t := p.timing(ctx)
	defer p.share(ctx, &t)()
	reports := make([]RecordReport, len(ev.Records))
	keys, first, later := p.plan(ev.Records)

	// Fresh records (and FIFO groups) run side by side, at most
	// WithConcurrency at once, on the clock's runtime (goroutines in
	// production, a simulator's tasks in a seeded order); records delivered
	// before run one at a time afterwards, so a message that crashes the
	// process takes only itself down on its retries.
	if len(first) == 1 || p.c.concurrency == 1 {
		// Nothing to overlap: run them in order, as the later ones.
		later = append(first, later...)
		first = nil
	}
	if p.c.batched {
		p.runBatched(ctx, t, ev.Records, keys, first, reports)
	} else {
		t.rt.Each(len(first), p.c.concurrency, func(i int) {
			p.runGroup(ctx, t, ev.Records, keys, first[i], reports)
		})
	}
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
	if p.c.hook != nil || p.observed() {
		rep := &InvocationReport{Namespace: p.c.namespace, RequestID: requestID(ctx), Records: reports, Failed: failed}
		if p.c.hook != nil {
			p.c.hook(rep)
		}
		if p.observed() {
			p.invocationEnd(ctx, rep)
		}
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
	if len(recs) == 1 {
		// One record is one group, and with nothing to run beside it,
		// whether it was delivered before changes nothing.
		return keys, soleGroup, nil
	}
	fifo := strings.HasSuffix(recs[0].EventSourceARN, ".fifo")
	// groupOf is the group record i joins by name; ok is false for a
	// record with no key on a standard queue, which is a group of its own.
	groupOf := func(i int) (g string, ok bool) {
		switch {
		case fifo:
			return recs[i].Attributes["MessageGroupId"], true
		case keys[i].err == nil:
			return keys[i].key, true
		}
		return "", false
	}
	// A batch of up to 16 records (SQS's usual 10) finds a record's group
	// by looking at the groups so far, without a map; larger ones index
	// them.
	var index map[string]int
	if len(recs) > 16 {
		index = make(map[string]int, len(recs))
	}
	groups := make([][]int, 0, len(recs))
	// Most groups hold one record: they share one backing array, each a
	// full slice of its own cell, so a second record copies that group out.
	cells := make([]int, len(recs))
	one := func(i int) []int { cells[i] = i; return cells[i : i+1 : i+1] }
	for i := range recs {
		g, ok := groupOf(i)
		if !ok {
			groups = append(groups, one(i))
			continue
		}
		j := -1
		if index != nil {
			if k, found := index[g]; found {
				j = k
			} else {
				index[g] = len(groups)
			}
		} else {
			for k, grp := range groups {
				if h, ok := groupOf(grp[0]); ok && h == g {
					j = k
					break
				}
			}
		}
		if j >= 0 {
			groups[j] = append(groups[j], i)
			continue
		}
		groups = append(groups, one(i))
	}
	// The groups split into first and later in place: first never
	// overtakes the group being read.
	first = groups[:0]
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

// soleGroup is the plan of a batch of one record. It is shared by every
// such batch: nothing changes a plan's groups once made.
var soleGroup = [][]int{{0}}

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
	return derived{key: idemstore.StoredKey(key), hash: storedHash(hash)}
}

// keyAndHash runs the key and hash functions; a panic in either is that
// record's error, never the batch's crash.
func (p *sqsProcessor) keyAndHash(msg events.SQSMessage) (key, hash string, err error) {
	defer func() {
		if v := recover(); v != nil {
			if mutant.On("key-panic-crashes-batch") {
				panic(v) // the bug: one record's key crashes the whole batch
			}
			err = fmt.Errorf("%w: key or hash function panicked: %v", ErrMissingKey, v)
		}
	}()
	if kf, hf := p.c.keyField, p.c.hashFields; kf != nil && hf != nil {
		// Key and hash both read JSON fields: check the body once.
		body := bodyBytes(msg.Body)
		if err = checkJSON(body); err == nil {
			if key, err = kf.keyIn(body); err == nil {
				hash, err = hf.hashIn(body)
			}
		}
		return key, hash, err
	}
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
	p.runRecords(ctx, t, recs, keys, group, false, reports)
}

// runRecords runs the records of a group from the first not yet run;
// stopped tells that an earlier one was not acknowledged.
func (p *sqsProcessor) runRecords(ctx context.Context, t timing, recs []events.SQSMessage, keys []derived, group []int, stopped bool, reports []RecordReport) {
	obase := p.observerBase(ctx, t)
	for _, i := range group {
		rctx := p.recordContext(ctx, obase, recs, keys, i)
		if stopped {
			reports[i] = RecordReport{MessageID: recs[i].MessageId, MessageGroupID: recs[i].Attributes["MessageGroupId"], Key: keys[i].key, Outcome: OutcomeSkippedGroup}
		} else {
			reports[i] = p.process(rctx, t, recs[i], keys[i])
			stopped = len(group) > 1 && stopsGroup(reports[i])
		}
		if p.observed() {
			p.recordEnd(rctx, &reports[i])
		}
	}
}

// stopsGroup reports whether a record's outcome stops the rest of its
// group: one that was not acknowledged.
func stopsGroup(r RecordReport) bool {
	if mutant.On("fifo-continues-after-failure") {
		return false // the bug: the group goes on after a record that was not acknowledged
	}
	return !r.Acked
}

// observerBase is the context an observed record starts from: the
// handlers' shared context when there is one, so the one its observer
// returns (the shared one plus values) can serve as its handler's context
// with no timer of its own.
func (p *sqsProcessor) observerBase(ctx context.Context, t timing) context.Context {
	if p.observed() && t.shared != nil {
		return t.shared.handler
	}
	return ctx
}

// recordContext tells the observers record i starts and returns the
// context it runs under (ctx itself when there are none).
func (p *sqsProcessor) recordContext(ctx, obase context.Context, recs []events.SQSMessage, keys []derived, i int) context.Context {
	if !p.observed() {
		return ctx
	}
	return p.recordStart(obase, RecordInfo{Entry: EntrySQS, Namespace: p.c.namespace, Key: keys[i].key, KeyErr: keys[i].err, Message: &recs[i], Index: i})
}

// startInvocation tells the observers an invocation starts and returns
// the context it runs under (ctx itself when there are none).
func (p *sqsProcessor) startInvocation(ctx context.Context, ev events.SQSEvent) context.Context {
	if !p.observed() {
		return ctx
	}
	return p.invocationStart(ctx, InvocationInfo{Namespace: p.c.namespace, RequestID: requestID(ctx), Records: ev.Records})
}

// requestID is the Lambda request ID the context carries, or "".
func requestID(ctx context.Context) string {
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		return lc.AwsRequestID
	}
	return ""
}
