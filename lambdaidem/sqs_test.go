package lambdaidem_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/memstore"
)

const (
	stdARN  = "arn:aws:sqs:us-east-1:123456789012:orders"
	fifoARN = "arn:aws:sqs:us-east-1:123456789012:orders.fifo"
	ns      = "test"
)

// clock is a settable clock shared by the decorator and the test.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Now().Truncate(time.Second)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// sink records dead letters; err makes Send fail.
type sink struct {
	mu   sync.Mutex
	sent []lambdaidem.DeadLetter
	err  error
}

func (s *sink) Send(_ context.Context, dl lambdaidem.DeadLetter) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return "", s.err
	}
	s.sent = append(s.sent, dl)
	return fmt.Sprintf("dlq-%d", len(s.sent)), nil
}

func (s *sink) reasons() []lambdaidem.Reason {
	s.mu.Lock()
	defer s.mu.Unlock()
	var r []lambdaidem.Reason
	for _, d := range s.sent {
		r = append(r, d.Reason)
	}
	return r
}

// visibility records visibility changes.
type visibility struct {
	mu      sync.Mutex
	changes map[string]time.Duration
}

func (v *visibility) ChangeVisibility(_ context.Context, m events.SQSMessage, d time.Duration) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.changes == nil {
		v.changes = map[string]time.Duration{}
	}
	v.changes[m.MessageId] = d
	return nil
}

func (v *visibility) get(id string) (time.Duration, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	d, ok := v.changes[id]
	return d, ok
}

type bundle struct {
	store *memstore.Store
	clock *clock
	sink  *sink
	vis   *visibility
	calls *counter
}

// counter counts handler calls per message ID.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) inc(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[id]++
}

func (c *counter) get(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[id]
}

func (c *counter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := 0
	for _, v := range c.n {
		t += v
	}
	return t
}

func setup(t *testing.T) *bundle {
	t.Helper()
	return &bundle{store: memstore.New(), clock: newClock(), sink: &sink{}, vis: &visibility{}, calls: &counter{}}
}

func (b *bundle) opts(extra ...lambdaidem.Option) []lambdaidem.Option {
	return append([]lambdaidem.Option{
		lambdaidem.WithNamespace(ns),
		lambdaidem.WithClock(b.clock.Now),
		lambdaidem.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		lambdaidem.WithVisibility(b.vis),
	}, extra...)
}

// counting wraps a handler so every call is counted by message ID.
func (b *bundle) counting(h lambdaidem.MessageHandler) lambdaidem.MessageHandler {
	return func(ctx context.Context, m events.SQSMessage) error {
		b.calls.inc(m.MessageId)
		return h(ctx, m)
	}
}

func ok(context.Context, events.SQSMessage) error { return nil }

func msg(id, body string) events.SQSMessage {
	return events.SQSMessage{
		MessageId: id, Body: body, EventSourceARN: stdARN, ReceiptHandle: "rh-" + id,
		Attributes: map[string]string{"ApproximateReceiveCount": "1"},
	}
}

func redelivered(m events.SQSMessage, n int) events.SQSMessage {
	m.Attributes = map[string]string{"ApproximateReceiveCount": strconv.Itoa(n)}
	for k, v := range m.Attributes {
		m.Attributes[k] = v
	}
	return m
}

func fifo(id, group, body string) events.SQSMessage {
	return events.SQSMessage{
		MessageId: id, Body: body, EventSourceARN: fifoARN,
		Attributes: map[string]string{"ApproximateReceiveCount": "1", "MessageGroupId": group, "MessageDeduplicationId": id},
	}
}

func batch(ms ...events.SQSMessage) events.SQSEvent { return events.SQSEvent{Records: ms} }

func failedIDs(resp events.SQSEventResponse) []string {
	var ids []string
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

func wantFailed(t *testing.T, resp events.SQSEventResponse, want ...string) {
	t.Helper()
	got := strings.Join(failedIDs(resp), ",")
	if got != strings.Join(want, ",") {
		t.Fatalf("failed IDs = [%s], want [%s]", got, strings.Join(want, ","))
	}
}

func (b *bundle) record(t *testing.T, key string) lambdaidem.Record {
	t.Helper()
	r, err := b.store.Get(context.Background(), lambdaidem.GetRequest{Namespace: ns, Key: key, Now: b.clock.Now()})
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	return r
}

func reportsOf(hookOut *[]*lambdaidem.InvocationReport, mu *sync.Mutex) lambdaidem.Option {
	return lambdaidem.WithInvocationHook(func(r *lambdaidem.InvocationReport) {
		mu.Lock()
		*hookOut = append(*hookOut, r)
		mu.Unlock()
	})
}

func TestFirstDeliveryThenDuplicate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := lambdaidem.SQS(b.store, b.counting(ok), b.opts()...)
	ctx := context.Background()

	resp, err := h(ctx, batch(msg("m1", "a"), msg("m2", "b")))
	if err != nil {
		t.Fatal(err)
	}
	wantFailed(t, resp)
	if r := b.record(t, "m1"); r.Status != lambdaidem.StatusCompleted {
		t.Fatalf("m1 status %s, want COMPLETED", r.Status)
	}
	// SQS redelivers m1 (same message ID): acknowledged, handler not called.
	resp, err = h(ctx, batch(redelivered(msg("m1", "a"), 2)))
	if err != nil {
		t.Fatal(err)
	}
	wantFailed(t, resp)
	if n := b.calls.get("m1"); n != 1 {
		t.Fatalf("handler ran %d times for m1, want 1", n)
	}
}

func TestProducerDuplicateByBusinessKeyAndConflict(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := lambdaidem.SQS(b.store, b.counting(ok), b.opts(lambdaidem.WithKeyJSONField("order.id"))...)
	ctx := context.Background()
	if _, err := h(ctx, batch(msg("m1", `{"order":{"id":"o-1"},"amount":5}`))); err != nil {
		t.Fatal(err)
	}
	// Same business key and body, new message ID: a producer duplicate.
	resp, err := h(ctx, batch(msg("m2", `{"order":{"id":"o-1"},"amount":5}`)))
	if err != nil {
		t.Fatal(err)
	}
	wantFailed(t, resp)
	if b.calls.get("m2") != 0 {
		t.Fatal("handler ran for a producer duplicate")
	}
	// Same key, different payload: a conflict, never "already done". With
	// no sink it is reported failed.
	resp, _ = h(ctx, batch(msg("m3", `{"order":{"id":"o-1"},"amount":6}`), msg("m4", `{"order":{"id":"o-2"}}`)))
	wantFailed(t, resp, "m3")
	if b.calls.get("m3") != 0 || b.calls.get("m4") != 1 {
		t.Fatalf("calls m3=%d m4=%d, want 0 and 1", b.calls.get("m3"), b.calls.get("m4"))
	}
	if r := b.record(t, "o-1"); r.MessageID != "m1" || r.Status != lambdaidem.StatusCompleted {
		t.Fatalf("the first message's record changed: %+v", r)
	}
}

// With the default message-ID key the body is not hashed (SQS never gives
// one message ID two bodies); an explicit WithPayloadHash still applies.
func TestMessageIDKeySkipsTheHashUnlessOneIsSet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hashed := 0
	countingHash := func(body []byte) (string, error) {
		hashed++
		return "len-" + strconv.Itoa(len(body)), nil
	}

	b := setup(t)
	h := lambdaidem.SQS(b.store, b.counting(ok), b.opts()...)
	if _, err := h(ctx, batch(msg("m1", "body one"))); err != nil {
		t.Fatal(err)
	}
	first := b.record(t, "m1").PayloadHash
	// A copy with another body under the same ID cannot come from SQS; if a
	// caller builds one anyway it is a duplicate, not a conflict.
	resp, _ := h(ctx, batch(msg("m1", "a different body")))
	wantFailed(t, resp)
	if r := b.record(t, "m1"); r.PayloadHash != first || b.calls.get("m1") != 1 {
		t.Fatalf("hash %q -> %q, handler calls %d; want one unchanged record, one call", first, r.PayloadHash, b.calls.get("m1"))
	}

	b = setup(t)
	h = lambdaidem.SQS(b.store, b.counting(ok), b.opts(lambdaidem.WithPayloadHash(countingHash))...)
	if _, err := h(ctx, batch(msg("m1", "body one"))); err != nil {
		t.Fatal(err)
	}
	resp, _ = h(ctx, batch(msg("m1", "a different body")))
	wantFailed(t, resp, "m1")
	if r := b.record(t, "m1"); r.PayloadHash != "len-8" || hashed != 2 || b.calls.get("m1") != 1 {
		t.Fatalf("hash %q, hashed %d times, handler calls %d; want len-8, 2, 1", r.PayloadHash, hashed, b.calls.get("m1"))
	}

	// Any other key hashes by default: WithKeyMessageID after another key
	// restores the skip, WithKeyFunc removes it.
	for _, tc := range []struct {
		opts []lambdaidem.Option
		same bool
	}{
		{[]lambdaidem.Option{lambdaidem.WithKeyJSONField("id"), lambdaidem.WithKeyMessageID()}, true},
		{[]lambdaidem.Option{lambdaidem.WithKeyFunc(func(m events.SQSMessage) (string, error) { return m.MessageId, nil })}, false},
	} {
		b = setup(t)
		h = lambdaidem.SQS(b.store, ok, b.opts(tc.opts...)...)
		for _, body := range []string{`{"id":"x"}`, `{"id":"y"}`} {
			if _, err := h(ctx, batch(msg("m-"+body[7:8], body))); err != nil {
				t.Fatal(err)
			}
		}
		if same := b.record(t, "m-x").PayloadHash == b.record(t, "m-y").PayloadHash; same != tc.same {
			t.Errorf("records of two bodies share a hash: %v, want %v", same, tc.same)
		}
	}
}

func TestMissingKeyAndMalformedBodyAreFailedNotLost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var mu sync.Mutex
	var reps []*lambdaidem.InvocationReport
	h := lambdaidem.SQS(b.store, b.counting(ok), b.opts(lambdaidem.WithKeyJSONField("id"), reportsOf(&reps, &mu))...)
	resp, _ := h(context.Background(), batch(msg("m1", `{"other":1}`), msg("m2", `not json`), msg("m3", `{"id":7}`)))
	wantFailed(t, resp, "m1", "m2")
	if !errors.Is(reps[0].Records[0].Err, lambdaidem.ErrMissingKey) || !errors.Is(reps[0].Records[1].Err, lambdaidem.ErrMalformedBody) {
		t.Fatalf("errors = %v / %v", reps[0].Records[0].Err, reps[0].Records[1].Err)
	}
	if b.calls.total() != 1 {
		t.Fatalf("handler ran %d times, want 1 (only m3)", b.calls.total())
	}
	// With a sink, a keyless message is dead-lettered with its reason.
	h = lambdaidem.SQS(b.store, ok, b.opts(lambdaidem.WithKeyJSONField("id"), lambdaidem.WithDeadLetterSink(b.sink))...)
	resp, _ = h(context.Background(), batch(msg("m5", `{"other":1}`)))
	wantFailed(t, resp)
	if got := b.sink.reasons(); len(got) != 1 || got[0] != lambdaidem.ReasonMissingKey {
		t.Fatalf("dead letters %v, want [missing_key]", got)
	}
}

func TestInProgressIsFailedAndComesBackWhenLeaseEnds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	entered, release := make(chan struct{}), make(chan struct{})
	slow := func(ctx context.Context, m events.SQSMessage) error {
		close(entered)
		<-release
		return nil
	}
	first := lambdaidem.SQS(b.store, b.counting(slow), b.opts(lambdaidem.WithLease(time.Minute))...)
	second := lambdaidem.SQS(b.store, b.counting(ok), b.opts(lambdaidem.WithLease(time.Minute))...)
	done := make(chan events.SQSEventResponse)
	go func() {
		resp, _ := first(context.Background(), batch(msg("m1", "x")))
		done <- resp
	}()
	<-entered
	// A redelivery overlapping the first attempt (visibility ran out).
	b.clock.Advance(10 * time.Second)
	resp, err := second(context.Background(), batch(redelivered(msg("m1", "x"), 2)))
	var be *lambdaidem.BatchError
	if !errors.As(err, &be) || be.Failed != 1 {
		t.Fatalf("all-failed batch returned %v, want a BatchError", err)
	}
	wantFailed(t, resp, "m1")
	d, changed := b.vis.get("m1")
	// The lease ends 50 s from now, plus 2 s grace, plus up to 1 s jitter.
	if !changed || d < 52*time.Second || d > 53*time.Second {
		t.Fatalf("visibility change %v (changed=%v), want between 52s and 53s", d, changed)
	}
	close(release)
	wantFailed(t, <-done)
	if b.calls.get("m1") != 1 {
		t.Fatalf("handler ran %d times, want 1", b.calls.get("m1"))
	}
}

func TestExpiredLeaseIsTakenOverAndStaleOwnerIsFenced(t *testing.T) {
	t.Parallel()
	b := setup(t)
	entered, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var reps []*lambdaidem.InvocationReport
	stale := lambdaidem.SQS(b.store, func(ctx context.Context, m events.SQSMessage) error {
		close(entered)
		<-release
		return nil
	}, b.opts(lambdaidem.WithLease(time.Minute), reportsOf(&reps, &mu))...)
	fresh := lambdaidem.SQS(b.store, b.counting(ok), b.opts(lambdaidem.WithLease(time.Minute), reportsOf(&reps, &mu))...)

	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = stale(context.Background(), batch(msg("m1", "x")))
	}()
	<-entered
	b.clock.Advance(2 * time.Minute) // the stale owner's lease ran out
	resp, err := fresh(context.Background(), batch(redelivered(msg("m1", "x"), 2)))
	if err != nil {
		t.Fatal(err)
	}
	wantFailed(t, resp)
	close(release)
	<-done

	mu.Lock()
	defer mu.Unlock()
	takeover, late := reps[0].Records[0], reps[1].Records[0]
	if !takeover.Takeover || takeover.Attempt != 2 || takeover.Outcome != lambdaidem.OutcomeProcessed {
		t.Fatalf("takeover report %+v", takeover)
	}
	if late.Outcome != lambdaidem.OutcomeLeaseLost || !errors.Is(late.Err, lambdaidem.ErrLeaseLost) {
		t.Fatalf("stale owner's completion: %+v, want lease_lost", late)
	}
	r := b.record(t, "m1")
	if r.Status != lambdaidem.StatusCompleted || r.Fence.Claim != 2 {
		t.Fatalf("record %+v, want COMPLETED by claim 2", r)
	}
}

func TestStoreErrorIsNeverAcknowledged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.store.SetFault(func(op string) error { return errors.New("connection refused") })
	h := lambdaidem.SQS(b.store, b.counting(ok), b.opts()...)
	resp, err := h(context.Background(), batch(msg("m1", "a"), msg("m2", "b")))
	wantFailed(t, resp, "m1", "m2")
	var be *lambdaidem.BatchError
	if !errors.As(err, &be) {
		t.Fatalf("err = %v, want BatchError", err)
	}
	if b.calls.total() != 0 {
		t.Fatal("handler ran without a lease")
	}
}

func TestParallelIdenticalRecordsRunOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var runs atomic.Int32
	h := lambdaidem.SQS(b.store, func(ctx context.Context, m events.SQSMessage) error {
		runs.Add(1)
		return nil
	}, b.opts(lambdaidem.WithKeyJSONField("id"), lambdaidem.WithConcurrency(10))...)
	var recs []events.SQSMessage
	for i := range 10 {
		recs = append(recs, msg(fmt.Sprintf("m%d", i), `{"id":"same"}`))
	}
	var wg sync.WaitGroup
	for range 4 { // four concurrent invocations of the same ten copies
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = h(context.Background(), batch(recs...)) }()
	}
	wg.Wait()
	if n := runs.Load(); n != 1 {
		t.Fatalf("handler ran %d times for one key, want 1", n)
	}
}

func TestHandlerMutationDoesNotChangeKeyHashOrDeadLetterCopy(t *testing.T) {
	t.Parallel()
	b := setup(t)
	v := "k-1"
	m := msg("m1", `{"id":"k-1"}`)
	m.MessageAttributes = map[string]events.SQSMessageAttribute{"trace": {StringValue: &v, DataType: "String"}}
	h := lambdaidem.SQS(b.store, func(ctx context.Context, m events.SQSMessage) error {
		m.Body = `{"id":"other"}`
		delete(m.MessageAttributes, "trace")
		m.Attributes["ApproximateReceiveCount"] = "99"
		return lambdaidem.Poison(errors.New("bad"))
	}, b.opts(lambdaidem.WithKeyJSONField("id"), lambdaidem.WithDeadLetterSink(b.sink))...)
	if _, err := h(context.Background(), batch(m)); err != nil {
		t.Fatal(err)
	}
	if r := b.record(t, "k-1"); r.Status != lambdaidem.StatusDeadLettered {
		t.Fatalf("record %s, want DEAD_LETTERED under the original key", r.Status)
	}
	dl := b.sink.sent[0]
	if dl.Message.Body != `{"id":"k-1"}` || dl.Message.MessageAttributes["trace"].StringValue == nil ||
		dl.Message.Attributes["ApproximateReceiveCount"] != "1" {
		t.Fatalf("dead-letter copy was changed by the handler: %+v", dl.Message)
	}
	if m.MessageAttributes["trace"].StringValue == nil {
		t.Fatal("the caller's event was changed by the handler")
	}
}

func TestCompletionThatCannotBeWrittenNeverBecomesFailed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var mu sync.Mutex
	var reps []*lambdaidem.InvocationReport
	h := lambdaidem.SQS(b.store, func(ctx context.Context, m events.SQSMessage) error {
		b.store.SetFault(func(op string) error {
			if op == memstore.OpGet {
				return nil
			}
			return errors.New("throttled")
		})
		return nil
	}, b.opts(reportsOf(&reps, &mu))...)
	resp, err := h(context.Background(), batch(msg("m1", "a")))
	if err != nil {
		t.Fatal(err)
	}
	// The effect happened: acknowledge, and leave the record IN_PROGRESS
	// for its lease to decide; never FAILED, which would invite a re-run.
	wantFailed(t, resp)
	if got := reps[0].Records[0].Outcome; got != lambdaidem.OutcomeUnrecorded {
		t.Fatalf("outcome %s, want completion_unrecorded", got)
	}
	b.store.SetFault(nil)
	if r := b.record(t, "m1"); r.Status != lambdaidem.StatusInProgress {
		t.Fatalf("status %s, want IN_PROGRESS", r.Status)
	}
}

func TestDeadlineMargin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	deadline := time.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	var handlerDeadline time.Time
	h := lambdaidem.SQS(b.store, b.counting(func(ctx context.Context, m events.SQSMessage) error {
		handlerDeadline, _ = ctx.Deadline()
		return nil
	}), b.opts(lambdaidem.WithDeadlineMargin(5*time.Second))...)
	if _, err := h(ctx, batch(msg("m1", "a"))); err != nil {
		t.Fatal(err)
	}
	if handlerDeadline.After(deadline.Add(-5 * time.Second)) {
		t.Fatalf("handler deadline %v is not 5s before the invocation's %v", handlerDeadline, deadline)
	}
	// With less than the margin left, no record is claimed.
	b.clock.Set(deadline.Add(-4 * time.Second))
	resp, _ := h(ctx, batch(msg("m2", "b")))
	wantFailed(t, resp, "m2")
	if b.calls.get("m2") != 0 {
		t.Fatal("a record was started inside the margin")
	}
	if _, err := b.store.Get(context.Background(), lambdaidem.GetRequest{Namespace: ns, Key: "m2", Now: b.clock.Now()}); !errors.Is(err, lambdaidem.ErrNotFound) {
		t.Fatalf("m2 was claimed inside the margin: %v", err)
	}
}

func TestPanicIsOneRecordsFailure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var mu sync.Mutex
	var reps []*lambdaidem.InvocationReport
	h := lambdaidem.SQS(b.store, b.counting(func(ctx context.Context, m events.SQSMessage) error {
		if m.Body == "boom" {
			panic("kaboom")
		}
		return nil
	}), b.opts(reportsOf(&reps, &mu))...)
	resp, err := h(context.Background(), batch(msg("m1", "ok"), msg("m2", "boom"), msg("m3", "ok")))
	if err != nil {
		t.Fatal(err)
	}
	wantFailed(t, resp, "m2")
	var pe *lambdaidem.PanicError
	if !errors.As(reps[0].Records[1].Err, &pe) || !strings.Contains(string(pe.Stack), "sqs_test.go") {
		t.Fatalf("panic error %v lacks the stack", reps[0].Records[1].Err)
	}
	if r := b.record(t, "m2"); r.Status != lambdaidem.StatusFailed || !strings.Contains(r.LastError, "kaboom") {
		t.Fatalf("record %+v, want FAILED with the panic", r)
	}
}

// ctxStore refuses to work with a done context, like a real SDK client.
type ctxStore struct{ lambdaidem.Store }

func (s ctxStore) Fail(ctx context.Context, r lambdaidem.FailRequest) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.Store.Fail(ctx, r)
}

func TestFailIsRecordedAfterTheInvocationContextEnds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := lambdaidem.SQS(ctxStore{b.store}, func(context.Context, events.SQSMessage) error {
		cancel() // the invocation is cut short while the handler runs
		return errors.New("downstream timeout")
	}, b.opts()...)
	resp, _ := h(ctx, batch(msg("m1", "a")))
	wantFailed(t, resp, "m1")
	if r := b.record(t, "m1"); r.Status != lambdaidem.StatusFailed {
		t.Fatalf("status %s, want FAILED recorded on a detached context", r.Status)
	}
}

func TestFIFOGroupsRunInOrderAndStopAfterAFailure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var mu sync.Mutex
	var order []string
	h := lambdaidem.SQS(b.store, b.counting(func(ctx context.Context, m events.SQSMessage) error {
		mu.Lock()
		order = append(order, m.MessageId)
		mu.Unlock()
		if m.Body == "fail" {
			return errors.New("no")
		}
		return nil
	}), b.opts()...)
	resp, err := h(context.Background(), batch(
		fifo("a1", "A", "ok"), fifo("b1", "B", "ok"), fifo("a2", "A", "fail"),
		fifo("b2", "B", "ok"), fifo("a3", "A", "ok"), fifo("b3", "B", "ok"),
	))
	if err != nil {
		t.Fatal(err)
	}
	wantFailed(t, resp, "a2", "a3")
	if b.calls.get("a3") != 0 {
		t.Fatal("a3 ran after a2 failed in its group")
	}
	var a, bs []string
	for _, id := range order {
		if id[0] == 'a' {
			a = append(a, id)
		} else {
			bs = append(bs, id)
		}
	}
	if strings.Join(a, ",") != "a1,a2" || strings.Join(bs, ",") != "b1,b2,b3" {
		t.Fatalf("group order A=%v B=%v", a, bs)
	}
}

func TestStandardQueueConcurrencyIsBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var cur, peak atomic.Int32
	gate := make(chan struct{})
	var arrived atomic.Int32
	h := lambdaidem.SQS(b.store, func(ctx context.Context, m events.SQSMessage) error {
		n := cur.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		if arrived.Add(1) == 3 {
			close(gate) // the first three run together
		}
		<-gate
		cur.Add(-1)
		return nil
	}, b.opts(lambdaidem.WithConcurrency(3))...)
	var recs []events.SQSMessage
	for i := range 10 {
		recs = append(recs, msg(fmt.Sprintf("m%d", i), "x"))
	}
	if _, err := h(context.Background(), batch(recs...)); err != nil {
		t.Fatal(err)
	}
	if p := peak.Load(); p != 3 {
		t.Fatalf("peak concurrency %d, want 3", p)
	}
}

func TestBatchErrorModes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fail := func(ctx context.Context, m events.SQSMessage) error {
		if m.Body == "bad" {
			return errors.New("no")
		}
		return nil
	}
	h := lambdaidem.SQS(b.store, fail, b.opts(lambdaidem.WithAllFailedError(false))...)
	resp, err := h(context.Background(), batch(msg("m1", "bad")))
	if err != nil {
		t.Fatalf("WithAllFailedError(false) returned %v", err)
	}
	wantFailed(t, resp, "m1")
	h = lambdaidem.SQS(b.store, fail, b.opts(lambdaidem.WithFailBatchOnAnyFailure())...)
	resp, err = h(context.Background(), batch(msg("m2", "ok"), msg("m3", "bad")))
	var be *lambdaidem.BatchError
	if !errors.As(err, &be) || be.Failed != 1 || be.Total != 2 {
		t.Fatalf("err = %v, want BatchError 1 of 2", err)
	}
	wantFailed(t, resp, "m3")
	if resp, err = h(context.Background(), batch()); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("empty batch: %v %v", resp, err)
	}
}

func TestTwoHandlersInOneProcessDoNotInterfere(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var a, c atomic.Int32
	ha := lambdaidem.SQS(b.store, func(context.Context, events.SQSMessage) error { a.Add(1); return nil },
		b.opts(lambdaidem.WithNamespace("fn-a"), lambdaidem.WithCache(10, time.Minute))...)
	hc := lambdaidem.SQS(b.store, func(context.Context, events.SQSMessage) error { c.Add(1); return nil },
		b.opts(lambdaidem.WithNamespace("fn-c"), lambdaidem.WithCache(10, time.Minute))...)
	for range 2 {
		_, _ = ha(context.Background(), batch(msg("m1", "x")))
		_, _ = hc(context.Background(), batch(msg("m1", "x")))
	}
	if a.Load() != 1 || c.Load() != 1 {
		t.Fatalf("runs a=%d c=%d, want 1 each: namespaces or caches leaked", a.Load(), c.Load())
	}
}

func TestStoreRequestsPerMessageAtTheFloor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	calls := func() int { return b.store.Stats().Total() }
	fail := func(ctx context.Context, m events.SQSMessage) error {
		if m.Body == "bad" {
			return errors.New("no")
		}
		return nil
	}
	h := lambdaidem.SQS(b.store, fail, b.opts(lambdaidem.WithCache(100, time.Minute))...)
	hNoCache := lambdaidem.SQS(b.store, fail, b.opts()...)
	ctx := context.Background()
	steps := []struct {
		name string
		run  func()
		want int
	}{
		{"first delivery", func() { _, _ = hNoCache(ctx, batch(msg("m1", "a"))) }, 2},
		{"duplicate", func() { _, _ = hNoCache(ctx, batch(msg("m1", "a"))) }, 1},
		{"duplicate that fills the cache", func() { _, _ = h(ctx, batch(msg("m1", "a"))) }, 1},
		{"cached duplicate", func() { _, _ = h(ctx, batch(msg("m1", "a"))) }, 0},
		{"handler failure", func() { _, _ = hNoCache(ctx, batch(msg("m2", "bad"))) }, 2},
	}
	for _, s := range steps {
		before := calls()
		s.run()
		if got := calls() - before; got != s.want {
			t.Errorf("%s: %d store requests, want %d", s.name, got, s.want)
		}
	}
}

func TestCopiesOfAKeyInOneBatchWaitForTheFirst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var mu sync.Mutex
	var reps []*lambdaidem.InvocationReport
	h := lambdaidem.SQS(b.store, b.counting(ok), b.opts(lambdaidem.WithKeyJSONField("id"), reportsOf(&reps, &mu))...)
	resp, err := h(context.Background(), batch(msg("m1", `{"id":"k"}`), msg("m2", `{"id":"j"}`), msg("m3", `{"id":"k"}`)))
	if err != nil {
		t.Fatal(err)
	}
	// m3 is not turned away as "in progress" while m1 runs: it waits, then
	// is skipped as a duplicate of the completed key.
	wantFailed(t, resp)
	if got := reps[0].Records[2].Outcome; got != lambdaidem.OutcomeDuplicate {
		t.Fatalf("copy's outcome %s, want duplicate", got)
	}
	if b.calls.total() != 2 {
		t.Fatalf("handler ran %d times, want 2", b.calls.total())
	}
}
