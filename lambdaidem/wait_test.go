package lambdaidem_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
)

// The tests of WithWaitForCompletion run on every store: the in-memory
// one, DynamoDB Local and redis-server (under make test). Each holds the
// first run on a channel, lets the waiter start reading the record, and
// holds that read (watchedStore's gate) until the first run has ended, so
// what the waiter reads is decided by the test, never by timing.

type payment struct {
	Key    string `json:"key"`
	Amount int    `json:"amount"`
}

// waitStores makes a fresh store of each kind for one test.
var waitStores = []struct {
	name string
	new  func(t *testing.T) lambdaidem.Store
}{
	{"memory", func(*testing.T) lambdaidem.Store { return memstore.New() }},
	{"dynamodb", func(t *testing.T) lambdaidem.Store {
		client := testenv.DynamoDB(t, dynamo.ClientOptions(dynamo.Tuning{AttemptTimeout: 5 * time.Second, MaxBackoff: 20 * time.Millisecond}))
		table := testenv.Name("wait")
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		// TTL off: DynamoDB Local would delete records the fake clock
		// still needs.
		if err := dynamo.CreateTable(ctx, client, table, dynamo.TableOptions{NoTTL: true, PollInterval: 20 * time.Millisecond}); err != nil {
			t.Fatalf("create table: %v", err)
		}
		t.Cleanup(func() {
			_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
		})
		return dynamo.New(client, table)
	}},
	{"redis", func(t *testing.T) lambdaidem.Store {
		client := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
		prefix := testenv.Name("wait")
		t.Cleanup(func() {
			ctx := context.Background()
			iter := client.Scan(ctx, 0, prefix+":*", 1000).Iterator()
			for iter.Next(ctx) {
				_ = client.Unlink(ctx, iter.Val()).Err()
			}
			_ = client.Close()
		})
		store := redisstore.New(client, prefix)
		if err := store.LoadScripts(t.Context()); err != nil {
			t.Fatal(err)
		}
		return store
	}},
}

// onEveryStore runs test once per store, in parallel subtests.
func onEveryStore(t *testing.T, test func(t *testing.T, f *waitFix)) {
	t.Helper()
	t.Parallel()
	for _, s := range waitStores {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			raw := s.new(t)
			f := &waitFix{t: t, raw: raw, clock: newClock(), ns: testenv.Name("wait"),
				store: &watchedStore{Store: raw, calls: map[string]int{}, reading: make(chan struct{}, 1000), gate: make(chan struct{})}}
			test(t, f)
		})
	}
}

// waitFix is one test's world: the store, a watched view of it for the
// waiter, a fake clock for lease decisions.
type waitFix struct {
	t     *testing.T
	raw   lambdaidem.Store
	store *watchedStore
	clock *clock
	ns    string
}

func (f *waitFix) opts(more ...lambdaidem.Option) []lambdaidem.Option {
	return append([]lambdaidem.Option{
		lambdaidem.WithNamespace(f.ns),
		lambdaidem.WithKeyJSONField("key"),
		lambdaidem.WithClock(f.clock),
		lambdaidem.WithLease(time.Minute),
		lambdaidem.WithLogger(slog.New(slog.DiscardHandler)),
	}, more...)
}

// watchedStore counts the waiter's requests, says when a read starts, and
// holds every read until the test opens the gate (a value or its close).
type watchedStore struct {
	lambdaidem.Store
	mu      sync.Mutex
	calls   map[string]int
	reading chan struct{}
	gate    chan struct{}
}

func (s *watchedStore) count(op string) {
	s.mu.Lock()
	s.calls[op]++
	s.mu.Unlock()
}

func (s *watchedStore) counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.calls {
		out[k] = v
	}
	return out
}

func (s *watchedStore) Get(ctx context.Context, req idemstore.GetRequest) (idemstore.Record, error) {
	s.count("get")
	s.reading <- struct{}{}
	select {
	case <-s.gate:
	case <-ctx.Done():
	}
	return s.Store.Get(ctx, req)
}

func (s *watchedStore) Claim(ctx context.Context, req idemstore.ClaimRequest) (idemstore.ClaimResult, error) {
	s.count("claim")
	return s.Store.Claim(ctx, req)
}

func (s *watchedStore) Complete(ctx context.Context, req idemstore.CompleteRequest) error {
	s.count("complete")
	return s.Store.Complete(ctx, req)
}

func (s *watchedStore) Fail(ctx context.Context, req idemstore.FailRequest) error {
	s.count("fail")
	return s.Store.Fail(ctx, req)
}

func (s *watchedStore) DeadLetter(ctx context.Context, req idemstore.DeadLetterRequest) error {
	s.count("dead-letter")
	return s.Store.DeadLetter(ctx, req)
}

// regate closes the gate again for the next waiter.
func (f *waitFix) regate() {
	for len(f.store.reading) > 0 {
		<-f.store.reading
	}
	f.store.gate = make(chan struct{})
}

// reads waits for the waiter's next read of the record to start.
func (f *waitFix) reads() {
	f.t.Helper()
	select {
	case <-f.store.reading:
	case <-time.After(30 * time.Second):
		f.t.Fatal("the waiter never read the record")
	}
}

// answer is what a call returned, or what the test tells a held first
// run to do.
type answer struct {
	out    receipt
	err    error
	panics bool
}

// first starts a call on the raw store whose function signals when it
// runs and then returns what release sends it.
func (f *waitFix) first(in payment, opts ...lambdaidem.Option) (release chan<- answer, done <-chan answer) {
	f.t.Helper()
	started, rel, out := make(chan struct{}), make(chan answer), make(chan answer, 1)
	call := lambdaidem.Wrap(f.raw, func(ctx context.Context, p payment) (receipt, error) {
		close(started)
		a := <-rel
		if a.panics {
			panic("the payment provider's SDK")
		}
		return a.out, a.err
	}, f.opts(opts...)...)
	go func() {
		r, err := call(context.Background(), in)
		out <- answer{out: r, err: err}
	}()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		f.t.Fatal("the first run never started")
	}
	return rel, out
}

// waiter starts a call through the watched store with
// WithWaitForCompletion; ran counts the runs of its own function.
func (f *waitFix) waiter(ctx context.Context, in payment, limit time.Duration, opts ...lambdaidem.Option) (done <-chan answer, ran *int) {
	out := make(chan answer, 1)
	var mu sync.Mutex
	runs := new(int)
	call := lambdaidem.Wrap(f.store, func(ctx context.Context, p payment) (receipt, error) {
		mu.Lock()
		*runs++
		mu.Unlock()
		return receipt{Charge: "by the waiter"}, nil
	}, f.opts(append(opts, lambdaidem.WithWaitForCompletion(limit))...)...)
	go func() {
		r, err := call(ctx, in)
		out <- answer{out: r, err: err}
	}()
	return out, runs
}

func got(t *testing.T, ch <-chan answer, who string) answer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(60 * time.Second):
		t.Fatalf("%s never returned", who)
		return answer{}
	}
}

var p1 = payment{Key: "pay-1", Amount: 100}

// The waiter gets the stored result of the run it waited for, without
// running its function and without writing; it costs its claim and its
// reads of the record.
func TestWaitReturnsTheStoredResult(t *testing.T) {
	onEveryStore(t, func(t *testing.T, f *waitFix) {
		release, first := f.first(p1)
		done, ran := f.waiter(context.Background(), p1, time.Minute)
		f.reads()
		release <- answer{out: receipt{Charge: "ch_1"}}
		if a := got(t, first, "the first call"); a.err != nil || a.out.Charge != "ch_1" {
			t.Fatalf("first call: %+v", a)
		}
		close(f.store.gate)
		a := got(t, done, "the waiter")
		if a.err != nil || a.out.Charge != "ch_1" {
			t.Fatalf("waiter: %+v, want the stored result ch_1", a)
		}
		if *ran != 0 {
			t.Fatalf("the waiter ran its function %d times", *ran)
		}
		c := f.store.counts()
		if c["claim"] != 1 || c["get"] < 1 || c["complete"]+c["fail"]+c["dead-letter"] != 0 {
			t.Fatalf("the waiter's requests: %v, want one claim, reads, no writes", c)
		}
	})
}

// The waiter gets the first run's failure as the store recorded it; the
// key stays retryable.
func TestWaitReturnsTheFirstRunsFailure(t *testing.T) {
	onEveryStore(t, func(t *testing.T, f *waitFix) {
		release, first := f.first(p1)
		done, ran := f.waiter(context.Background(), p1, time.Minute)
		f.reads()
		release <- answer{err: errors.New("card declined")}
		if a := got(t, first, "the first call"); a.err == nil || a.err.Error() != "card declined" {
			t.Fatalf("first call: %+v", a)
		}
		close(f.store.gate)
		a := got(t, done, "the waiter")
		var rf *lambdaidem.RunFailedError
		if !errors.As(a.err, &rf) || !errors.Is(a.err, lambdaidem.ErrRunFailed) || rf.Message != "card declined" || rf.Attempt != 1 {
			t.Fatalf("waiter: %+v, want a RunFailedError of attempt 1 saying card declined", a.err)
		}
		if *ran != 0 {
			t.Fatalf("the waiter ran its function %d times", *ran)
		}
		// The next call runs again, as after any failure.
		retry := lambdaidem.Wrap(f.raw, func(ctx context.Context, p payment) (receipt, error) {
			l, _ := lambdaidem.LeaseFromContext(ctx)
			if l.Attempt != 2 {
				t.Errorf("retry's attempt %d, want 2", l.Attempt)
			}
			return receipt{Charge: "ch_2"}, nil
		}, f.opts()...)
		if out, err := retry(context.Background(), p1); err != nil || out.Charge != "ch_2" {
			t.Fatalf("retry: %+v %v", out, err)
		}
	})
}

// In at-most-once mode a first run that panics is dead-lettered as outcome
// unknown; its waiter gets ErrOutcomeUnknown and never runs.
func TestWaitReturnsTheDeadLetter(t *testing.T) {
	onEveryStore(t, func(t *testing.T, f *waitFix) {
		release, first := f.first(p1, lambdaidem.WithAtMostOnce())
		done, ran := f.waiter(context.Background(), p1, time.Minute, lambdaidem.WithAtMostOnce())
		f.reads()
		release <- answer{panics: true}
		if a := got(t, first, "the first call"); !errors.Is(a.err, lambdaidem.ErrOutcomeUnknown) {
			t.Fatalf("first call: %v, want ErrOutcomeUnknown", a.err)
		}
		close(f.store.gate)
		a := got(t, done, "the waiter")
		if !errors.Is(a.err, lambdaidem.ErrOutcomeUnknown) || !errors.Is(a.err, lambdaidem.ErrDeadLettered) {
			t.Fatalf("waiter: %v, want ErrOutcomeUnknown", a.err)
		}
		if *ran != 0 {
			t.Fatalf("the waiter ran its function %d times", *ran)
		}
	})
}

// A first run whose lease ran out without an outcome is taken over by its
// waiter, which runs the function itself, as a repeat after the lease
// would; the stale first run cannot complete the key afterwards.
func TestWaitTakesOverAnAbandonedLease(t *testing.T) {
	onEveryStore(t, func(t *testing.T, f *waitFix) {
		release, first := f.first(p1)
		done, ran := f.waiter(context.Background(), p1, time.Hour)
		f.reads()
		f.clock.Advance(time.Minute + lambdaidem.DefaultGrace + time.Second)
		close(f.store.gate)
		a := got(t, done, "the waiter")
		if a.err != nil || a.out.Charge != "by the waiter" || *ran != 1 {
			t.Fatalf("waiter: %+v after %d runs, want its own run's result", a, *ran)
		}
		rec, err := f.raw.Get(t.Context(), idemstore.GetRequest{Namespace: f.ns, Key: "pay-1", Now: f.clock.Now()})
		if err != nil || rec.Status != lambdaidem.StatusCompleted || rec.Attempts != 2 || rec.Takeovers != 1 {
			t.Fatalf("record: %+v %v, want COMPLETED by the second attempt, a takeover", rec, err)
		}
		release <- answer{out: receipt{Charge: "stale"}}
		got(t, first, "the first call")
		rec, err = f.raw.Get(t.Context(), idemstore.GetRequest{Namespace: f.ns, Key: "pay-1", Now: f.clock.Now()})
		if err != nil || !strings.Contains(string(rec.Result), "by the waiter") {
			t.Fatalf("record after the stale run: %s %v", rec.Result, err)
		}
	})
}

// In at-most-once mode the waiter never takes an abandoned lease over: it
// marks the key outcome unknown.
func TestWaitAtMostOnceAbandonedLease(t *testing.T) {
	onEveryStore(t, func(t *testing.T, f *waitFix) {
		release, first := f.first(p1, lambdaidem.WithAtMostOnce())
		defer func() { release <- answer{}; got(t, first, "the first call") }()
		done, ran := f.waiter(context.Background(), p1, time.Hour, lambdaidem.WithAtMostOnce())
		f.reads()
		f.clock.Advance(time.Minute + lambdaidem.DefaultGrace + time.Second)
		close(f.store.gate)
		a := got(t, done, "the waiter")
		if !errors.Is(a.err, lambdaidem.ErrOutcomeUnknown) || *ran != 0 {
			t.Fatalf("waiter: %v after %d runs, want ErrOutcomeUnknown and no run", a.err, *ran)
		}
	})
}

// A record that disappears while the waiter waits (an operator forgot it)
// is claimed by the waiter, which runs; a record reused by another payload
// meanwhile is a key conflict.
func TestWaitRecordGoneOrReused(t *testing.T) {
	onEveryStore(t, func(t *testing.T, f *waitFix) {
		release, first := f.first(p1)
		defer func() { release <- answer{}; got(t, first, "the first call") }()
		done, ran := f.waiter(context.Background(), p1, time.Hour)
		f.reads()
		if err := f.raw.Delete(t.Context(), idemstore.DeleteRequest{Namespace: f.ns, Key: "pay-1"}); err != nil {
			t.Fatal(err)
		}
		close(f.store.gate)
		if a := got(t, done, "the waiter"); a.err != nil || a.out.Charge != "by the waiter" || *ran != 1 {
			t.Fatalf("waiter on a forgotten key: %+v after %d runs, want its own run", a, *ran)
		}

		const key = "pay-2"
		release2, first2 := f.first(payment{Key: key, Amount: 1})
		f.regate()
		done, ran = f.waiter(context.Background(), payment{Key: key, Amount: 1}, time.Hour)
		f.reads()
		if err := f.raw.Delete(t.Context(), idemstore.DeleteRequest{Namespace: f.ns, Key: key}); err != nil {
			t.Fatal(err)
		}
		other := lambdaidem.Wrap(f.raw, func(context.Context, payment) (receipt, error) { return receipt{Charge: "other"}, nil }, f.opts()...)
		if _, err := other(t.Context(), payment{Key: key, Amount: 2}); err != nil {
			t.Fatal(err)
		}
		close(f.store.gate)
		if a := got(t, done, "the waiter"); !errors.Is(a.err, lambdaidem.ErrKeyConflict) || *ran != 0 {
			t.Fatalf("waiter on a reused key: %+v after %d runs, want ErrKeyConflict", a, *ran)
		}
		release2 <- answer{}
		got(t, first2, "the first call")
	})
}

// A call with another payload than the run in progress does not wait.
func TestWaitNotForAnotherPayload(t *testing.T) {
	onEveryStore(t, func(t *testing.T, f *waitFix) {
		release, first := f.first(p1)
		defer func() { release <- answer{}; got(t, first, "the first call") }()
		done, _ := f.waiter(context.Background(), payment{Key: p1.Key, Amount: 7}, time.Hour)
		if a := got(t, done, "the waiter"); !errors.Is(a.err, lambdaidem.ErrKeyConflict) {
			t.Fatalf("another payload: %v, want ErrKeyConflict", a.err)
		}
		if c := f.store.counts(); c["get"] != 0 || c["claim"] != 1 {
			t.Fatalf("requests %v: a conflict costs one claim and no wait", c)
		}
	})
}

// A run that completes while its result retention ends before the waiter
// reads it is a late replay; a result that could not be stored is
// ErrResultNotStored. Neither runs the function again.
func TestWaitLateReplayAndResultNotStored(t *testing.T) {
	onEveryStore(t, func(t *testing.T, f *waitFix) {
		opts := []lambdaidem.Option{lambdaidem.WithResultRetention(time.Minute), lambdaidem.WithMaxResultBytes(64)}
		release, first := f.first(p1, opts...)
		done, ran := f.waiter(context.Background(), p1, time.Hour, opts...)
		f.reads()
		release <- answer{out: receipt{Charge: "ch_1"}}
		got(t, first, "the first call")
		f.clock.Advance(2 * time.Minute) // the result's retention ends before the waiter reads it
		close(f.store.gate)
		if a := got(t, done, "the waiter"); !errors.Is(a.err, lambdaidem.ErrLateReplay) || *ran != 0 {
			t.Fatalf("waiter after the result retention: %+v after %d runs, want ErrLateReplay", a, *ran)
		}

		p2 := payment{Key: "pay-2", Amount: 1}
		release, first = f.first(p2, opts...)
		f.regate()
		done, ran = f.waiter(context.Background(), p2, time.Hour, opts...)
		f.reads()
		release <- answer{out: receipt{Charge: strings.Repeat("x", 100)}}
		if a := got(t, first, "the first call"); a.err != nil || len(a.out.Charge) != 100 {
			t.Fatalf("first call with a result too large to store: %+v", a)
		}
		close(f.store.gate)
		if a := got(t, done, "the waiter"); !errors.Is(a.err, lambdaidem.ErrResultNotStored) || *ran != 0 {
			t.Fatalf("waiter on an unstored result: %+v after %d runs, want ErrResultNotStored", a, *ran)
		}
	})
}

// A wait ends at its bound with an InProgressError saying how long it
// waited, having read the record no more often than the schedule allows.
func TestWaitEndsAtItsBound(t *testing.T) {
	onEveryStore(t, func(t *testing.T, f *waitFix) {
		release, first := f.first(p1)
		defer func() { release <- answer{}; got(t, first, "the first call") }()
		close(f.store.gate)
		const limit = 1500 * time.Millisecond
		// The wait's pauses are timers of the decorator's clock: let
		// them pass as they are armed, as real time would.
		f.clock.PassShort(2 * limit)
		done, ran := f.waiter(context.Background(), p1, limit)
		a := got(t, done, "the waiter")
		var ip *lambdaidem.InProgressError
		if !errors.As(a.err, &ip) || ip.Waited < limit || *ran != 0 {
			t.Fatalf("waiter: %v after %d runs, want an InProgressError after waiting %s", a.err, *ran, limit)
		}
		// The shortest pauses the schedule draws (half of each interval:
		// 25, 50, 100, 200, 400, then 500 ms) fit 6 times in 1.5 s, and
		// the last pause is cut at the bound: at most 7 reads.
		if c := f.store.counts(); c["get"] < 1 || c["get"] > 7 || c["claim"] != 1 {
			t.Fatalf("requests %v: want one claim and 1..7 reads in %s", c, limit)
		}
	})
}

// The wait ends with the caller's context, and before the invocation's
// deadline margin.
func TestWaitEndsWithTheContextAndTheMargin(t *testing.T) {
	onEveryStore(t, func(t *testing.T, f *waitFix) {
		release, first := f.first(p1)
		defer func() { release <- answer{}; got(t, first, "the first call") }()
		ctx, cancel := context.WithCancel(context.Background())
		done, _ := f.waiter(ctx, p1, time.Hour)
		f.reads()
		cancel()
		a := got(t, done, "the cancelled waiter")
		var ip *lambdaidem.InProgressError
		if !errors.Is(a.err, context.Canceled) || !errors.As(a.err, &ip) {
			t.Fatalf("cancelled waiter: %v, want context.Canceled and an InProgressError", a.err)
		}

		close(f.store.gate)
		// The deadline is read on the decorator's clock; its pauses pass
		// as they are armed, as real time would.
		f.clock.PassShort(2 * time.Second)
		dctx, dcancel := context.WithTimeout(context.Background(), time.Minute)
		defer dcancel()
		done, _ = f.waiter(dctx, p1, time.Hour, lambdaidem.WithDeadlineMargin(59*time.Second))
		a = got(t, done, "the waiter near its deadline")
		if !errors.As(a.err, &ip) || dctx.Err() != nil {
			t.Fatalf("waiter near its deadline: %v (context %v), want an InProgressError before the deadline", a.err, dctx.Err())
		}
	})
}

// unavailableReads fails every read of the record.
type unavailableReads struct{ lambdaidem.Store }

func (unavailableReads) Get(context.Context, idemstore.GetRequest) (idemstore.Record, error) {
	return idemstore.Record{}, lambdaidem.ErrStoreUnavailable
}

// A wait whose last read failed says so: whether the run ended is not
// known, so it is not reported as still in progress.
func TestWaitLastReadFailed(t *testing.T) {
	t.Parallel()
	f := &waitFix{t: t, raw: memstore.New(), clock: newClock(), ns: "wait"}
	release, first := f.first(p1)
	defer func() { release <- answer{}; got(t, first, "the first call") }()
	call := lambdaidem.Wrap(unavailableReads{f.raw}, func(context.Context, payment) (receipt, error) { return receipt{}, nil },
		f.opts(lambdaidem.WithWaitForCompletion(100*time.Millisecond))...)
	_, err := call(context.Background(), p1)
	var ip *lambdaidem.InProgressError
	if !errors.Is(err, lambdaidem.ErrStoreUnavailable) || errors.As(err, &ip) {
		t.Fatalf("wait with failing reads: %v, want ErrStoreUnavailable and no InProgressError", err)
	}
}

// The SQS handler refuses the option when it is built.
func TestSQSRefusesWaitForCompletion(t *testing.T) {
	t.Parallel()
	defer func() {
		err, _ := recover().(error)
		if !errors.Is(err, lambdaidem.ErrWaitUnsupported) {
			t.Fatalf("SQS with WithWaitForCompletion: panic %v, want ErrWaitUnsupported", err)
		}
	}()
	lambdaidem.SQS(memstore.New(), func(context.Context, events.SQSMessage) error { return nil },
		lambdaidem.WithWaitForCompletion(time.Second))
	t.Fatal("SQS accepted WithWaitForCompletion")
}
