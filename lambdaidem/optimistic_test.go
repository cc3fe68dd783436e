package lambdaidem_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
)

// reports collects the records of every invocation.
type reports struct {
	mu   sync.Mutex
	recs []lambdaidem.RecordReport
}

func (r *reports) hook() lambdaidem.Option {
	return lambdaidem.WithInvocationHook(func(rep *lambdaidem.InvocationReport) {
		r.mu.Lock()
		r.recs = append(r.recs, rep.Records...)
		r.mu.Unlock()
	})
}

func (r *reports) last(t *testing.T) lambdaidem.RecordReport {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.recs) == 0 {
		t.Fatal("no record reported")
	}
	return r.recs[len(r.recs)-1]
}

func TestOptimisticFirstDeliveryIsOneRequest(t *testing.T) {
	b := setup(t)
	var rep reports
	var leased []bool
	h := lambdaidem.SQS(b.store, b.counting(func(ctx context.Context, _ events.SQSMessage) error {
		_, ok := lambdaidem.LeaseFromContext(ctx)
		leased = append(leased, ok)
		return nil
	}), b.opts(lambdaidem.WithOptimisticCommit(), lambdaidem.WithConcurrency(1), rep.hook())...)

	wantFailed(t, mustHandle(t, h, t.Context(), batch(msg("m1", "a"))))
	if st := b.store.Stats(); st.Total() != 1 || st.Commit != 1 {
		t.Errorf("first delivery: store calls %+v, want one commit", st)
	}
	r := b.record(t, "m1")
	if r.Status != lambdaidem.StatusCompleted || r.Attempts != 1 || r.MessageID != "m1" {
		t.Errorf("record after the first delivery: %s, %d attempts, message %q", r.Status, r.Attempts, r.MessageID)
	}
	if got := rep.last(t); got.Outcome != lambdaidem.OutcomeProcessed || got.Attempt != 1 || !got.HandlerRan {
		t.Errorf("first delivery reported %+v", got)
	}

	// The same message again, as SQS's own duplicate delivery: it runs,
	// and its commit is refused by the completed record.
	wantFailed(t, mustHandle(t, h, t.Context(), batch(msg("m1", "a"))))
	if got := rep.last(t); got.Outcome != lambdaidem.OutcomeDuplicate || !got.Acked || !got.HandlerRan {
		t.Errorf("a duplicate first delivery reported %+v", got)
	}
	if n := b.calls.get("m1"); n != 2 {
		t.Errorf("handler ran %d times, want 2 (a duplicate first delivery runs before its commit is refused)", n)
	}
	// A redelivery is claimed under a lease: the duplicate does not run.
	wantFailed(t, mustHandle(t, h, t.Context(), batch(redelivered(msg("m1", "a"), 2))))
	if got := rep.last(t); got.Outcome != lambdaidem.OutcomeDuplicate || got.HandlerRan {
		t.Errorf("a redelivered duplicate reported %+v", got)
	}
	if want := []bool{false, false}; fmt.Sprint(leased) != fmt.Sprint(want) {
		t.Errorf("LeaseFromContext ok in the runs: %v, want %v (a first delivery holds no lease)", leased, want)
	}
	if r2 := b.record(t, "m1"); r2.LeaseToken != r.LeaseToken || r2.Attempts != 1 {
		t.Errorf("the duplicates changed the record: token %q → %q, attempts %d", r.LeaseToken, r2.LeaseToken, r2.Attempts)
	}
}

func TestOptimisticFailureCountsOneAttempt(t *testing.T) {
	b := setup(t)
	var rep reports
	fails := true
	var leases []lambdaidem.Lease
	h := lambdaidem.SQS(b.store, b.counting(func(ctx context.Context, _ events.SQSMessage) error {
		if l, ok := lambdaidem.LeaseFromContext(ctx); ok {
			leases = append(leases, l)
		}
		if fails {
			return lambdaidem.RetryAfter(time.Minute, errors.New("downstream says no"))
		}
		return nil
	}), b.opts(lambdaidem.WithOptimisticCommit(), rep.hook())...)

	wantFailed(t, handleFailing(t, h, batch(msg("m1", "a"))), "m1")
	if st := b.store.Stats(); st.Total() != 1 || st.Commit != 1 {
		t.Errorf("failed first delivery: store calls %+v, want one commit", st)
	}
	r := b.record(t, "m1")
	if r.Status != lambdaidem.StatusFailed || r.Attempts != 1 || r.LastError == "" {
		t.Errorf("record after a failed first delivery: %s, %d attempts, error %q", r.Status, r.Attempts, r.LastError)
	}
	if got := rep.last(t); got.Outcome != lambdaidem.OutcomeFailed || got.Attempt != 1 {
		t.Errorf("failed first delivery reported %+v", got)
	}
	if d, ok := b.vis.get("m1"); !ok || d != time.Minute {
		t.Errorf("RetryAfter's visibility: %v, %v; want a minute", d, ok)
	}
	// The redelivery takes a lease, counting attempt 2.
	fails = false
	wantFailed(t, mustHandle(t, h, t.Context(), batch(redelivered(msg("m1", "a"), 2))))
	if len(leases) != 1 || leases[0].Attempt != 2 {
		t.Errorf("the redelivery's leases: %+v, want one of attempt 2", leases)
	}
	if r := b.record(t, "m1"); r.Status != lambdaidem.StatusCompleted || r.Attempts != 2 {
		t.Errorf("record after the redelivery: %s, %d attempts", r.Status, r.Attempts)
	}
}

func TestOptimisticDeadLettersUnderALease(t *testing.T) {
	for _, c := range []struct {
		name        string
		handler     lambdaidem.MessageHandler
		maxAttempts int
		reason      lambdaidem.Reason
	}{
		{"poison", func(context.Context, events.SQSMessage) error { return lambdaidem.Poison(errors.New("bad order")) }, 5, lambdaidem.ReasonPoison},
		{"last attempt", alwaysFail, 1, lambdaidem.ReasonMaxAttempts},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := setup(t)
			h := lambdaidem.SQS(b.store, c.handler, b.opts(lambdaidem.WithOptimisticCommit(), lambdaidem.WithDeadLetterSink(b.sink),
				lambdaidem.WithMaxAttempts(c.maxAttempts))...)
			wantFailed(t, mustHandle(t, h, t.Context(), batch(msg("m1", "a"))))
			if got := b.sink.reasons(); len(got) != 1 || got[0] != c.reason {
				t.Fatalf("dead letters %v, want [%s]", got, c.reason)
			}
			r := b.record(t, "m1")
			if r.Status != lambdaidem.StatusDeadLettered || r.Attempts != 1 || r.DeadLetterMessageID != "dlq-1" {
				t.Errorf("record: %s, %d attempts, copy %q; want DEAD_LETTERED after 1 attempt with dlq-1", r.Status, r.Attempts, r.DeadLetterMessageID)
			}
		})
	}
}

func TestOptimisticMeetsALeaseHolder(t *testing.T) {
	b := setup(t)
	var rep reports
	byID := lambdaidem.WithKeyJSONField("id")
	// A consumer in lease mode holds the key while its handler runs.
	started, release := make(chan struct{}), make(chan struct{})
	leaseMode := lambdaidem.SQS(b.store, func(context.Context, events.SQSMessage) error {
		close(started)
		<-release
		return nil
	}, b.opts(byID)...)
	done := make(chan events.SQSEventResponse)
	go func() {
		resp, _ := leaseMode(context.Background(), batch(msg("m0", `{"id":"k"}`)))
		done <- resp
	}()
	<-started
	held := b.record(t, "k")

	h := lambdaidem.SQS(b.store, b.counting(ok), b.opts(byID, lambdaidem.WithOptimisticCommit(), lambdaidem.WithDeadLetterSink(b.sink), rep.hook())...)
	wantFailed(t, handleFailing(t, h, batch(msg("m1", `{"id":"k"}`))), "m1")
	got := rep.last(t)
	if got.Outcome != lambdaidem.OutcomeInProgress || got.Acked || !got.HandlerRan {
		t.Errorf("an optimistic run over a live lease reported %+v, want in progress, kept", got)
	}
	if d, ok := b.vis.get("m1"); !ok || d <= 0 {
		t.Errorf("visibility %v, %v; want the time until the holder's lease ends", d, ok)
	}
	if r := b.record(t, "k"); r.Status != lambdaidem.StatusInProgress || r.LeaseToken != held.LeaseToken {
		t.Errorf("the holder's record changed: %s, token %q", r.Status, r.LeaseToken)
	}
	// The holder completes as if nothing happened.
	close(release)
	wantFailed(t, <-done)
	if r := b.record(t, "k"); r.Status != lambdaidem.StatusCompleted || r.MessageID != "m0" {
		t.Errorf("after the holder: %s by %q, want COMPLETED by m0", r.Status, r.MessageID)
	}

	// Another payload under the key: a key conflict, dead-lettered.
	wantFailed(t, handleFailing(t, h, batch(msg("m2", `{"id":"k","amount":2}`))))
	if got := b.sink.reasons(); len(got) != 1 || got[0] != lambdaidem.ReasonKeyConflict {
		t.Errorf("dead letters %v, want [key_conflict]; reported %+v", got, rep.last(t))
	}
}

// hashOf is the payload hash the decorator stores for body.
func hashOf(t *testing.T, body string) string {
	t.Helper()
	var got string
	store := memstore.New()
	h := lambdaidem.SQS(store, ok, lambdaidem.WithNamespace(ns))
	mustHandle(t, h, t.Context(), batch(msg("probe", body)))
	r, err := store.Get(t.Context(), idemstore.GetRequest{Namespace: ns, Key: "probe", Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	got = r.PayloadHash
	return got
}

// lossy loses the answer of the commits it is told to, after they applied
// (a response lost in the network), or before.
type lossy struct {
	*memstore.Store
	mu     sync.Mutex
	after  int // lose this many answers of commits that applied
	before int // fail this many commits before they apply
	calls  int
}

func (s *lossy) Commit(ctx context.Context, req idemstore.CommitRequest) (idemstore.CommitResult, error) {
	s.mu.Lock()
	s.calls++
	before := s.before > 0
	if before {
		s.before--
	}
	s.mu.Unlock()
	if before {
		return idemstore.CommitResult{}, fmt.Errorf("%w: timed out", lambdaidem.ErrStoreUnavailable)
	}
	res, err := s.Store.Commit(ctx, req)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.after > 0 {
		s.after--
		return idemstore.CommitResult{}, fmt.Errorf("%w: answer lost", lambdaidem.ErrStoreUnavailable)
	}
	return res, err
}

func TestOptimisticLostAnswerIsResolvedByTheSameCommit(t *testing.T) {
	b := setup(t)
	store := &lossy{Store: b.store, after: 1}
	var rep reports
	h := lambdaidem.SQS(store, ok, b.opts(lambdaidem.WithOptimisticCommit(), rep.hook())...)
	wantFailed(t, mustHandle(t, h, t.Context(), batch(msg("m1", "a"))))
	if got := rep.last(t); got.Outcome != lambdaidem.OutcomeProcessed || !got.Acked || got.StoreCalls != 2 {
		t.Errorf("a commit whose answer was lost reported %+v, want processed after 2 store calls", got)
	}
	if r := b.record(t, "m1"); r.Attempts != 1 || r.Fence.Claim != 1 {
		t.Errorf("record after the retried commit: %d attempts, claim %d; want 1, 1 (one commit, not two)", r.Attempts, r.Fence.Claim)
	}
}

func TestOptimisticRefusalAfterAnUnknownTryIsUnknown(t *testing.T) {
	b := setup(t)
	// The key is completed by another run while this commit's first try
	// is lost on its way: the retry is refused, but the first try may
	// still land, so nothing is concluded and SQS keeps the message.
	done, _ := b.store.Claim(t.Context(), idemstore.ClaimRequest{Namespace: ns, Key: "m1", PayloadHash: hashOf(t, "a"), MessageID: "m0",
		Now: b.clock.Now(), LeaseUntil: b.clock.Now().Add(time.Minute), ExpiresAt: b.clock.Now().Add(time.Hour)})
	if err := b.store.Complete(t.Context(), idemstore.CompleteRequest{Lease: done.Lease, Now: b.clock.Now(), ExpiresAt: b.clock.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	store := &lossy{Store: b.store, before: 1}
	var rep reports
	h := lambdaidem.SQS(store, ok, b.opts(lambdaidem.WithOptimisticCommit(), rep.hook())...)
	wantFailed(t, handleFailing(t, h, batch(msg("m1", "a"))), "m1")
	if got := rep.last(t); got.Outcome != lambdaidem.OutcomeStoreError || got.Acked {
		t.Errorf("a refusal after an unknown try reported %+v, want a store error, kept", got)
	}
}

func TestOptimisticRefusedWhenBuilt(t *testing.T) {
	b := setup(t)
	wrap := func(opts ...lambdaidem.Option) func() {
		return func() {
			lambdaidem.Wrap(b.store, func(context.Context, string) (string, error) { return "", nil }, b.wrapOpts(opts...)...)
		}
	}
	sqs := func(store lambdaidem.Store, opts ...lambdaidem.Option) func() {
		return func() { lambdaidem.SQS(store, ok, b.opts(opts...)...) }
	}
	opt := lambdaidem.WithOptimisticCommit()
	for _, c := range []struct {
		name   string
		build  func()
		option string
		want   []error
	}{
		{"with WithAtMostOnce", sqs(b.store, opt, lambdaidem.WithAtMostOnce()), "WithOptimisticCommit and WithAtMostOnce",
			[]error{lambdaidem.ErrNeedsLease, lambdaidem.ErrInvalidOption}},
		{"with WithHeartbeat", sqs(b.store, opt, lambdaidem.WithHeartbeat(time.Second)), "WithOptimisticCommit and WithHeartbeat",
			[]error{lambdaidem.ErrNeedsLease, lambdaidem.ErrInvalidOption}},
		{"on a store without commits", sqs(struct{ lambdaidem.Store }{b.store}, opt), "WithOptimisticCommit",
			[]error{lambdaidem.ErrCommitUnsupported, lambdaidem.ErrUnsupportedOption}},
		{"on Wrap", wrap(opt), "WithOptimisticCommit", []error{lambdaidem.ErrUnsupportedOption}},
		{"with WithWaitForCompletion", sqs(b.store, opt, lambdaidem.WithWaitForCompletion(time.Second)), "WithWaitForCompletion",
			[]error{lambdaidem.ErrUnsupportedOption}},
	} {
		err := lambdaidem.Check(c.build)
		var ce *lambdaidem.ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("%s: %v, want a *ConfigError", c.name, err)
			continue
		}
		if ce.Option != c.option {
			t.Errorf("%s: refused option %q, want %q (%v)", c.name, ce.Option, c.option, err)
		}
		for _, w := range c.want {
			if !errors.Is(err, w) {
				t.Errorf("%s: %v, want it to match %v", c.name, err, w)
			}
		}
	}
	// What the mode keeps is built.
	for name, build := range map[string]func(){
		"alone":                       sqs(b.store, opt),
		"with WithCache":              sqs(b.store, opt, lambdaidem.WithCache(10, time.Minute)),
		"with WithMaxAttempts":        sqs(b.store, opt, lambdaidem.WithMaxAttempts(3)),
		"with WithFailBatchOnFailure": sqs(b.store, opt, lambdaidem.WithFailBatchOnAnyFailure()),
	} {
		if err := lambdaidem.Check(build); err != nil {
			t.Errorf("%s: refused: %v", name, err)
		}
	}
}

// handleFailing runs h on ev, in which every record may fail (the
// invocation's error then only says so).
func handleFailing(t *testing.T, h func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), ev events.SQSEvent) events.SQSEventResponse {
	t.Helper()
	resp, err := h(t.Context(), ev)
	var be *lambdaidem.BatchError
	if err != nil && !errors.As(err, &be) {
		t.Fatal(err)
	}
	return resp
}

// A handler learns its record's key from KeyFromContext in both modes,
// and on Wrap; LeaseFromContext has no lease to give an optimistic run.
func TestKeyFromContext(t *testing.T) {
	b := setup(t)
	var keys []string
	record := func(ctx context.Context) {
		k, ok := lambdaidem.KeyFromContext(ctx)
		if !ok {
			t.Error("KeyFromContext in a decorated handler: not ok")
		}
		keys = append(keys, k)
	}
	for _, opts := range [][]lambdaidem.Option{nil, {lambdaidem.WithOptimisticCommit()}} {
		h := lambdaidem.SQS(b.store, func(ctx context.Context, _ events.SQSMessage) error { record(ctx); return nil },
			b.opts(append(opts, lambdaidem.WithConcurrency(1))...)...)
		mustHandle(t, h, t.Context(), batch(msg(fmt.Sprintf("m%d", len(keys)+1), "a")))
	}
	w := lambdaidem.Wrap(b.store, func(ctx context.Context, in string) (string, error) { record(ctx); return in, nil }, b.wrapOpts()...)
	if _, err := w(t.Context(), "w1"); err != nil {
		t.Fatal(err)
	}
	// Wrap's default key is a hash of its input.
	if len(keys) != 3 || keys[0] != "m1" || keys[1] != "m2" || keys[2] == "" {
		t.Errorf("keys = %q, want m1, m2 and Wrap's key", keys)
	}
	if _, ok := lambdaidem.KeyFromContext(t.Context()); ok {
		t.Error("KeyFromContext outside a handler: ok")
	}
}
