package emf_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"
	"github.com/lambdaidem/go-lambdaidem/emf"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest/testclock"
)

const (
	idemNS  = "orders"
	stdARN  = "arn:aws:sqs:us-east-1:123456789012:orders"
	fifoARN = "arn:aws:sqs:us-east-1:123456789012:orders.fifo"
)

// clock is the fake clock shared by the decorator, the hook and the test;
// the few milliseconds a store write's retry waits pass at once.
type clock = testclock.Clock

// sink is a dead-letter queue that keeps what it is sent.
type sink struct {
	mu   sync.Mutex
	sent []lambdaidem.DeadLetter
}

func (s *sink) Send(_ context.Context, dl lambdaidem.DeadLetter) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, dl)
	return "dlq-" + dl.Message.MessageId, nil
}

func hash(body []byte) (string, error) {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:]), nil
}

func mustHash(body string) string {
	h, _ := hash([]byte(body))
	return h
}

func msg(id, body string) events.SQSMessage {
	return events.SQSMessage{MessageId: id, Body: body, EventSourceARN: stdARN,
		Attributes: map[string]string{"ApproximateReceiveCount": "1"}}
}

func fifo(id, group, body string) events.SQSMessage {
	m := msg(id, body)
	m.EventSourceARN = fifoARN
	m.Attributes["MessageGroupId"] = group
	return m
}

func batch(ms ...events.SQSMessage) events.SQSEvent { return events.SQSEvent{Records: ms} }

// run is what an invocation's EMF output says.
type run struct {
	ts        int64
	counts    map[string]float64
	units     map[string]string
	latencies []float64
	byReason  map[string]map[string]float64 // metric -> reason -> count
}

var baseDims = map[string]string{emf.DimensionFunctionName: "orders-fn", emf.DimensionNamespace: idemNS}

// read parses one invocation's lines: the main event under baseDims and
// the per-reason events under baseDims plus Reason.
func read(t *testing.T, out []byte) run {
	t.Helper()
	r := run{counts: map[string]float64{}, units: map[string]string{}, byReason: map[string]map[string]float64{}}
	ls := lines(t, out)
	if len(ls) == 0 {
		t.Fatal("no EMF output")
	}
	for i, l := range ls {
		e := parse(t, l)
		if e.doc.AWS.CloudWatchMetrics[0].Namespace != emf.DefaultNamespace {
			t.Fatalf("namespace %q", e.doc.AWS.CloudWatchMetrics[0].Namespace)
		}
		if i == 0 {
			r.ts = e.doc.AWS.Timestamp
			if diff := cmp.Diff(baseDims, e.dims); diff != "" {
				t.Fatalf("main event dimensions (-want +got):\n%s", diff)
			}
			for name, v := range e.vals {
				r.units[name] = e.defs[name]
				if name == emf.MetricHandlerLatency {
					r.latencies = v
					continue
				}
				if len(v) != 1 {
					t.Fatalf("count %s carries %d values", name, len(v))
				}
				r.counts[name] = v[0]
			}
			continue
		}
		if e.doc.AWS.Timestamp != r.ts {
			t.Fatalf("reason event stamped %d, main event %d", e.doc.AWS.Timestamp, r.ts)
		}
		if _, ok := e.dims[emf.DimensionTenant]; ok {
			continue // WithTenantDimension's events: see tenantCounts
		}
		reason := e.dims[emf.DimensionReason]
		delete(e.dims, emf.DimensionReason)
		if reason == "" || !cmp.Equal(baseDims, e.dims) {
			t.Fatalf("reason event dimensions %v", e.dims)
		}
		if len(e.vals) != 1 {
			t.Fatalf("reason event carries %d metrics, want 1", len(e.vals))
		}
		for name, v := range e.vals {
			if r.byReason[name] == nil {
				r.byReason[name] = map[string]float64{}
			}
			if _, dup := r.byReason[name][reason]; dup {
				t.Fatalf("%s reason %s emitted twice", name, reason)
			}
			r.byReason[name][reason] = v[0]
		}
	}
	return r
}

var countNames = []string{
	emf.MetricRecords, emf.MetricHandlerRuns, emf.MetricProcessed, emf.MetricDuplicatesSkipped,
	emf.MetricConflicts, emf.MetricInProgressRejections, emf.MetricLeasesLost, emf.MetricCompletionsUnrecorded,
	emf.MetricDeadLettered, emf.MetricDeadLetterFailures, emf.MetricStoreErrors, emf.MetricStoreRequests,
	emf.MetricFailed, emf.MetricTakeovers, emf.MetricHandlerErrors, emf.MetricNotStarted,
	emf.MetricFIFOGroupSkipped, emf.MetricMissingKeys, emf.MetricVisibilityFailures,
}

// counts is what an event carries for these counts: every count metric,
// zero but those given, with all; else only those that are not zero.
func counts(nonZero map[string]float64, all bool) map[string]float64 {
	m := map[string]float64{}
	for _, n := range countNames {
		if v := nonZero[n]; v != 0 || all {
			m[n] = v
		}
	}
	return m
}

// bundle is one test's decorator over an in-memory store, with the hook
// writing into out.
type bundle struct {
	store *memstore.Store
	clock *clock
	sink  *sink
	out   bytes.Buffer
	all   bool // the hook emits WithAllMetrics
}

func setup(t *testing.T) *bundle {
	t.Helper()
	return &bundle{store: memstore.New(), clock: testclock.New(time.Now().Truncate(time.Second)).PassShort(200 * time.Millisecond), sink: &sink{}}
}

func (b *bundle) hook(extra ...emf.Option) lambdaidem.Option {
	opts := []emf.Option{
		emf.WithEmitter(emf.NewWriter(&b.out)),
		emf.WithClock(b.clock.Now),
		emf.WithDimensions(emf.Dimension{Name: emf.DimensionFunctionName, Value: "orders-fn"},
			emf.Dimension{Name: emf.DimensionNamespace, Value: idemNS}),
	}
	if b.all {
		opts = append(opts, emf.WithAllMetrics())
	}
	return lambdaidem.WithInvocationHook(emf.Hook(append(opts, extra...)...))
}

func (b *bundle) opts(extra ...lambdaidem.Option) []lambdaidem.Option {
	return append([]lambdaidem.Option{
		lambdaidem.WithNamespace(idemNS),
		lambdaidem.WithKeyJSONField("id"),
		lambdaidem.WithPayloadHash(hash),
		lambdaidem.WithClock(b.clock),
		lambdaidem.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		// One record at a time, so the test knows the order of store calls.
		lambdaidem.WithConcurrency(1),
		lambdaidem.WithResultRetention(time.Minute),
	}, extra...)
}

// handle acts on the body's "do": ok, fail, poison, or steal (another
// instance takes the lease over while the handler runs).
func (b *bundle) handle(ctx context.Context, m events.SQSMessage) error {
	var body struct{ ID, Do string }
	if err := json.Unmarshal([]byte(m.Body), &body); err != nil {
		return err
	}
	switch body.Do {
	case "fail":
		return errors.New("downstream said no")
	case "poison":
		return lambdaidem.Poison(errors.New("cannot parse order"))
	case "steal":
		now := b.clock.Now().Add(time.Hour)
		_, err := b.store.Claim(ctx, idemstore.ClaimRequest{
			Namespace: idemNS, Key: body.ID, PayloadHash: mustHash(m.Body), MessageID: "thief",
			Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(24 * time.Hour),
		})
		return err
	}
	return nil
}

// preclaim holds key under a lease ending at until, as another instance
// would.
func (b *bundle) preclaim(t *testing.T, key, body string, until time.Time) {
	t.Helper()
	now := until.Add(-10 * time.Minute)
	cr, err := b.store.Claim(context.Background(), idemstore.ClaimRequest{
		Namespace: idemNS, Key: key, PayloadHash: mustHash(body), MessageID: "holder",
		Now: now, LeaseUntil: until, ExpiresAt: now.Add(24 * time.Hour),
	})
	if err != nil || !cr.Claimed {
		t.Fatalf("preclaim %s: %+v %v", key, cr, err)
	}
}

// invoke runs h on ev and returns what the hook wrote.
func (b *bundle) invoke(t *testing.T, ctx context.Context, h func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), ev events.SQSEvent) run {
	t.Helper()
	b.out.Reset()
	if _, err := h(ctx, ev); err != nil && !errors.As(err, new(*lambdaidem.BatchError)) {
		t.Fatal(err)
	}
	return read(t, b.out.Bytes())
}

func check(t *testing.T, b *bundle, got run, want map[string]float64, runs int, byReason map[string]map[string]float64) {
	t.Helper()
	if got.ts != b.clock.Now().UnixMilli() {
		t.Errorf("Timestamp %d, want the clock's %d", got.ts, b.clock.Now().UnixMilli())
	}
	if diff := cmp.Diff(counts(want, b.all), got.counts); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	for n := range got.counts {
		if got.units[n] != string(emf.UnitCount) {
			t.Errorf("%s unit %q, want Count", n, got.units[n])
		}
	}
	if len(got.latencies) != runs {
		t.Errorf("%d HandlerLatency values, want one per handler run (%d)", len(got.latencies), runs)
	}
	if runs > 0 && got.units[emf.MetricHandlerLatency] != string(emf.UnitMilliseconds) {
		t.Errorf("HandlerLatency unit %q", got.units[emf.MetricHandlerLatency])
	}
	for _, v := range got.latencies {
		if v < 0 {
			t.Errorf("negative latency %v", v)
		}
	}
	if byReason == nil {
		byReason = map[string]map[string]float64{}
	}
	if diff := cmp.Diff(byReason, got.byReason); diff != "" {
		t.Errorf("by reason (-want +got):\n%s", diff)
	}
	// Every record ends acknowledged under exactly one of these, or failed.
	c := got.counts
	acked := c[emf.MetricProcessed] + c[emf.MetricDuplicatesSkipped] + c[emf.MetricDeadLettered] +
		c[emf.MetricCompletionsUnrecorded]
	if acked+c[emf.MetricFailed] != c[emf.MetricRecords] {
		t.Errorf("Records %v != acknowledged %v + Failed %v", c[emf.MetricRecords], acked, c[emf.MetricFailed])
	}
}

// TestMetricsOfARealRun drives records through every outcome with the
// real decorator over memstore and checks every metric the hook emits,
// by default (the metrics that are not zero) and with WithAllMetrics.
func TestMetricsOfARealRun(t *testing.T) {
	t.Parallel()
	t.Run("default", func(t *testing.T) { t.Parallel(); metricsOfARealRun(t, false) })
	t.Run("all metrics", func(t *testing.T) { t.Parallel(); metricsOfARealRun(t, true) })
}

func metricsOfARealRun(t *testing.T, all bool) {
	b := setup(t)
	b.all = all
	// Another instance of the function, without the cache: its completions
	// are what the primary instance's duplicates find in the store.
	other := lambdaidem.SQS(b.store, b.handle, b.opts()...)
	primary := lambdaidem.SQS(b.store, b.handle, b.opts(
		lambdaidem.WithDeadLetterSink(b.sink),
		lambdaidem.WithCache(100, 30*time.Second),
		b.hook())...)
	noSink := lambdaidem.SQS(b.store, b.handle, b.opts(b.hook())...)
	ctx := context.Background()
	body := func(id, do string) string { return `{"id":"` + id + `","do":"` + do + `"}` }

	// R completes now; its result has expired by the time it comes back.
	if _, err := other(ctx, batch(msg("r1", body("R", "ok")))); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(2 * time.Minute)
	if _, err := other(ctx, batch(msg("b1", body("B", "ok")))); err != nil {
		t.Fatal(err)
	}

	t.Run("processed, poison and a malformed body", func(t *testing.T) {
		got := b.invoke(t, ctx, primary, batch(msg("a1", body("A", "ok")), msg("p1", body("P", "poison")), msg("m1", `{"id":`)))
		check(t, b, got, map[string]float64{
			emf.MetricRecords: 3, emf.MetricHandlerRuns: 2, emf.MetricProcessed: 1, emf.MetricDeadLettered: 2,
			emf.MetricStoreRequests: 5, // claim+complete, claim+pending dead-letter mark+dead-letter; none for the malformed body
		}, 2, map[string]map[string]float64{emf.MetricDeadLettered: {"poison": 1, "malformed_body": 1}})
	})

	t.Run("every duplicate, conflict, in progress, failure, takeover, lease lost", func(t *testing.T) {
		b.preclaim(t, "I", body("I", "ok"), b.clock.Now().Add(10*time.Minute))
		b.preclaim(t, "T", body("T", "ok"), b.clock.Now().Add(-time.Hour))
		got := b.invoke(t, ctx, primary, batch(
			msg("a2", body("A", "ok")),       // cached duplicate: no store call
			msg("b2", body("B", "ok")),       // duplicate found in the store: 1
			msg("p1", body("P", "poison")),   // the dead-lettered message again: 1
			msg("r2", body("R", "ok")),       // late replay: 1
			msg("c1", `{"id":"A","do":"x"}`), // conflict, dead-lettered: 1
			msg("i1", body("I", "ok")),       // in progress: 1
			msg("f1", body("F", "fail")),     // handler error: claim+fail 2
			msg("t1", body("T", "ok")),       // takeover, processed: 2
			msg("l1", body("L", "steal")),    // lease lost: claim+complete 2
		))
		check(t, b, got, map[string]float64{
			emf.MetricRecords: 9, emf.MetricHandlerRuns: 3, emf.MetricProcessed: 1,
			emf.MetricDuplicatesSkipped: 4, emf.MetricConflicts: 1, emf.MetricInProgressRejections: 1,
			emf.MetricLeasesLost: 1, emf.MetricDeadLettered: 1, emf.MetricStoreRequests: 11,
			emf.MetricFailed: 3, emf.MetricTakeovers: 1, emf.MetricHandlerErrors: 1,
		}, 3, map[string]map[string]float64{
			emf.MetricDuplicatesSkipped: {
				emf.DuplicateCached: 1, emf.DuplicateCompleted: 1,
				emf.DuplicateDeadLettered: 1, emf.DuplicateLateReplay: 1,
			},
			emf.MetricDeadLettered: {string(lambdaidem.ReasonKeyConflict): 1},
		})
	})

	t.Run("without a sink: conflict, dead letter failure, missing key, malformed body, FIFO group skipped", func(t *testing.T) {
		got := b.invoke(t, ctx, noSink, batch(
			fifo("x1", "g1", `{"id":"A","do":"y"}`), // conflict: 1
			fifo("x2", "g1", body("X2", "ok")),      // skipped behind it: 0
			fifo("y1", "g2", body("Y", "poison")),   // no sink: claim+fail 2
			fifo("z1", "g3", `{"do":"ok"}`),         // no key: 0
			fifo("w1", "g4", `not json`),            // malformed body, counted as a missing key: 0
		))
		check(t, b, got, map[string]float64{
			emf.MetricRecords: 5, emf.MetricHandlerRuns: 1, emf.MetricConflicts: 1,
			emf.MetricDeadLetterFailures: 1, emf.MetricFIFOGroupSkipped: 1, emf.MetricMissingKeys: 2,
			emf.MetricStoreRequests: 3, emf.MetricFailed: 5,
		}, 1, nil)
	})

	t.Run("deadline too close to start", func(t *testing.T) {
		dctx, cancel := context.WithDeadline(ctx, b.clock.Now())
		defer cancel()
		got := b.invoke(t, dctx, primary, batch(msg("n1", body("N1", "ok")), msg("n2", body("N2", "ok"))))
		check(t, b, got, map[string]float64{
			emf.MetricRecords: 2, emf.MetricNotStarted: 2, emf.MetricFailed: 2,
		}, 0, nil)
	})

	t.Run("store unreachable", func(t *testing.T) {
		b.store.SetFault(func(op string) error { return errors.New("connection refused") })
		defer b.store.SetFault(nil)
		got := b.invoke(t, ctx, primary, batch(msg("s1", body("S1", "ok")), msg("s2", body("S2", "ok"))))
		check(t, b, got, map[string]float64{
			emf.MetricRecords: 2, emf.MetricStoreErrors: 2, emf.MetricStoreRequests: 2, emf.MetricFailed: 2,
		}, 0, nil)
	})

	t.Run("completion unrecorded", func(t *testing.T) {
		b.store.SetFault(func(op string) error {
			if op == memstore.OpComplete {
				return errors.New("throttled")
			}
			return nil
		})
		defer b.store.SetFault(nil)
		got := b.invoke(t, ctx, primary, batch(msg("u1", body("U", "ok"))))
		check(t, b, got, map[string]float64{
			emf.MetricRecords: 1, emf.MetricHandlerRuns: 1, emf.MetricCompletionsUnrecorded: 1,
			emf.MetricStoreErrors: 1, emf.MetricStoreRequests: 5, // claim + 4 tries to complete
		}, 1, nil)
	})
}

func TestHandlerLatencyIsMillisecondsPerRun(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	h := emf.Hook(emf.WithEmitter(emf.NewWriter(&out)), emf.WithClock(func() time.Time { return at }), emf.WithDimensions())
	h(&lambdaidem.InvocationReport{Records: []lambdaidem.RecordReport{
		{Outcome: lambdaidem.OutcomeProcessed, Acked: true, HandlerRan: true, HandlerDuration: 1500 * time.Microsecond},
		{Outcome: lambdaidem.OutcomeDuplicate, Acked: true},
		{Outcome: lambdaidem.OutcomeFailed, HandlerRan: true, HandlerDuration: 2 * time.Second},
	}, Failed: 1})
	e := parse(t, lines(t, out.Bytes())[0])
	if diff := cmp.Diff([]float64{1.5, 2000}, e.vals[emf.MetricHandlerLatency]); diff != "" {
		t.Fatalf("latencies (-want +got):\n%s", diff)
	}
}

// A record whose visibility change failed is counted, whatever its
// outcome: it comes back on the queue's timeout, not when it asked to.
func TestFailedVisibilityChangesAreCounted(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	h := emf.Hook(emf.WithEmitter(emf.NewWriter(&out)), emf.WithClock(func() time.Time { return at }), emf.WithDimensions())
	h(&lambdaidem.InvocationReport{Records: []lambdaidem.RecordReport{
		{Outcome: lambdaidem.OutcomeFailed, HandlerRan: true, VisibilityErr: errors.New("AccessDenied")},
		{Outcome: lambdaidem.OutcomeInProgress, VisibilityErr: errors.New("ReceiptHandleIsInvalid")},
		{Outcome: lambdaidem.OutcomeFailed, HandlerRan: true},
	}, Failed: 3})
	e := parse(t, lines(t, out.Bytes())[0])
	if got := e.vals[emf.MetricVisibilityFailures]; len(got) != 1 || got[0] != 2 {
		t.Fatalf("%s = %v, want [2]", emf.MetricVisibilityFailures, got)
	}
}

func TestManyHandlerRunsSpreadLatencyOverEvents(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	h := emf.Hook(emf.WithEmitter(emf.NewWriter(&out)), emf.WithClock(func() time.Time { return at }), emf.WithDimensions())
	r := &lambdaidem.InvocationReport{}
	for i := range 250 {
		r.Records = append(r.Records, lambdaidem.RecordReport{Outcome: lambdaidem.OutcomeProcessed, Acked: true,
			HandlerRan: true, HandlerDuration: time.Duration(i) * time.Millisecond})
	}
	h(r)
	ls := lines(t, out.Bytes())
	got := collect(t, ls, map[string]string{}, "")
	if len(ls) != 3 || len(got[emf.MetricHandlerLatency]) != 250 || got[emf.MetricRecords][0] != 250 || len(got[emf.MetricRecords]) != 1 {
		t.Fatalf("%d events; %d latencies; Records %v", len(ls), len(got[emf.MetricHandlerLatency]), got[emf.MetricRecords])
	}
}

// By default an event carries only the counts that are not zero; an
// invocation without records writes nothing. WithAllMetrics carries every
// count, zeros included.
func TestOnlyNonZeroMetricsByDefault(t *testing.T) {
	t.Parallel()
	report := &lambdaidem.InvocationReport{Records: []lambdaidem.RecordReport{
		{Outcome: lambdaidem.OutcomeDuplicate, Acked: true, StoreCalls: 1},
	}}
	for _, all := range []bool{false, true} {
		var out bytes.Buffer
		opts := []emf.Option{emf.WithEmitter(emf.NewWriter(&out)), emf.WithClock(func() time.Time { return at }), emf.WithDimensions()}
		if all {
			opts = append(opts, emf.WithAllMetrics())
		}
		h := emf.Hook(opts...)
		h(report)
		e := parse(t, lines(t, out.Bytes())[0])
		want := map[string][]float64{}
		for name, v := range counts(map[string]float64{emf.MetricRecords: 1, emf.MetricDuplicatesSkipped: 1, emf.MetricStoreRequests: 1}, all) {
			want[name] = []float64{v}
		}
		if diff := cmp.Diff(want, e.vals); diff != "" {
			t.Fatalf("all=%v: values (-want +got):\n%s", all, diff)
		}
		out.Reset()
		h(&lambdaidem.InvocationReport{})
		if got := len(lines(t, out.Bytes())); all && got != 1 || !all && got != 0 {
			t.Fatalf("all=%v: an empty invocation wrote %d lines: %q", all, got, out.String())
		}
	}
}

// Not parallel: it sets the environment.
func TestDefaultDimensionsAndProperties(t *testing.T) {
	t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "orders-fn")
	var out bytes.Buffer
	h := emf.Hook(emf.WithEmitter(emf.NewWriter(&out)), emf.WithClock(func() time.Time { return at }),
		emf.WithIdempotencyNamespace(idemNS), emf.WithProperties(map[string]any{"version": "v1"}))
	h(&lambdaidem.InvocationReport{Records: []lambdaidem.RecordReport{{Outcome: lambdaidem.OutcomeProcessed, Acked: true}}})
	e := parse(t, lines(t, out.Bytes())[0])
	if diff := cmp.Diff([][]string{{"FunctionName", "Namespace"}}, e.doc.AWS.CloudWatchMetrics[0].Dimensions); diff != "" {
		t.Fatalf("dimension set (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(baseDims, e.dims); diff != "" {
		t.Fatalf("dimensions (-want +got):\n%s", diff)
	}
	if string(e.root["version"]) != `"v1"` {
		t.Fatalf("version property %s", e.root["version"])
	}

	t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "")
	out.Reset()
	emf.Hook(emf.WithEmitter(emf.NewWriter(&out)), emf.WithClock(func() time.Time { return at }))(&lambdaidem.InvocationReport{
		Records: []lambdaidem.RecordReport{{Outcome: lambdaidem.OutcomeProcessed, Acked: true}}})
	if got := parse(t, lines(t, out.Bytes())[0]).doc.AWS.CloudWatchMetrics[0].Dimensions; !cmp.Equal([][]string{{}}, got) {
		t.Fatalf("outside Lambda without a namespace: dimensions %v, want one empty set", got)
	}
}

func TestHookRefusesBadOptionsAtConstruction(t *testing.T) {
	t.Parallel()
	var dims []emf.Dimension
	for i := range emf.MaxDimensions - 1 {
		dims = append(dims, emf.Dimension{Name: "D" + strings.Repeat("x", i), Value: "v"})
	}
	emf.Hook(emf.WithEmitter(emf.NewWriter(io.Discard)), emf.WithDimensions(dims...)) // 29 + Reason fits
	for _, tc := range []struct {
		name string
		opt  emf.Option
	}{
		{"30 dimensions leave no room for Reason", emf.WithDimensions(append(dims, emf.Dimension{Name: "E", Value: "v"})...)},
		{"a dimension named Reason", emf.WithDimensions(emf.Dimension{Name: "Reason", Value: "v"})},
		{"an AWS namespace", emf.WithNamespace("AWS/Lambda")},
		{"a property named like a metric", emf.WithProperties(map[string]any{"Records": 1})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				if recover() == nil {
					t.Fatal("Hook did not panic")
				}
			}()
			emf.Hook(emf.WithEmitter(emf.NewWriter(io.Discard)), tc.opt)
		})
	}
}

type failingEmitter struct{}

func (failingEmitter) Emit(context.Context, emf.MetricSet) error { return errors.New("disk full") }

func TestEmitFailureIsLoggedNotFatal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var logs bytes.Buffer
	h := lambdaidem.SQS(b.store, b.handle, b.opts(lambdaidem.WithInvocationHook(emf.Hook(
		emf.WithEmitter(failingEmitter{}),
		emf.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))),
	)))...)
	resp, err := h(context.Background(), batch(msg("m1", `{"id":"1","do":"ok"}`)))
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("invocation failed because metrics did: %v %+v", err, resp)
	}
	if !strings.Contains(logs.String(), "disk full") {
		t.Fatalf("emit error not logged: %q", logs.String())
	}
}

func TestHookTagsEventsWithTheInvocationsRequestID(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	h := emf.Hook(emf.WithEmitter(emf.NewWriter(&buf)), emf.WithClock(func() time.Time { return time.Unix(1700000000, 0) }))
	h(&lambdaidem.InvocationReport{RequestID: "req-42", Records: []lambdaidem.RecordReport{{Outcome: lambdaidem.OutcomeProcessed, Acked: true}}})
	var ev map[string]any
	if err := json.Unmarshal(bytes.Split(buf.Bytes(), []byte("\n"))[0], &ev); err != nil {
		t.Fatal(err)
	}
	if ev["requestId"] != "req-42" {
		t.Fatalf("requestId %v, want req-42", ev["requestId"])
	}
}
