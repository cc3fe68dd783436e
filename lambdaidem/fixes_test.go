package lambdaidem_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/memstore"
)

// A key completed in this container is cached no longer than the store
// keeps it: once the store forgot it, a new message runs.
func TestCacheNeverOutlivesRetention(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var mu sync.Mutex
	var reps []*lambdaidem.InvocationReport
	h := lambdaidem.SQS(b.store, b.counting(ok), b.opts(lambdaidem.WithRetention(time.Minute), lambdaidem.WithCache(100, time.Hour), reportsOf(&reps, &mu))...)
	_, _ = h(context.Background(), batch(msg("m1", "a")))
	b.clock.Advance(2 * time.Minute)
	_, _ = h(context.Background(), batch(msg("m1", "a")))
	mu.Lock()
	defer mu.Unlock()
	if got := reps[1].Records[0].Outcome; got != lambdaidem.OutcomeProcessed || b.calls.get("m1") != 2 {
		t.Fatalf("outcome %s after the store forgot the key, want processed", got)
	}
}

// After the result retention, the cache must not answer where the store
// would say late replay.
func TestCacheDoesNotHideALateReplay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var mu sync.Mutex
	var reps []*lambdaidem.InvocationReport
	h := lambdaidem.SQS(b.store, ok, b.opts(lambdaidem.WithResultRetention(time.Minute), lambdaidem.WithCache(100, time.Hour), reportsOf(&reps, &mu))...)
	_, _ = h(context.Background(), batch(msg("m1", "a")))
	b.clock.Advance(2 * time.Minute)
	_, _ = h(context.Background(), batch(msg("m1", "a")))
	mu.Lock()
	defer mu.Unlock()
	if got := reps[1].Records[0].Outcome; got != lambdaidem.OutcomeLateReplay {
		t.Fatalf("outcome %s after the result retention, want late_replay", got)
	}
}

// A panicking key function fails only its own record.
func TestPanickingKeyFunctionFailsOnlyItsRecord(t *testing.T) {
	t.Parallel()
	for _, withSink := range []bool{true, false} {
		b := setup(t)
		opts := []lambdaidem.Option{lambdaidem.WithKeyFunc(func(m events.SQSMessage) (string, error) {
			if m.Body == "bad" {
				panic("malformed")
			}
			return m.Body, nil
		})}
		if withSink {
			opts = append(opts, lambdaidem.WithDeadLetterSink(b.sink))
		}
		h := lambdaidem.SQS(b.store, b.counting(ok), b.opts(opts...)...)
		resp, err := h(context.Background(), batch(msg("m1", "good"), msg("m2", "bad"), msg("m3", "fine")))
		if err != nil {
			t.Fatal(err)
		}
		if b.calls.get("m1") != 1 || b.calls.get("m3") != 1 {
			t.Fatal("batch-mates of a message whose key function panicked did not run")
		}
		if withSink {
			wantFailed(t, resp)
			if b.sink.reasons()[0] != lambdaidem.ReasonMissingKey || !strings.Contains(b.sink.sent[0].Error, "malformed") {
				t.Fatalf("dead letter %v %q, want missing_key with the panic", b.sink.reasons(), b.sink.sent[0].Error)
			}
		} else {
			wantFailed(t, resp, "m2")
		}
	}
	// The hash function too.
	b := setup(t)
	h := lambdaidem.SQS(b.store, b.counting(ok), b.opts(lambdaidem.WithPayloadHash(func(body []byte) (string, error) {
		if string(body) == "bad" {
			panic("hash")
		}
		return string(body), nil
	}))...)
	resp, _ := h(context.Background(), batch(msg("m1", "good"), msg("m2", "bad")))
	wantFailed(t, resp, "m2")
}

// Changing the contents of a message attribute in the handler does not
// change the dead-letter copy.
func TestHandlerCannotChangeTheDeadLetterCopysAttributes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := "v"
	m := msg("m1", "x")
	m.MessageAttributes = map[string]events.SQSMessageAttribute{
		"s":  {StringValue: &s, DataType: "String"},
		"b":  {BinaryValue: []byte("bin"), DataType: "Binary"},
		"sl": {StringListValues: []string{"a"}, DataType: "String"},
		"bl": {BinaryListValues: [][]byte{[]byte("x")}, DataType: "Binary"},
	}
	h := lambdaidem.SQS(b.store, func(_ context.Context, m events.SQSMessage) error {
		*m.MessageAttributes["s"].StringValue = "changed"
		m.MessageAttributes["b"].BinaryValue[0] = 'X'
		m.MessageAttributes["sl"].StringListValues[0] = "changed"
		m.MessageAttributes["bl"].BinaryListValues[0][0] = 'Y'
		return lambdaidem.Poison(errors.New("bad"))
	}, b.opts(lambdaidem.WithDeadLetterSink(b.sink))...)
	if _, err := h(context.Background(), batch(m)); err != nil {
		t.Fatal(err)
	}
	a := b.sink.sent[0].Message.MessageAttributes
	if *a["s"].StringValue != "v" || string(a["b"].BinaryValue) != "bin" || a["sl"].StringListValues[0] != "a" || string(a["bl"].BinaryListValues[0]) != "x" {
		t.Fatalf("the handler changed the dead-letter copy: %+v", a)
	}
}

// A completion write added after the handler returned is refused, not
// silently dropped.
func TestAddCompletionWriteAfterReturnIsAnError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var saved context.Context
	h := lambdaidem.SQS(b.store, func(ctx context.Context, _ events.SQSMessage) error {
		saved = ctx
		return nil
	}, b.opts()...)
	if _, err := h(context.Background(), batch(msg("m1", "x"))); err != nil {
		t.Fatal(err)
	}
	if err := lambdaidem.AddCompletionWrite(saved, "late"); !errors.Is(err, lambdaidem.ErrHandlerReturned) {
		t.Fatalf("late AddCompletionWrite: %v, want ErrHandlerReturned", err)
	}
}

// A holder that lost its lease never sends a dead-letter copy: its key was
// taken over and completed, and a copy of finished work in the DLQ would
// run again on redrive.
func TestStaleOwnerNeverDeadLetters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	entered, release := make(chan struct{}), make(chan struct{})
	opts := []lambdaidem.Option{lambdaidem.WithLease(time.Minute), lambdaidem.WithDeadLetterSink(b.sink)}
	stale := lambdaidem.SQS(b.store, func(context.Context, events.SQSMessage) error {
		close(entered)
		<-release
		return lambdaidem.Poison(errors.New("bad input"))
	}, b.opts(opts...)...)
	done := make(chan events.SQSEventResponse, 1)
	go func() { resp, _ := stale(context.Background(), batch(msg("m1", "x"))); done <- resp }()
	<-entered
	b.clock.Advance(2 * time.Minute)
	fresh := lambdaidem.SQS(b.store, ok, b.opts(opts...)...)
	wantFailed(t, mustHandle(t, fresh, context.Background(), batch(redelivered(msg("m1", "x"), 2))))
	close(release)
	wantFailed(t, <-done, "m1")
	if n := len(b.sink.reasons()); n != 0 {
		t.Fatalf("%d dead-letter copies sent by a holder that lost its lease", n)
	}
	if r := b.record(t, "m1"); r.Status != lambdaidem.StatusCompleted {
		t.Fatalf("record %s, want the new holder's COMPLETED", r.Status)
	}
}

// takeoverSink lets another holder take the key over while the copy is
// being sent.
type takeoverSink struct {
	sink
	during func()
}

func (s *takeoverSink) Send(ctx context.Context, dl lambdaidem.DeadLetter) (string, error) {
	s.during()
	return s.sink.Send(ctx, dl)
}

// A final dead-letter mark refused after the send is never acknowledged.
func TestRefusedDeadLetterMarkIsNotAcknowledged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := &takeoverSink{}
	s.during = func() {
		b.clock.Advance(2 * time.Minute)
		thief := lambdaidem.SQS(b.store, ok, b.opts(lambdaidem.WithLease(time.Minute))...)
		_, _ = thief(context.Background(), batch(redelivered(msg("m1", "x"), 2)))
	}
	h := lambdaidem.SQS(b.store, func(context.Context, events.SQSMessage) error {
		return lambdaidem.Poison(errors.New("bad input"))
	}, b.opts(lambdaidem.WithLease(time.Minute), lambdaidem.WithDeadLetterSink(s))...)
	resp, _ := h(context.Background(), batch(msg("m1", "x")))
	wantFailed(t, resp, "m1")
	if r := b.record(t, "m1"); r.Status != lambdaidem.StatusCompleted {
		t.Fatalf("record %s, want the new holder's COMPLETED", r.Status)
	}
}

// completeFaults answers Complete for one key as unavailable while on.
type completeFaults struct {
	lambdaidem.Store
	mu  sync.Mutex
	key string
	on  bool
}

func (s *completeFaults) Complete(ctx context.Context, r lambdaidem.CompleteRequest) error {
	s.mu.Lock()
	on := s.on && r.Lease.Key == s.key
	s.mu.Unlock()
	if on {
		return lambdaidem.ErrStoreUnavailable
	}
	return s.Store.Complete(ctx, r)
}

func (s *completeFaults) set(on bool) { s.mu.Lock(); s.on = on; s.mu.Unlock() }

// With WithFailBatchOnAnyFailure, a record whose handler succeeded but
// whose completion could not be written is not run again when the batch
// comes back to this container: the completion is written instead.
func TestFailBatchRetryRecordsAnUnrecordedCompletion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store := &completeFaults{Store: b.store, key: "m1", on: true}
	var mu sync.Mutex
	var reps []*lambdaidem.InvocationReport
	h := lambdaidem.SQS(store, b.counting(func(_ context.Context, m events.SQSMessage) error {
		if m.MessageId == "m2" {
			return errors.New("downstream down")
		}
		return nil
	}), b.opts(lambdaidem.WithFailBatchOnAnyFailure(), lambdaidem.WithLease(time.Minute), reportsOf(&reps, &mu))...)
	ev := batch(msg("m1", "a"), msg("m2", "b"))
	if _, err := h(context.Background(), ev); err == nil {
		t.Fatal("want the batch failed")
	}
	store.set(false)
	// Lambda retries the whole batch once the lease and grace are over.
	b.clock.Advance(2 * time.Minute)
	_, _ = h(context.Background(), batch(redelivered(msg("m1", "a"), 2), redelivered(msg("m2", "b"), 2)))
	if n := b.calls.get("m1"); n != 1 {
		t.Fatalf("m1's handler ran %d times, want 1: the retry re-ran a record whose effect happened", n)
	}
	if r := b.record(t, "m1"); r.Status != lambdaidem.StatusCompleted || r.Attempts != 1 {
		t.Fatalf("m1 record %s after %d attempts, want COMPLETED after 1", r.Status, r.Attempts)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := reps[1].Records[0].Outcome; got != lambdaidem.OutcomeDuplicate {
		t.Fatalf("m1 outcome on the retry %s, want duplicate", got)
	}
}

// lateStore holds its first completion in the network, answering it as
// unavailable, and refuses the retry for what it carries (the effect's own
// condition); land delivers the held completion afterwards, as a request
// that outlived its client's timeout does.
type lateStore struct {
	*memstore.Store
	// refusal answers the second try; nil means the debit's condition
	// failed (ErrWriteRefused). Later tries reach the store.
	refusal error
	mu      sync.Mutex
	tries   int
	held    *lambdaidem.CompleteRequest
}

func (s *lateStore) Complete(ctx context.Context, req lambdaidem.CompleteRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.tries++; s.tries {
	case 1:
		req.Writes = nil // committed with the completion, when it lands
		s.held = &req
		return fmt.Errorf("late: request timed out: %w", lambdaidem.ErrStoreUnavailable)
	case 2:
		if s.refusal != nil {
			return s.refusal
		}
		return fmt.Errorf("late: the debit's condition failed: %w", lambdaidem.ErrWriteRefused)
	}
	return s.Store.Complete(ctx, req)
}

func (s *lateStore) land(ctx context.Context) error {
	s.mu.Lock()
	req := *s.held
	s.mu.Unlock()
	return s.Store.Complete(ctx, req)
}

// A completion refused after an earlier try timed out is not known to have
// failed: the earlier try may still land. The record is kept (not
// dead-lettered, not failed, not acknowledged), and once the late try has
// landed the redelivery finds it completed.
func TestRefusalAfterATimedOutCompletionIsNotFinal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store := &lateStore{Store: b.store}
	var mu sync.Mutex
	var reps []*lambdaidem.InvocationReport
	h := lambdaidem.SQS(store, b.counting(func(ctx context.Context, _ events.SQSMessage) error {
		return lambdaidem.AddCompletionWrite(ctx, "debit")
	}), b.opts(lambdaidem.WithMaxAttempts(1), lambdaidem.WithDeadLetterSink(b.sink), lambdaidem.WithLease(time.Minute), reportsOf(&reps, &mu))...)
	resp, _ := h(context.Background(), batch(msg("m1", "x"))) // all failed: a BatchError
	wantFailed(t, resp, "m1")
	mu.Lock()
	got := reps[0].Records[0]
	mu.Unlock()
	if got.Outcome != lambdaidem.OutcomeStoreError || !errors.Is(got.Err, lambdaidem.ErrStoreUnavailable) || errors.Is(got.Err, lambdaidem.ErrWriteRefused) {
		t.Fatalf("outcome %s (%v), want store_error, unavailable and not refused", got.Outcome, got.Err)
	}
	if n := len(b.sink.reasons()); n != 0 {
		t.Fatalf("%d dead-letter copies of work whose completion may still land", n)
	}
	if r := b.record(t, "m1"); r.Status != lambdaidem.StatusInProgress {
		t.Fatalf("record %s, want IN_PROGRESS until the lease decides", r.Status)
	}
	if err := store.land(context.Background()); err != nil {
		t.Fatalf("the held completion did not land: %v", err)
	}
	b.clock.Advance(2 * time.Minute)
	wantFailed(t, mustHandle(t, h, context.Background(), batch(redelivered(msg("m1", "x"), 2))))
	if n := b.calls.get("m1"); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
	if n := len(b.sink.reasons()); n != 0 {
		t.Fatalf("%d dead-letter copies of completed work", n)
	}
}

// Wrap next door: the caller is told the outcome is unknown, never that
// the writes were refused, and the failure mark it writes fences the late
// try: it can no longer land.
func TestWrapRefusalAfterATimedOutCompletionIsNotFinal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store := &lateStore{Store: b.store}
	f := lambdaidem.Wrap(store, func(ctx context.Context, o order) (int, error) {
		return 1, lambdaidem.AddCompletionWrite(ctx, "debit")
	}, b.opts(lambdaidem.WithKeyJSONField("id"))...)
	_, err := f(context.Background(), order{ID: "o1"})
	if !errors.Is(err, lambdaidem.ErrWritesNotCommitted) || !errors.Is(err, lambdaidem.ErrStoreUnavailable) || errors.Is(err, lambdaidem.ErrWriteRefused) {
		t.Fatalf("err = %v; want ErrWritesNotCommitted, unavailable, not refused", err)
	}
	if err := store.land(context.Background()); !errors.Is(err, lambdaidem.ErrLeaseLost) {
		t.Fatalf("late completion: %v, want it fenced off (ErrLeaseLost)", err)
	}
	if r := b.record(t, "o1"); r.Status != lambdaidem.StatusFailed {
		t.Fatalf("record %s, want FAILED (the fence)", r.Status)
	}
}

// A refusal that the earlier try could never have escaped either (a
// result too large for the store) stands after a timed-out try: Wrap
// completes the key without the result, as it does without the timeout.
func TestWrapTooLargeAfterATimedOutCompletionStands(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store := &lateStore{Store: b.store, refusal: fmt.Errorf("late: %w", lambdaidem.ErrResultTooLarge)}
	f := lambdaidem.Wrap(store, func(ctx context.Context, o order) (int, error) { return 7, nil },
		b.opts(lambdaidem.WithKeyJSONField("id"))...)
	if out, err := f(context.Background(), order{ID: "o1"}); err != nil || out != 7 {
		t.Fatalf("call: %d, %v; want 7 and no error", out, err)
	}
	if r := b.record(t, "o1"); r.Status != lambdaidem.StatusCompleted {
		t.Fatalf("record %s, want COMPLETED without its result", r.Status)
	}
}
