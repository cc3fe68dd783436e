package lambdaidem_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

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

func (s ctxStore) Fail(ctx context.Context, r idemstore.FailRequest) error {
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
