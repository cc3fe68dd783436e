package sqsqueue

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
)

// These tests hold the table in docs/redrive.md: one test per state the
// key's record can be in when a dead-letter copy is redriven. They run the
// real decorator over the in-memory store, the real Sink, and Redrive
// against the emulator.

const keyAttr = "idempotency-key"

// flaky passes calls through to SQS, failing the next DeleteMessage calls
// on the DLQ it is told to, and calling afterSend after each send.
type flaky struct {
	*sqs.Client
	dlqURL        string
	failDeletes   atomic.Int32
	afterSend     func(in *sqs.SendMessageInput)
	sentToSources atomic.Int32
}

func (f *flaky) DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	if *in.QueueUrl == f.dlqURL && f.failDeletes.Add(-1) >= 0 {
		return nil, errors.New("injected: connection reset")
	}
	return f.Client.DeleteMessage(ctx, in, opts...)
}

func (f *flaky) SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	out, err := f.Client.SendMessage(ctx, in, opts...)
	if err == nil && *in.QueueUrl != f.dlqURL {
		f.sentToSources.Add(1)
		if f.afterSend != nil {
			f.afterSend(in)
		}
	}
	return out, err
}

type stateEnv struct {
	bundle
	t        *testing.T
	src, dlq queue
	store    *memstore.Store
	sink     *Sink
	client   *flaky
	poison   atomic.Bool
	runs     atomic.Int32
	h        func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)
}

// newStateEnv builds a source queue, a DLQ and the decorated function;
// with attrKey, keys come from the idempotency-key attribute, otherwise
// they are SQS message IDs (the default). The handler dead-letters every
// message while poison is set, and counts its successful runs.
func newStateEnv(t *testing.T, attrKey bool) *stateEnv {
	t.Helper()
	b := setup(t)
	e := &stateEnv{bundle: b, t: t, src: b.newQueue(t, "src", false, nil), dlq: b.newQueue(t, "dlq", false, nil), store: memstore.New()}
	e.client = &flaky{Client: b.client, dlqURL: e.dlq.url}
	e.sink = NewSink(b.client, e.dlq.url)
	e.poison.Store(true)
	opts := []lambdaidem.Option{lambdaidem.WithNamespace("ns"), lambdaidem.WithDeadLetterSink(e.sink)}
	if attrKey {
		opts = append(opts, lambdaidem.WithKeyAttribute(keyAttr))
	}
	e.h = lambdaidem.SQS(e.store, func(context.Context, events.SQSMessage) error {
		if e.poison.Load() {
			return lambdaidem.Poison(errors.New("bad order"))
		}
		e.runs.Add(1)
		return nil
	}, opts...)
	return e
}

// send puts a message on the source queue, with the key attribute unless
// key is empty.
func (e *stateEnv) send(body, key string) {
	e.t.Helper()
	var attrs map[string]types.MessageAttributeValue
	if key != "" {
		attrs = map[string]types.MessageAttributeValue{keyAttr: {DataType: ptr("String"), StringValue: ptr(key)}}
	}
	e.bundle.send(e.t, e.src, body, attrs, "")
}

// deliver hands every visible source message to the function, as Lambda
// would, deleting the acknowledged ones, until the queue is empty or a
// round acknowledges nothing. It returns how many it delivered.
func (e *stateEnv) deliver() int {
	e.t.Helper()
	n := 0
	for range 5 {
		// Empty decides that everything was delivered: a long poll's
		// answer, not a short poll's.
		ms := e.receiveWait(e.t, e.src.url, 0, 1)
		if len(ms) == 0 {
			return n
		}
		ev := events.SQSEvent{}
		for _, m := range ms {
			ev.Records = append(ev.Records, toEvent(m, e.src.arn))
		}
		resp, err := e.h(e.ctx, ev)
		if err != nil && len(resp.BatchItemFailures) == 0 {
			e.t.Fatalf("function: %v", err)
		}
		failed := map[string]bool{}
		for _, f := range resp.BatchItemFailures {
			failed[f.ItemIdentifier] = true
		}
		for _, m := range ms {
			if !failed[deref(m.MessageId)] {
				n++
				if _, err := e.client.Client.DeleteMessage(e.ctx, &sqs.DeleteMessageInput{QueueUrl: &e.src.url, ReceiptHandle: m.ReceiptHandle}); err != nil {
					e.t.Fatal(err)
				}
			}
		}
		if len(failed) == len(ms) {
			return n
		}
	}
	return n
}

// count is how many messages a queue holds, visible or not.
func (e *stateEnv) count(q queue) int {
	e.t.Helper()
	out, err := e.client.Client.GetQueueAttributes(e.ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: &q.url,
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	a, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	b, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return a + b
}

// redrive runs Redrive back to the source queue with the environment's
// store, after mod adjusts the options.
func (e *stateEnv) redrive(mod func(*RedriveOptions)) (RedriveSummary, []RedriveEvent) {
	e.t.Helper()
	var evs []RedriveEvent
	o := RedriveOptions{
		Client: e.client, DeadLetterQueueURL: e.dlq.url, SourceQueues: []string{e.src.arn},
		Resetter: e.store, WaitTime: -1,
		Progress: func(ev RedriveEvent) { evs = append(evs, ev) },
	}
	if mod != nil {
		mod(&o)
	}
	sum, err := Redrive(e.ctx, o)
	if err != nil {
		e.t.Fatalf("Redrive: %v", err)
	}
	return sum, evs
}

func (e *stateEnv) record(key string) idemstore.Record {
	e.t.Helper()
	r, err := e.store.Get(e.ctx, idemstore.GetRequest{Namespace: "ns", Key: key, Now: time.Now()})
	if err != nil {
		e.t.Fatalf("record %s: %v", key, err)
	}
	return r
}

// copyFor sends a dead-letter copy for key with the Sink, as a decorator
// would, without touching the record; it returns the copy's ID.
func (e *stateEnv) copyFor(key string, reason idemstore.Reason) string {
	e.t.Helper()
	msg := e.consume(e.t, e.src, "body of "+key, map[string]types.MessageAttributeValue{keyAttr: {DataType: ptr("String"), StringValue: ptr(key)}}, "")
	if _, err := e.client.Client.DeleteMessage(e.ctx, &sqs.DeleteMessageInput{QueueUrl: &e.src.url, ReceiptHandle: &msg.ReceiptHandle}); err != nil {
		e.t.Fatal(err)
	}
	id, err := e.sink.Send(e.ctx, lambdaidem.DeadLetter{Message: msg, Namespace: "ns", Key: key, Reason: reason, Attempts: 1, PayloadHash: "h"})
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

// claim claims key in the store, its lease ending at leaseUntil.
func (e *stateEnv) claim(key string, leaseUntil time.Time) idemstore.Lease {
	e.t.Helper()
	now := time.Now()
	c, err := e.store.Claim(e.ctx, idemstore.ClaimRequest{
		Namespace: "ns", Key: key, PayloadHash: "h", MessageID: "m-" + key,
		Now: now, LeaseUntil: leaseUntil, ExpiresAt: now.Add(time.Hour),
	})
	if err != nil || !c.Claimed {
		e.t.Fatalf("claim %s: %+v, %v", key, c, err)
	}
	return c.Lease
}

// wantOne checks that the run handled one copy with the given outcome and
// error.
func wantOne(t *testing.T, evs []RedriveEvent, outcome RedriveOutcome, err error) RedriveEvent {
	t.Helper()
	if len(evs) != 1 {
		t.Fatalf("%d events, want 1: %+v", len(evs), evs)
	}
	ev := evs[0]
	if ev.Outcome != outcome || !errors.Is(ev.Err, err) && err != nil || err == nil && ev.Err != nil {
		t.Fatalf("event: %s at %s: %v; want %s with %v", ev.Outcome, ev.Step, ev.Err, outcome, err)
	}
	return ev
}

// Row: dead-lettered by this copy. Reset, sent, deleted; the message runs
// once; the record says it was redriven.
func TestRedriveStateDeadLetteredByThisCopy(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t, true)
	e.send(`{"order":1}`, "order-1")
	e.deliver()
	if r := e.record("order-1"); r.Status != idemstore.StatusDeadLettered || e.count(e.dlq) != 1 {
		t.Fatalf("before: record %s, DLQ %d", r.Status, e.count(e.dlq))
	}
	e.poison.Store(false)
	_, evs := e.redrive(nil)
	ev := wantOne(t, evs, RedriveMoved, nil)
	if ev.Record.Status != idemstore.StatusFailed || ev.Record.Redrives != 1 || ev.Record.RedrivenFrom != ev.DeadLetterMessageID || ev.Record.Attempts != 0 {
		t.Errorf("record after the reset: %+v", ev.Record)
	}
	if e.deliver() != 1 || e.runs.Load() != 1 {
		t.Fatalf("the redriven message ran %d times, want 1", e.runs.Load())
	}
	if r := e.record("order-1"); r.Status != idemstore.StatusCompleted || r.Redrives != 1 || r.Attempts != 1 {
		t.Errorf("record after the run: %s, %d redrives, %d attempts", r.Status, r.Redrives, r.Attempts)
	}
	if n := e.count(e.dlq); n != 0 {
		t.Errorf("DLQ holds %d", n)
	}
}

// Row: sent back by an earlier run whose delete failed (issue: the second
// redrive used to delete the COMPLETED record and run the work again).
// Before the redriven message runs, the copy is skipped; after it
// completed, the copy is deleted without being sent.
func TestRedriveStateSentBeforeThenCompleted(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t, true)
	e.send(`{"order":2}`, "order-2")
	e.deliver()
	e.poison.Store(false)
	e.client.failDeletes.Store(1)
	sum, evs := e.redrive(nil)
	if sum.Failed != 1 || evs[0].Step != StepDelete {
		t.Fatalf("first run: %+v %+v", sum, evs)
	}
	// The copy is in both queues now. A second run before the function
	// ran it: skipped, not sent again.
	_, evs = e.redrive(nil)
	wantOne(t, evs, RedriveSkipped, ErrSentBefore)
	if n := e.client.sentToSources.Load(); n != 1 {
		t.Errorf("sent back %d times, want 1", n)
	}
	e.deliver()
	// A third run after it completed: the work is done; deleted unsent.
	sum, evs = e.redrive(nil)
	wantOne(t, evs, RedriveAlreadyDone, nil)
	if sum.Done != 1 || e.count(e.dlq) != 0 || e.count(e.src) != 0 || e.client.sentToSources.Load() != 1 {
		t.Errorf("summary %+v, DLQ %d, source %d, sends %d", sum, e.count(e.dlq), e.count(e.src), e.client.sentToSources.Load())
	}
	e.deliver()
	if e.runs.Load() != 1 {
		t.Errorf("handler ran %d times, want 1", e.runs.Load())
	}
	if r := e.record("order-2"); r.Status != idemstore.StatusCompleted {
		t.Errorf("record %s, want COMPLETED", r.Status)
	}
}

// Row: sent back before, with Resend and a key that survives the redrive:
// sent again, and the decorator acknowledges the second arrival as a
// duplicate.
func TestRedriveStateResendWithStableKey(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t, true)
	e.send(`{"order":3}`, "order-3")
	e.deliver()
	e.poison.Store(false)
	e.client.failDeletes.Store(1)
	e.redrive(nil)
	_, evs := e.redrive(func(o *RedriveOptions) { o.Resend = true })
	wantOne(t, evs, RedriveMoved, nil)
	if e.deliver() != 2 || e.runs.Load() != 1 || e.count(e.dlq) != 0 {
		t.Errorf("runs %d (want 1), DLQ %d", e.runs.Load(), e.count(e.dlq))
	}
}

// Row: two copies of one key (the poison copy and the
// key_already_dead_lettered copy of a second delivery). One run sends one
// and skips the other; once the key completed, the other is deleted.
func TestRedriveStateTwoCopiesOfOneKey(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t, true)
	e.send(`{"order":4}`, "order-4")
	e.deliver()
	e.send(`{"order":4}`, "order-4")
	e.deliver()
	if n := e.count(e.dlq); n != 2 {
		t.Fatalf("DLQ holds %d copies, want 2", n)
	}
	e.poison.Store(false)
	sum, _ := e.redrive(nil)
	if sum.Moved != 1 || sum.Skipped != 1 {
		t.Fatalf("first run: %+v, want 1 moved, 1 skipped", sum)
	}
	e.deliver()
	sum, _ = e.redrive(nil)
	if sum != (RedriveSummary{Done: 1}) {
		t.Fatalf("second run: %+v, want 1 already done", sum)
	}
	if e.runs.Load() != 1 || e.count(e.dlq) != 0 {
		t.Errorf("runs %d (want 1), DLQ %d", e.runs.Load(), e.count(e.dlq))
	}
}

// Row: COMPLETED, and the copy was never redriven (a stale holder sent it
// after another completed the key). The work is done: deleted unsent.
func TestRedriveStateCompleted(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t, true)
	l := e.claim("order-5", time.Now().Add(time.Minute))
	if err := e.store.Complete(e.ctx, idemstore.CompleteRequest{Lease: l, Now: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	e.copyFor("order-5", idemstore.ReasonPoison)
	_, evs := e.redrive(nil)
	wantOne(t, evs, RedriveAlreadyDone, nil)
	if e.count(e.dlq) != 0 || e.client.sentToSources.Load() != 0 {
		t.Errorf("DLQ %d, sends %d", e.count(e.dlq), e.client.sentToSources.Load())
	}
}

// Rows: the function still owns the message (FAILED after a dead-letter
// mark that failed; IN_PROGRESS under a valid lease, or one that ran out,
// pending dead-letter marks included), the record is absent, or another
// copy dead-lettered it. Skipped; record unchanged; nothing sent.
func TestRedriveStateNotDeadLetteredByThisCopy(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t, true)
	now := time.Now()
	l := e.claim("failed", now.Add(time.Minute))
	if err := e.store.Fail(e.ctx, idemstore.FailRequest{Lease: l, Now: now, Error: "dead-letter mark failed", ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	e.claim("held", now.Add(time.Hour))
	e.claim("abandoned", now.Add(-time.Hour))
	l = e.claim("other-copy", now.Add(time.Minute))
	if err := e.store.DeadLetter(e.ctx, idemstore.DeadLetterRequest{Lease: l, Now: now, Reason: idemstore.ReasonPoison, DeadLetterMessageID: "another-copy", ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	keys := []string{"failed", "held", "abandoned", "other-copy"}
	before := map[string]idemstore.Record{}
	for _, k := range keys {
		before[k] = e.record(k)
		e.copyFor(k, idemstore.ReasonPoison)
	}
	e.copyFor("absent", idemstore.ReasonPoison)

	sum, evs := e.redrive(nil)
	if sum != (RedriveSummary{Skipped: 5}) {
		t.Fatalf("summary %+v, want 5 skipped", sum)
	}
	for _, ev := range evs {
		if !errors.Is(ev.Err, ErrNotRedrivable) || ev.Step != StepReset {
			t.Errorf("%s: %s at %s: %v; want skipped at reset with ErrNotRedrivable", ev.Metadata.Key, ev.Outcome, ev.Step, ev.Err)
		}
	}
	for _, k := range keys {
		if r := e.record(k); r.Status != before[k].Status || r.LeaseToken != before[k].LeaseToken || r.Redrives != 0 {
			t.Errorf("%s changed: %+v", k, r)
		}
	}
	if e.count(e.dlq) != 5 || e.client.sentToSources.Load() != 0 {
		t.Errorf("DLQ %d (want 5), sends %d", e.count(e.dlq), e.client.sentToSources.Load())
	}
}

// Row: a key_conflict copy. Its key's record is the other message's
// (here COMPLETED): never reset, never counted as done; left for a person.
func TestRedriveStateKeyConflict(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t, true)
	e.poison.Store(false)
	e.send(`{"order":6,"amount":1}`, "order-6")
	e.deliver()
	e.send(`{"order":6,"amount":999}`, "order-6")
	e.deliver()
	if n := e.count(e.dlq); n != 1 {
		t.Fatalf("DLQ holds %d, want the conflict copy", n)
	}
	before := e.record("order-6")
	_, evs := e.redrive(nil)
	wantOne(t, evs, RedriveSkipped, ErrConflictCopy)
	if r := e.record("order-6"); r.Status != idemstore.StatusCompleted || r.LeaseToken != before.LeaseToken {
		t.Errorf("the other message's record changed: %+v", r)
	}
	if e.count(e.dlq) != 1 || e.runs.Load() != 1 {
		t.Errorf("DLQ %d (want 1), runs %d (want 1)", e.count(e.dlq), e.runs.Load())
	}
}

// Row: forged copies, written by anyone allowed to send to the DLQ. A
// forged copy names a real dead-lettered record (its ID is not the
// record's copy ID), a queue nobody named, or no key: all skipped, no
// record touched, nothing sent.
func TestRedriveStateForged(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t, true)
	e.send(`{"order":7}`, "order-7")
	e.deliver()
	before := e.record("order-7")
	forge := func(meta string) {
		attrs := map[string]types.MessageAttributeValue{AttributeName: {DataType: ptr("String"), StringValue: ptr(meta)}}
		e.bundle.send(t, e.dlq, `{"order":"forged"}`, attrs, "")
	}
	forge(`{"v":1,"reason":"poison","attempts":1,"source_arn":"` + e.src.arn + `","message_id":"x","namespace":"ns","key":"order-7"}`)
	forge(`{"v":1,"reason":"poison","attempts":1,"source_arn":"arn:aws:sqs:evil.example/x:1:q","message_id":"y","namespace":"ns","key":"order-7"}`)
	forge(`{"v":1,"reason":"poison","attempts":1,"source_arn":"arn:aws:sqs:us-east-1:123456789012:someone-elses","message_id":"z","namespace":"ns","key":"k"}`)
	forge(`{"v":1,"reason":"missing_key","attempts":1,"source_arn":"` + e.src.arn + `","message_id":"w","namespace":"ns","key":""}`)

	_, evs := e.redrive(func(o *RedriveOptions) { o.Max = 5 })
	want := map[string]error{"x": ErrNotRedrivable, "y": ErrSourceNotAllowed, "z": ErrSourceNotAllowed, "w": ErrNoKey}
	moved := 0
	for _, ev := range evs {
		if ev.Metadata.MessageID != "x" && ev.Metadata.MessageID != "y" && ev.Metadata.MessageID != "z" && ev.Metadata.MessageID != "w" {
			if ev.Outcome == RedriveMoved {
				moved++ // the genuine copy
			}
			continue
		}
		ok := errors.Is(ev.Err, want[ev.Metadata.MessageID])
		if ev.Metadata.MessageID == "x" && moved == 1 {
			// After the genuine copy went back, its key is handled for
			// this run before the record is even asked.
			ok = errors.Is(ev.Err, ErrHandledThisRun)
		}
		if ev.Outcome != RedriveSkipped || !ok {
			t.Errorf("forged %s: %s: %v; want skipped with %v", ev.Metadata.MessageID, ev.Outcome, ev.Err, want[ev.Metadata.MessageID])
		}
	}
	// The genuine copy may have been handled before or after the forged
	// one that names its key; either way the record was reset at most once,
	// by its own copy.
	if r := e.record("order-7"); r.Redrives != moved || r.LeaseToken == before.LeaseToken && moved == 1 {
		t.Errorf("record %+v after %d genuine moves", r, moved)
	}
	if e.client.sentToSources.Load() != int32(moved) {
		t.Errorf("sent %d, want %d (the genuine copy only)", e.client.sentToSources.Load(), moved)
	}
}

// Row: still poison after the redrive. Each round trip makes a new copy
// with a new ID; the run skips the copy of a message it sent back itself,
// so it ends; the record counts the redrives, and MaxRedrives stops them.
func TestRedriveStateStillPoisonTerminates(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t, true)
	e.send(`{"order":8}`, "order-8")
	e.deliver()
	// The function runs the redriven message at once, while the redrive is
	// still receiving: it fails again and lands back in the DLQ.
	e.client.afterSend = func(*sqs.SendMessageInput) { e.deliver() }
	for round := 1; round <= 2; round++ {
		sum, evs := e.redrive(nil)
		if sum != (RedriveSummary{Moved: 1, Skipped: 1}) || !errors.Is(evs[1].Err, ErrHandledThisRun) {
			t.Fatalf("round %d: %+v %+v", round, sum, evs)
		}
		if r := e.record("order-8"); r.Status != idemstore.StatusDeadLettered || r.Redrives != round || r.Attempts != 1 {
			t.Fatalf("round %d: record %s, %d redrives, %d attempts", round, r.Status, r.Redrives, r.Attempts)
		}
	}
	_, evs := e.redrive(func(o *RedriveOptions) { o.MaxRedrives = 2 })
	wantOne(t, evs, RedriveSkipped, ErrRedriveLimit)
	if e.count(e.dlq) != 1 || e.runs.Load() != 0 {
		t.Errorf("DLQ %d, runs %d", e.count(e.dlq), e.runs.Load())
	}
}

// Row: message-ID keys (the default). The redriven message gets a new ID,
// so it runs under a new key; the old record only marks the copy as sent.
// A copy whose delete failed is therefore never sent again: it stays, and
// an operator deletes it by hand.
func TestRedriveStateMessageIDKeys(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t, false)
	e.send(`{"order":9}`, "")
	e.deliver()
	e.poison.Store(false)
	e.client.failDeletes.Store(1)
	sum, evs := e.redrive(nil)
	if sum.Failed != 1 || evs[0].Step != StepDelete || evs[0].Metadata.Key != evs[0].Metadata.MessageID {
		t.Fatalf("first run: %+v %+v", sum, evs)
	}
	oldKey, newID := evs[0].Metadata.Key, evs[0].NewMessageID
	e.deliver()
	if e.runs.Load() != 1 {
		t.Fatalf("runs %d, want 1", e.runs.Load())
	}
	if r := e.record(newID); r.Status != idemstore.StatusCompleted {
		t.Errorf("the redriven message's own record is %s, want COMPLETED", r.Status)
	}
	for range 2 {
		_, evs = e.redrive(func(o *RedriveOptions) { o.Resend = false })
		wantOne(t, evs, RedriveSkipped, ErrSentBefore)
	}
	e.deliver()
	if r := e.record(oldKey); r.Status != idemstore.StatusFailed || r.Redrives != 1 || e.runs.Load() != 1 || e.count(e.dlq) != 1 {
		t.Errorf("old record %s (%d redrives), runs %d, DLQ %d", r.Status, r.Redrives, e.runs.Load(), e.count(e.dlq))
	}
}

// Row: no key (missing_key). Skipped unless Keyless; then sent without a
// reset.
func TestRedriveStateNoKey(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t, true)
	e.send(`{"order":10}`, "")
	e.deliver()
	_, evs := e.redrive(nil)
	ev := wantOne(t, evs, RedriveSkipped, ErrNoKey)
	if ev.Metadata.Reason != idemstore.ReasonMissingKey {
		t.Fatalf("reason %s, want missing_key", ev.Metadata.Reason)
	}
	_, evs = e.redrive(func(o *RedriveOptions) { o.Keyless = true })
	wantOne(t, evs, RedriveMoved, nil)
	if e.count(e.dlq) != 0 || e.count(e.src) != 1 {
		t.Errorf("DLQ %d, source %d", e.count(e.dlq), e.count(e.src))
	}
}

// finalMarkFaults answers the final (not pending) DeadLetter as
// unavailable while on: the copy is sent, its mark cannot be written.
type finalMarkFaults struct {
	idemstore.Store
	on atomic.Bool
}

func (s *finalMarkFaults) DeadLetter(ctx context.Context, r idemstore.DeadLetterRequest) error {
	if s.on.Load() && !r.Pending {
		return idemstore.ErrStoreUnavailable
	}
	return s.Store.DeadLetter(ctx, r)
}

// Row: IN_PROGRESS with only the pending mark of the lease this copy was
// sent under (its holder could not write the final mark and stopped, the
// source message gone or not yet back). Redrive writes the final mark for
// this copy and leaves it for the next run, which moves it; a copy not
// sent under that lease (here one written by hand) changes nothing.
func TestRedriveStatePendingMarkOfThisCopy(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t, true)
	faults := &finalMarkFaults{Store: e.store}
	faults.on.Store(true)
	e.h = lambdaidem.SQS(faults, func(context.Context, events.SQSMessage) error {
		if e.poison.Load() {
			return lambdaidem.Poison(errors.New("bad order"))
		}
		e.runs.Add(1)
		return nil
	}, lambdaidem.WithNamespace("ns"), lambdaidem.WithDeadLetterSink(e.sink), lambdaidem.WithKeyAttribute(keyAttr), lambdaidem.WithLease(time.Minute))
	forged := e.copyFor("order-9", idemstore.ReasonPoison)
	e.send(`{"order":9}`, "order-9")
	ms := e.receiveWait(t, e.src.url, 60, 1)
	if len(ms) != 1 {
		t.Fatalf("received %d messages, want 1", len(ms))
	}
	resp, _ := e.h(e.ctx, events.SQSEvent{Records: []events.SQSMessage{toEvent(ms[0], e.src.arn)}})
	if len(resp.BatchItemFailures) != 1 {
		t.Fatalf("response %+v: acknowledged although the final mark was not written", resp)
	}
	// Reported failed: it comes back (here at once).
	if _, err := e.client.Client.ChangeMessageVisibility(e.ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &e.src.url, ReceiptHandle: ms[0].ReceiptHandle, VisibilityTimeout: 0}); err != nil {
		t.Fatal(err)
	}
	if r := e.record("order-9"); r.Status != idemstore.StatusInProgress || r.DeadLetterReason != idemstore.ReasonPoison || e.count(e.dlq) != 2 {
		t.Fatalf("before: record %s (%q), DLQ %d", r.Status, r.DeadLetterReason, e.count(e.dlq))
	}
	faults.on.Store(false)

	// The dry run says what the real run does, and changes nothing.
	_, evs := e.redrive(func(o *RedriveOptions) { o.DryRun, o.Records = true, e.store })
	for _, ev := range evs {
		want := ErrMarkFinished
		if ev.DeadLetterMessageID == forged {
			want = ErrNotRedrivable
		}
		if ev.Outcome != RedriveSkipped || !errors.Is(ev.Err, want) {
			t.Errorf("dry run, copy %s: %s at %s: %v; want skipped with %v", ev.DeadLetterMessageID, ev.Outcome, ev.Step, ev.Err, want)
		}
	}
	if r := e.record("order-9"); r.Status != idemstore.StatusInProgress {
		t.Fatalf("the dry run changed the record: %s", r.Status)
	}

	sum, evs := e.redrive(nil)
	if sum != (RedriveSummary{Skipped: 2}) || len(evs) != 2 {
		t.Fatalf("summary %+v, want 2 skipped", sum)
	}
	var copyID string
	for _, ev := range evs {
		switch {
		case ev.DeadLetterMessageID == forged:
			if !errors.Is(ev.Err, ErrNotRedrivable) {
				t.Errorf("forged copy: %v, want ErrNotRedrivable", ev.Err)
			}
		case errors.Is(ev.Err, ErrMarkFinished) && ev.Step == StepMark:
			copyID = ev.DeadLetterMessageID
		default:
			t.Errorf("copy %s: %s at %s: %v; want the mark finished", ev.DeadLetterMessageID, ev.Outcome, ev.Step, ev.Err)
		}
	}
	r := e.record("order-9")
	if r.Status != idemstore.StatusDeadLettered || r.DeadLetterMessageID != copyID || r.DeadLetterReason != idemstore.ReasonPoison {
		t.Fatalf("record %s, copy %q (%s); want DEAD_LETTERED by %s", r.Status, r.DeadLetterMessageID, r.DeadLetterReason, copyID)
	}
	// The source message, still queued, is now a duplicate of the
	// dead-lettered message: acknowledged, not run, no other copy.
	if n := e.deliver(); n != 1 || e.runs.Load() != 0 || e.count(e.dlq) != 2 {
		t.Fatalf("source message: %d acknowledged, %d runs, DLQ %d; want 1, 0, 2", n, e.runs.Load(), e.count(e.dlq))
	}
	// The next run moves the copy, and the message runs once.
	e.poison.Store(false)
	_, evs = e.redrive(nil)
	moved := 0
	for _, ev := range evs {
		if ev.Outcome == RedriveMoved && ev.DeadLetterMessageID == copyID {
			moved++
		}
	}
	if moved != 1 {
		t.Fatalf("second run: %+v; want the copy moved", evs)
	}
	if n := e.deliver(); n != 1 || e.runs.Load() != 1 {
		t.Fatalf("redriven message: %d delivered, %d runs; want 1 and 1", n, e.runs.Load())
	}
}
