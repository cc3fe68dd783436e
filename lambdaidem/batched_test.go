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
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
)

// A batch of ten new messages costs two claim requests and two completion
// requests with batched writes (two lanes of five), where it costs ten of
// each without.
func TestBatchedWritesClaimAndCompleteInOneRequestEach(t *testing.T) {
	t.Parallel()
	for _, batched := range []bool{false, true} {
		t.Run(fmt.Sprint("batched=", batched), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			opts := []lambdaidem.Option{lambdaidem.WithKeyJSONField("id")}
			if batched {
				opts = append(opts, lambdaidem.WithBatchedWrites())
			}
			h := lambdaidem.SQS(b.store, b.counting(ok), b.opts(opts...)...)
			var recs []events.SQSMessage
			for i := range 10 {
				recs = append(recs, msg(fmt.Sprintf("m%d", i), fmt.Sprintf(`{"id":"k%d"}`, i)))
			}
			wantFailed(t, mustHandle(t, h, context.Background(), batch(recs...)))
			st := b.store.Stats()
			want := memstore.Stats{Claim: 10, Complete: 10}
			if batched {
				want = memstore.Stats{ClaimBatch: 2, CompleteBatch: 2}
			}
			if st != want {
				t.Fatalf("store calls %+v, want %+v", st, want)
			}
			if b.calls.total() != 10 {
				t.Fatalf("handler ran %d times, want 10", b.calls.total())
			}
			for i := range 10 {
				if s := b.status(fmt.Sprintf("k%d", i)); s != lambdaidem.StatusCompleted {
					t.Fatalf("k%d is %s, want COMPLETED", i, s)
				}
			}
		})
	}
}

// Batching changes the number of requests, never an outcome: a batch
// holding every kind of record gets the same report, record by record,
// with and without it, on a standard queue and a FIFO queue.
func TestBatchedWritesKeepEveryOutcome(t *testing.T) {
	t.Parallel()
	handler := func(_ context.Context, m events.SQSMessage) error {
		switch {
		case strings.Contains(m.Body, `"fail"`):
			return errors.New("downstream says no")
		case strings.Contains(m.Body, `"poison"`):
			return lambdaidem.Poison(errors.New("bad data"))
		case strings.Contains(m.Body, `"panic"`):
			panic("handler bug")
		}
		return nil
	}
	standard := []events.SQSMessage{
		msg("a", `{"id":"a"}`),
		msg("b", `{"id":"b","do":"fail"}`),
		msg("c", `{"id":"c","do":"poison"}`),
		msg("d", `{"id":"d","do":"panic"}`),
		msg("e", `{"id":"done"}`),        // completed by an earlier invocation
		msg("f", `{"id":"a"}`),           // a copy of a, in the same batch
		msg("g", `{"id":"a","v":2}`),     // a's key with another payload
		msg("h", `not json`),             // no key
		msg("i", `{"id":"failed-once"}`), // failed before: claimed again
		msg("j", `{"id":"j"}`),
	}
	fifoBatch := []events.SQSMessage{
		fifo("a", "g1", `{"id":"a"}`),
		fifo("b", "g1", `{"id":"b"}`),
		fifo("c", "g2", `{"id":"c","do":"fail"}`),
		fifo("d", "g2", `{"id":"d"}`), // after a failure: skipped
		fifo("e", "g3", `{"id":"e","do":"poison"}`),
		fifo("f", "g3", `{"id":"f"}`), // after a dead-lettered record: runs
		fifo("g", "g4", `{"id":"done"}`),
		fifo("h", "g5", `{"id":"h"}`),
	}
	for name, recs := range map[string][]events.SQSMessage{"standard": standard, "fifo": fifoBatch} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var reports [2][]lambdaidem.RecordReport
			var resps [2]events.SQSEventResponse
			for n, batched := range []bool{false, true} {
				b := setup(t)
				var mu sync.Mutex
				var reps []*lambdaidem.InvocationReport
				opts := []lambdaidem.Option{lambdaidem.WithKeyJSONField("id"), lambdaidem.WithDeadLetterSink(b.sink), lambdaidem.WithMaxAttempts(3)}
				plain := lambdaidem.SQS(b.store, handler, b.opts(opts...)...)
				// What earlier invocations left: a completed key and a
				// key whose first attempt failed.
				earlier := []events.SQSMessage{msg("x", `{"id":"done"}`), msg("y", `{"id":"failed-once","do":"fail"}`)}
				if name == "fifo" {
					earlier = earlier[:1]
				}
				for _, m := range earlier {
					_, _ = plain(context.Background(), batch(m)) // y fails, as meant
				}
				if batched {
					opts = append(opts, lambdaidem.WithBatchedWrites())
				}
				opts = append(opts, reportsOf(&reps, &mu))
				h := lambdaidem.SQS(b.store, handler, b.opts(opts...)...)
				resps[n] = mustHandle(t, h, context.Background(), batch(recs...))
				reports[n] = reps[0].Records
			}
			if a, b := failedIDs(resps[0]), failedIDs(resps[1]); strings.Join(a, ",") != strings.Join(b, ",") {
				t.Fatalf("failed records %v without batching, %v with it", a, b)
			}
			for i := range recs {
				one, bat := reports[0][i], reports[1][i]
				if one.Outcome != bat.Outcome || one.Acked != bat.Acked || one.Attempt != bat.Attempt || one.HandlerRan != bat.HandlerRan {
					t.Errorf("record %s: %s (acked %v, attempt %d, ran %v) without batching, %s (acked %v, attempt %d, ran %v) with it",
						recs[i].MessageId, one.Outcome, one.Acked, one.Attempt, one.HandlerRan, bat.Outcome, bat.Acked, bat.Attempt, bat.HandlerRan)
				}
			}
		})
	}
}

// A batched completion the store could not answer is retried alone, as a
// single completion would have been: nothing is acknowledged unrecorded.
func TestBatchedCompletionUnansweredIsRetriedAlone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	st := b.store
	var once sync.Once
	st.SetFault(func(op string) error {
		var err error
		if op == memstore.OpCompleteBatch {
			once.Do(func() { err = errors.New("connection reset") })
		}
		return err
	})
	var mu sync.Mutex
	var reps []*lambdaidem.InvocationReport
	h := lambdaidem.SQS(b.store, ok, b.opts(lambdaidem.WithKeyJSONField("id"), lambdaidem.WithBatchedWrites(), reportsOf(&reps, &mu))...)
	wantFailed(t, mustHandle(t, h, context.Background(), batch(msg("a", `{"id":"a"}`), msg("b", `{"id":"b"}`), msg("c", `{"id":"c"}`))))
	if got := st.Stats(); got.CompleteBatch != 1 || got.Complete != 3 {
		t.Fatalf("store calls %+v, want one batched completion and three single ones", got)
	}
	for _, r := range reps[0].Records {
		if r.Outcome != lambdaidem.OutcomeProcessed || r.StoreErrors != 1 {
			t.Fatalf("record %s: %s with %d store errors, want processed after 1", r.MessageID, r.Outcome, r.StoreErrors)
		}
	}
	for _, k := range []string{"a", "b", "c"} {
		if s := b.status(k); s != lambdaidem.StatusCompleted {
			t.Fatalf("%s is %s, want COMPLETED", k, s)
		}
	}
}

// plainStore is a Store and nothing more: no Batcher.
type plainStore struct{ lambdaidem.Store }

func TestBatchedWritesRefusedWhenBuilt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cases := []struct {
		name  string
		build func()
		want  []error
	}{
		{"store without Batcher", func() {
			lambdaidem.SQS(plainStore{memstore.New()}, ok, b.opts(lambdaidem.WithBatchedWrites())...)
		}, []error{lambdaidem.ErrBatchUnsupported, lambdaidem.ErrUnsupportedOption}},
		{"heartbeat", func() {
			lambdaidem.SQS(b.store, ok, b.opts(lambdaidem.WithBatchedWrites(), lambdaidem.WithLease(time.Minute), lambdaidem.WithHeartbeat(10*time.Second))...)
		}, []error{lambdaidem.ErrInvalidOption}},
		{"optimistic", func() {
			lambdaidem.SQS(b.store, ok, b.opts(lambdaidem.WithBatchedWrites(), lambdaidem.WithOptimisticCommit())...)
		}, []error{lambdaidem.ErrInvalidOption}},
		{"Wrap", func() {
			lambdaidem.Wrap(b.store, func(context.Context, string) (string, error) { return "", nil }, b.wrapOpts(lambdaidem.WithBatchedWrites())...)
		}, []error{lambdaidem.ErrUnsupportedOption}},
	}
	for _, c := range cases {
		err := lambdaidem.Check(c.build)
		var ce *lambdaidem.ConfigError
		if !errors.As(err, &ce) {
			t.Fatalf("%s: built, or failed with %v; want a *ConfigError", c.name, err)
		}
		for _, w := range c.want {
			if !errors.Is(err, w) {
				t.Errorf("%s: %v does not wrap %v", c.name, err, w)
			}
		}
		if !strings.Contains(ce.Option, "WithBatchedWrites") {
			t.Errorf("%s: the error names %q, not WithBatchedWrites", c.name, ce.Option)
		}
	}
}

// opLog is the in-memory store with every write it is sent noted in order.
type opLog struct {
	*memstore.Store
	mu  sync.Mutex
	ops []string
}

func (l *opLog) note(op string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ops = append(l.ops, op)
}

func (l *opLog) index(op string) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var at []int
	for i, o := range l.ops {
		if o == op {
			at = append(at, i)
		}
	}
	return at
}

func (l *opLog) Complete(ctx context.Context, req idemstore.CompleteRequest) error {
	l.note("complete")
	return l.Store.Complete(ctx, req)
}

func (l *opLog) CompleteBatch(ctx context.Context, reqs []idemstore.CompleteRequest) []error {
	l.note("complete")
	return l.Store.CompleteBatch(ctx, reqs)
}

func (l *opLog) Fail(ctx context.Context, req idemstore.FailRequest) error {
	l.note("fail")
	return l.Store.Fail(ctx, req)
}

func (l *opLog) DeadLetter(ctx context.Context, req idemstore.DeadLetterRequest) error {
	l.note("dead-letter")
	return l.Store.DeadLetter(ctx, req)
}

// A lane's successes are completed before its failures are recorded: a
// handler that honours its context returns a margin before the deadline,
// room for the completion it waits for, not for a batch-mate's failure
// first (a dead-lettering is three writes and a send). Before, a slow
// batch-mate failing at its deadline made the successes' completions
// miss the deadline: the records were taken over later, their attempts
// spent (the simulation found it: a message that never failed
// dead-lettered as max_attempts, in a world without faults).
func TestBatchedWritesCompleteBeforeRecordingFailures(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store := &opLog{Store: b.store}
	handler := func(_ context.Context, m events.SQSMessage) error {
		switch {
		case strings.Contains(m.Body, `"fail"`):
			return errors.New("downstream says no")
		case strings.Contains(m.Body, `"poison"`):
			return lambdaidem.Poison(errors.New("bad data"))
		}
		return nil
	}
	h := lambdaidem.SQS(store, handler, b.opts(lambdaidem.WithKeyJSONField("id"), lambdaidem.WithBatchedWrites(),
		lambdaidem.WithConcurrency(3), lambdaidem.WithDeadLetterSink(b.sink))...)
	resp := mustHandle(t, h, context.Background(), batch(
		msg("a", `{"id":"a"}`), msg("b", `{"id":"b","do":"fail"}`), msg("c", `{"id":"c","do":"poison"}`)))
	wantFailed(t, resp, "b")
	completes, fails, marks := store.index("complete"), store.index("fail"), store.index("dead-letter")
	if len(completes) != 1 || len(fails) != 1 || len(marks) != 2 {
		t.Fatalf("writes %v: want one completion, one failure, two dead-letter marks", store.ops)
	}
	if first := min(fails[0], marks[0]); completes[0] > first {
		t.Fatalf("writes %v: the completion of a was sent after a failure of its lane was recorded", store.ops)
	}
	for key, want := range map[string]lambdaidem.Status{"a": lambdaidem.StatusCompleted, "b": lambdaidem.StatusFailed, "c": lambdaidem.StatusDeadLettered} {
		if got := b.status(key); got != want {
			t.Errorf("%s is %s, want %s", key, got, want)
		}
	}
}
