package lambdaidem_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// scope is what a recording observer puts in the contexts it returns.
type scope struct {
	kind string // "invocation" or "record"
	id   string // the record's message ID or key
}

type scopeKey struct{ name string }

// recorder is an Observer that writes down every call, and marks the
// contexts it returns so the test can tell what descends from them.
type recorder struct {
	name  string
	mu    sync.Mutex
	calls []string
	// ends holds a copy of each report RecordEnd received, by record.
	ends map[string]lambdaidem.RecordReport
	inv  *lambdaidem.InvocationReport
	// entries holds each record's entry point.
	entries map[string]lambdaidem.EntryPoint
	// after, when set, is told each call (and its context) as it is made.
	after  func(call string, ctx context.Context)
	panics bool
}

func newRecorder(name string) *recorder {
	return &recorder{name: name, ends: map[string]lambdaidem.RecordReport{}, entries: map[string]lambdaidem.EntryPoint{}}
}

func (o *recorder) note(call string, ctx context.Context) {
	o.mu.Lock()
	o.calls = append(o.calls, call)
	after := o.after
	o.mu.Unlock()
	if after != nil {
		after(call, ctx)
	}
	if o.panics {
		panic(o.name + " panics in " + call)
	}
}

func recordID(info lambdaidem.RecordInfo) string {
	if info.Message != nil {
		return info.Message.MessageId
	}
	return info.Key
}

func reportID(rep *lambdaidem.RecordReport) string {
	if rep.MessageID != "" {
		return rep.MessageID
	}
	return rep.Key
}

func (o *recorder) InvocationStart(ctx context.Context, info lambdaidem.InvocationInfo) context.Context {
	ctx = context.WithValue(ctx, scopeKey{o.name}, scope{kind: "invocation", id: info.RequestID})
	o.note(fmt.Sprintf("%s InvocationStart %d", o.name, len(info.Records)), ctx)
	return ctx
}

func (o *recorder) InvocationEnd(ctx context.Context, rep *lambdaidem.InvocationReport) {
	o.mu.Lock()
	o.inv = rep
	o.mu.Unlock()
	o.note(o.name+" InvocationEnd", ctx)
}

func (o *recorder) RecordStart(ctx context.Context, info lambdaidem.RecordInfo) context.Context {
	id := recordID(info)
	o.mu.Lock()
	o.entries[id] = info.Entry
	o.mu.Unlock()
	ctx = context.WithValue(ctx, scopeKey{o.name}, scope{kind: "record", id: id})
	o.note(o.name+" RecordStart "+id, ctx)
	return ctx
}

func (o *recorder) RecordEnd(ctx context.Context, rep *lambdaidem.RecordReport) {
	o.mu.Lock()
	o.ends[reportID(rep)] = *rep
	o.mu.Unlock()
	o.note(o.name+" RecordEnd "+reportID(rep), ctx)
}

func (o *recorder) callList() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.calls)
}

// scopeOf is what the named observer's context says about ctx.
func scopeOf(ctx context.Context, name string) scope {
	s, _ := ctx.Value(scopeKey{name}).(scope)
	return s
}

// scopedStore notes the observer scope each store call runs under.
type scopedStore struct {
	lambdaidem.Store
	name string
	mu   sync.Mutex
	seen []string
}

func (s *scopedStore) note(op string, ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := scopeOf(ctx, s.name)
	s.seen = append(s.seen, op+" "+sc.kind+" "+sc.id)
}

func (s *scopedStore) Claim(ctx context.Context, r idemstore.ClaimRequest) (idemstore.ClaimResult, error) {
	s.note("Claim", ctx)
	return s.Store.Claim(ctx, r)
}

func (s *scopedStore) Complete(ctx context.Context, r idemstore.CompleteRequest) error {
	s.note("Complete", ctx)
	return s.Store.Complete(ctx, r)
}

func (s *scopedStore) Fail(ctx context.Context, r idemstore.FailRequest) error {
	s.note("Fail", ctx)
	return s.Store.Fail(ctx, r)
}

func (s *scopedStore) DeadLetter(ctx context.Context, r idemstore.DeadLetterRequest) error {
	s.note("DeadLetter", ctx)
	return s.Store.DeadLetter(ctx, r)
}

func TestObserverSeesEveryRecordInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	o := newRecorder("o")
	store := &scopedStore{Store: b.store, name: "o"}
	var handlerScopes sync.Map
	h := lambdaidem.SQS(store, func(ctx context.Context, m events.SQSMessage) error {
		handlerScopes.Store(m.MessageId, scopeOf(ctx, "o"))
		switch m.Body {
		case "fail":
			return errors.New("downstream says no")
		case "poison":
			return lambdaidem.Poison(errors.New("never"))
		}
		return nil
	}, b.opts(lambdaidem.WithObserver(o), lambdaidem.WithDeadLetterSink(b.sink), lambdaidem.WithKeyFunc(func(m events.SQSMessage) (string, error) {
		if m.Body == "nokey" {
			return "", lambdaidem.ErrMissingKey
		}
		return m.MessageId, nil
	}))...)
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	// g1: the first fails, so the second is skipped behind it.
	ev := batch(fifo("f1", "g1", "fail"), fifo("f2", "g1", "ok"), fifo("f3", "g2", "poison"), fifo("f4", "g3", "nokey"), fifo("f5", "g4", "ok"))
	resp := mustHandle(t, h, ctx, ev)
	wantFailed(t, resp, "f1", "f2")

	calls := o.callList()
	if calls[0] != "o InvocationStart 5" || calls[len(calls)-1] != "o InvocationEnd" {
		t.Fatalf("calls %q: want InvocationStart first and InvocationEnd last", calls)
	}
	for _, m := range ev.Records {
		id := m.MessageId
		start := slices.Index(calls, "o RecordStart "+id)
		end := slices.Index(calls, "o RecordEnd "+id)
		if start < 0 || end < start || strings.Count(strings.Join(calls, "\n"), "Record"+"End "+id+"\n") > 1 {
			t.Errorf("record %s: calls %q, want one RecordStart then one RecordEnd", id, calls)
		}
	}
	if len(calls) != 2+2*len(ev.Records) {
		t.Errorf("%d calls, want %d: %q", len(calls), 2+2*len(ev.Records), calls)
	}
	// RecordEnd's reports are the invocation's.
	if o.inv == nil || o.inv.RequestID != "req-1" || o.inv.Namespace != ns {
		t.Fatalf("InvocationEnd got %+v", o.inv)
	}
	for _, r := range o.inv.Records {
		if got := o.ends[r.MessageID]; got.Outcome != r.Outcome || got.Acked != r.Acked || got.Key != r.Key {
			t.Errorf("record %s: RecordEnd saw %s (acked %t), the invocation report says %s (acked %t)", r.MessageID, got.Outcome, got.Acked, r.Outcome, r.Acked)
		}
	}
	want := map[string]lambdaidem.Outcome{"f1": lambdaidem.OutcomeFailed, "f2": lambdaidem.OutcomeSkippedGroup,
		"f3": lambdaidem.OutcomeDeadLettered, "f4": lambdaidem.OutcomeDeadLettered, "f5": lambdaidem.OutcomeProcessed}
	if r := o.ends["f4"]; r.Reason != lambdaidem.ReasonMissingKey || r.Key != "" {
		t.Errorf("record f4: %+v, want dead-lettered for its missing key", r)
	}
	for id, out := range want {
		if got := o.ends[id].Outcome; got != out {
			t.Errorf("record %s ended %s, want %s", id, got, out)
		}
		if e := o.entries[id]; e != lambdaidem.EntrySQS {
			t.Errorf("record %s entry %q, want %q", id, e, lambdaidem.EntrySQS)
		}
	}
	// The handler, the claim, the completion and the failure and
	// dead-letter marks run under the record's own context.
	for _, id := range []string{"f1", "f3", "f5"} {
		if sc, _ := handlerScopes.Load(id); sc != (scope{"record", id}) {
			t.Errorf("handler of %s ran under %+v, want its record's context", id, sc)
		}
	}
	for _, s := range store.seen {
		f := strings.Fields(s)
		if len(f) != 3 || f[1] != "record" {
			t.Errorf("store call %q ran outside a record's context", s)
		}
	}
	for _, w := range []string{"Claim record f1", "Fail record f1", "DeadLetter record f3", "Complete record f5"} {
		if !slices.Contains(store.seen, w) {
			t.Errorf("store calls %q lack %q", store.seen, w)
		}
	}
}

func TestObserversNestInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var mu sync.Mutex
	var calls []string
	var inner scope
	outer, second := newRecorder("a"), newRecorder("b")
	for _, o := range []*recorder{outer, second} {
		o.after = func(call string, ctx context.Context) {
			mu.Lock()
			calls = append(calls, call)
			mu.Unlock()
		}
	}
	h := lambdaidem.SQS(b.store, func(ctx context.Context, m events.SQSMessage) error {
		inner = scopeOf(ctx, "a")
		if scopeOf(ctx, "b") != (scope{"record", "m1"}) {
			t.Errorf("handler context lacks the second observer's record scope")
		}
		return nil
	}, b.opts(lambdaidem.WithObserver(outer), lambdaidem.WithObserver(nil), lambdaidem.WithObserver(second))...)
	mustHandle(t, h, context.Background(), batch(msg("m1", "x")))
	want := []string{"a InvocationStart 1", "b InvocationStart 1", "a RecordStart m1", "b RecordStart m1",
		"b RecordEnd m1", "a RecordEnd m1", "b InvocationEnd", "a InvocationEnd"}
	if !slices.Equal(calls, want) {
		t.Errorf("calls\n%q\nwant\n%q", calls, want)
	}
	if inner != (scope{"record", "m1"}) {
		t.Errorf("handler context has %+v of the first observer", inner)
	}
}

func TestPanickingObserverChangesNoOutcome(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var logs bytes.Buffer
	var lmu sync.Mutex
	o := newRecorder("o")
	o.panics = true
	var reps []*lambdaidem.InvocationReport
	var mu sync.Mutex
	opts := b.opts(lambdaidem.WithObserver(o), reportsOf(&reps, &mu),
		lambdaidem.WithLogger(slog.New(slog.NewTextHandler(lockedWriter{&logs, &lmu}, nil))))
	h := lambdaidem.SQS(b.store, b.counting(ok), opts...)
	resp := mustHandle(t, h, context.Background(), batch(msg("m1", "x"), msg("m2", "y")))
	wantFailed(t, resp)
	if b.calls.total() != 2 || reps[0].Records[0].Outcome != lambdaidem.OutcomeProcessed || reps[0].Records[1].Outcome != lambdaidem.OutcomeProcessed {
		t.Fatalf("handler ran %d times, reports %+v: a panicking observer changed the records", b.calls.total(), reps[0].Records)
	}
	if n := len(o.callList()); n != 6 {
		t.Errorf("observer called %d times, want 6 (every call made despite the panics)", n)
	}
	lmu.Lock()
	text := logs.String()
	lmu.Unlock()
	for _, m := range []string{"InvocationStart", "RecordStart", "RecordEnd", "InvocationEnd"} {
		if !strings.Contains(text, "observer panicked") || !strings.Contains(text, "method="+m) {
			t.Errorf("log lacks the panic of %s:\n%s", m, text)
		}
	}

	// Wrap, the same.
	o2 := newRecorder("w")
	o2.panics = true
	f := lambdaidem.Wrap(b.store, func(ctx context.Context, in string) (string, error) { return in + "!", nil },
		b.wrapOpts(lambdaidem.WithObserver(o2))...)
	if out, err := f(context.Background(), "hi"); err != nil || out != "hi!" {
		t.Fatalf("Wrap with a panicking observer returned %q, %v", out, err)
	}
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// nilObserver returns nil contexts, which keep the ones it was given.
type nilObserver struct{}

func (nilObserver) InvocationStart(context.Context, lambdaidem.InvocationInfo) context.Context {
	return nil
}
func (nilObserver) InvocationEnd(context.Context, *lambdaidem.InvocationReport) {}
func (nilObserver) RecordStart(context.Context, lambdaidem.RecordInfo) context.Context {
	return nil
}
func (nilObserver) RecordEnd(context.Context, *lambdaidem.RecordReport) {}

func TestObserverReturningNilKeepsTheContext(t *testing.T) {
	t.Parallel()
	b := setup(t)
	type k struct{}
	ctx := context.WithValue(context.Background(), k{}, "caller's")
	var got any
	h := lambdaidem.SQS(b.store, func(ctx context.Context, _ events.SQSMessage) error {
		got = ctx.Value(k{})
		return nil
	}, b.opts(lambdaidem.WithObserver(nilObserver{}))...)
	wantFailed(t, mustHandle(t, h, ctx, batch(msg("m1", "x"))))
	if got != "caller's" {
		t.Fatalf("handler context value %v, want the caller's", got)
	}
}

func TestObserverOfConcurrentRecords(t *testing.T) {
	t.Parallel()
	b := setup(t)
	o := newRecorder("o")
	var handlerScopes sync.Map
	h := lambdaidem.SQS(b.store, func(ctx context.Context, m events.SQSMessage) error {
		handlerScopes.Store(m.MessageId, scopeOf(ctx, "o"))
		return nil
	}, b.opts(lambdaidem.WithObserver(o), lambdaidem.WithConcurrency(10))...)
	var recs []events.SQSMessage
	for i := range 10 {
		recs = append(recs, msg(fmt.Sprintf("m%d", i), "x"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mustHandle(t, h, ctx, batch(recs...))
	for _, m := range recs {
		if sc, _ := handlerScopes.Load(m.MessageId); sc != (scope{"record", m.MessageId}) {
			t.Errorf("handler of %s ran under %+v", m.MessageId, sc)
		}
		if o.ends[m.MessageId].Outcome != lambdaidem.OutcomeProcessed {
			t.Errorf("record %s ended %+v", m.MessageId, o.ends[m.MessageId])
		}
	}
}

// flakyStore fails the first n completions as unavailable.
type flakyStore struct {
	lambdaidem.Store
	mu sync.Mutex
	n  int
}

func (s *flakyStore) Complete(ctx context.Context, r idemstore.CompleteRequest) error {
	s.mu.Lock()
	fail := s.n > 0
	s.n--
	s.mu.Unlock()
	if fail {
		return fmt.Errorf("%w: simulated", lambdaidem.ErrStoreUnavailable)
	}
	return s.Store.Complete(ctx, r)
}

func TestReportsTheTimeSpentWaiting(t *testing.T) {
	t.Parallel()
	b := setup(t)
	o := newRecorder("o")
	h := lambdaidem.SQS(&flakyStore{Store: b.store, n: 1}, ok, b.opts(lambdaidem.WithObserver(o))...)
	mustHandle(t, h, context.Background(), batch(msg("m1", "x")))
	if r := o.ends["m1"]; r.Outcome != lambdaidem.OutcomeProcessed || r.Waited <= 0 || r.StoreErrors != 1 {
		t.Errorf("report %+v: want processed after one retry, with the wait before it", r)
	}

	// Another holder's lease: the message is asked back once it ends.
	lease := 30 * time.Second
	hold := lambdaidem.SQS(b.store, func(ctx context.Context, _ events.SQSMessage) error {
		second := lambdaidem.SQS(b.store, ok, b.opts(lambdaidem.WithObserver(o), lambdaidem.WithLease(lease))...)
		resp, _ := second(context.Background(), batch(msg("m2", "x")))
		wantFailed(t, resp, "m2")
		return nil
	}, b.opts(lambdaidem.WithLease(lease))...)
	mustHandle(t, hold, context.Background(), batch(msg("m2", "x")))
	r := o.ends["m2"]
	if r.Outcome != lambdaidem.OutcomeInProgress || r.RetryDelay < lease || r.RetryDelay > lease+lambdaidem.DefaultGrace+time.Second {
		t.Errorf("report %+v: want in progress, asked back after the holder's lease (%s) and the grace", r, lease)
	}
	if d, _ := b.vis.get("m2"); d != r.RetryDelay {
		t.Errorf("visibility set to %s, report says %s", d, r.RetryDelay)
	}
}

func TestWrapObserved(t *testing.T) {
	t.Parallel()
	b := setup(t)
	o := newRecorder("o")
	store := &scopedStore{Store: b.store, name: "o"}
	var inFn scope
	type in struct {
		ID   string `json:"id"`
		Fail bool   `json:"fail"`
		N    int    `json:"n"`
	}
	f := lambdaidem.Wrap(store, func(ctx context.Context, x in) (int, error) {
		inFn = scopeOf(ctx, "o")
		if x.Fail {
			return 0, errors.New("downstream says no")
		}
		return x.N * 2, nil
	}, b.wrapOpts(lambdaidem.WithObserver(o), lambdaidem.WithKeyJSONField("id"))...)
	ctx := context.Background()
	steps := []struct {
		in      in
		outcome lambdaidem.Outcome
		acked   bool
	}{
		{in{ID: "a", N: 1}, lambdaidem.OutcomeProcessed, true},
		{in{ID: "a", N: 1}, lambdaidem.OutcomeDuplicate, true},
		{in{ID: "a", N: 2}, lambdaidem.OutcomeConflict, false},
		{in{ID: "b", Fail: true}, lambdaidem.OutcomeFailed, false},
		{in{ID: ""}, lambdaidem.OutcomeMissingKey, false},
	}
	for i, s := range steps {
		_, err := f(ctx, s.in)
		r := o.ends[s.in.ID]
		if r.Outcome != s.outcome || r.Acked != s.acked || r.Acked != (err == nil) {
			t.Errorf("call %d (%+v): report %+v (error %v), want %s acked %t", i, s.in, r, err, s.outcome, s.acked)
		}
		if e := o.entries[s.in.ID]; e != lambdaidem.EntryWrap {
			t.Errorf("call %d: entry %q", i, e)
		}
	}
	if r := o.ends["a"]; r.Key != "a" {
		t.Errorf("report key %q", r.Key)
	}
	if inFn != (scope{"record", "b"}) {
		t.Errorf("fn ran under %+v, want its record's context", inFn)
	}
	for _, s := range store.seen {
		if f := strings.Fields(s); len(f) != 3 || f[1] != "record" {
			t.Errorf("store call %q ran outside a record's context", s)
		}
	}
	calls := o.callList()
	if len(calls) != 2*len(steps) || strings.Contains(strings.Join(calls, " "), "Invocation") {
		t.Errorf("calls %q: want RecordStart and RecordEnd per call, no invocation", calls)
	}

	// An adapter names its entry point.
	g := lambdaidem.Wrap(b.store, func(ctx context.Context, x string) (string, error) { return x, nil },
		b.wrapOpts(lambdaidem.WithObserver(o), lambdaidem.WithEntryPoint("grpc"), lambdaidem.WithWrapKey(func(x string) (string, error) { return x, nil }))...)
	if _, err := g(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if e := o.entries["c"]; e != "grpc" {
		t.Errorf("entry %q, want grpc", e)
	}
}
