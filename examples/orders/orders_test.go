package main

import (
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/examples/internal/esm"
	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

// bundle is what a test needs: the function wired to its own tables and
// queues on the local services.
type bundle struct {
	cfg Config
	db  *dynamodb.Client
	// resends counts the copies the SDK's retried sends may have added.
	resends *testenv.Resends
	queue   esm.Queue
	dlq     esm.Queue
	handler esm.Handler
	exits   chan int
	mu      sync.Mutex
	reports []lambdaidem.RecordReport
}

func setup(t *testing.T, maxAttempts int) *bundle {
	t.Helper()
	return setupMode(t, maxAttempts, EffectModePlain)
}

// setupMode is setup with an EFFECT_MODE.
func setupMode(t *testing.T, maxAttempts int, mode string) *bundle {
	t.Helper()
	t.Parallel()
	// DynamoDB Local sends CRC32 headers that do not match some error
	// responses; the check protects nothing on loopback.
	db := testenv.DynamoDB(t, dynamo.ChecksumsOnAWSOnly())
	sq, resends := testenv.SQSWithResends(t)
	b := &bundle{db: db, resends: resends, exits: make(chan int, 10)}
	b.queue = esm.NewQueue(t, sq, "orders", false)
	b.dlq = esm.NewQueue(t, sq, "orders-dlq", false)
	b.cfg = Config{
		IdempotencyTable: esm.IdempotencyTable(t, db),
		EffectsTable:     esm.EffectsTable(t, db),
		Namespace:        DefaultNamespace,
		DLQURL:           b.dlq.URL,
		MaxAttempts:      maxAttempts,
		EffectMode:       mode,
	}
	b.handler = NewHandler(b.cfg, Deps{
		DynamoDB: db,
		SQS:      sq,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Exit:     func(code int) { b.exits <- code },
	}, lambdaidem.WithInvocationHook(func(r *lambdaidem.InvocationReport) {
		b.mu.Lock()
		b.reports = append(b.reports, r.Records...)
		b.mu.Unlock()
	}))
	return b
}

// effects returns the effect rows per order_id.
func (b *bundle) effects(t *testing.T) map[string][]map[string]dbtypes.AttributeValue {
	t.Helper()
	out := map[string][]map[string]dbtypes.AttributeValue{}
	for _, it := range esm.Scan(t, b.db, b.cfg.EffectsTable) {
		out[esm.Str(it, attrOrderID)] = append(out[esm.Str(it, attrOrderID)], it)
	}
	return out
}

// outcomes counts the records' outcomes over every invocation so far.
func (b *bundle) outcomes() map[lambdaidem.Outcome]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := map[lambdaidem.Outcome]int{}
	for _, r := range b.reports {
		n[r.Outcome]++
	}
	return n
}

func TestDuplicatesHaveOneEffect(t *testing.T) {
	b := setup(t, 0)
	// A producer sends each order three times (three message IDs), and
	// the copies arrive in one batch, so they also race for the key.
	for range 3 {
		b.queue.Send(t, `{"order_id":"o-1"}`, "", "")
		b.queue.Send(t, `{"order_id":"o-2"}`, "", "")
	}
	st := b.queue.Drain(t, b.handler, 10)

	eff := b.effects(t)
	for _, id := range []string{"o-1", "o-2"} {
		if len(eff[id]) != 1 {
			t.Errorf("order %s: %d effect rows, want 1: %v", id, len(eff[id]), eff[id])
		}
	}
	if got := b.outcomes()[lambdaidem.OutcomeProcessed]; got != 2 {
		t.Errorf("processed %d records, want 2 (outcomes %v)", got, b.outcomes())
	}
	// Drain left the queue empty. SQS (and its emulator) may hand out a
	// message more than once, so the deletes are not counted exactly.
	if st.Deleted < 6 {
		t.Errorf("deleted %d messages, want at least the 6 sent: %+v", st.Deleted, st)
	}
	if n := b.dlq.Count(t); n != 0 {
		t.Errorf("DLQ holds %d messages, want 0", n)
	}
}

func TestTransactionalDuplicatesHaveOneEffect(t *testing.T) {
	b := setupMode(t, 0, EffectModeTransactional)
	for range 3 {
		b.queue.Send(t, `{"order_id":"t-1"}`, "", "")
		b.queue.Send(t, `{"order_id":"t-2"}`, "", "")
	}
	b.queue.Drain(t, b.handler, 10)
	eff := b.effects(t)
	for _, id := range []string{"t-1", "t-2"} {
		if len(eff[id]) != 1 {
			t.Errorf("order %s: %d effect rows, want 1: %v", id, len(eff[id]), eff[id])
		}
	}
	if got := b.outcomes()[lambdaidem.OutcomeProcessed]; got != 2 {
		t.Errorf("processed %d records, want 2 (outcomes %v)", got, b.outcomes())
	}
}

// TestCrashAfterEffect contrasts the modes on a crash after the effect and
// before the completion is recorded. In process, Exit returns and the
// record fails, which to the library is the same as a process that died:
// no completion, a retry. Plain mode wrote its row before the crash and
// writes another on the retry: the gap this mode leaves, shown here so that
// the contrast is tested, not only told. Transactional mode had only
// prepared its row; the retry commits the one row with the completion.
func TestCrashAfterEffect(t *testing.T) {
	for _, c := range []struct {
		mode     string
		attempts []int // attempts of the effect rows
	}{
		{EffectModePlain, []int{1, 2}},
		{EffectModeTransactional, []int{2}},
	} {
		t.Run(c.mode, func(t *testing.T) {
			b := setupMode(t, 0, c.mode)
			b.queue.Send(t, `{"order_id":"a-1","crash":"after_effect"}`, "", "")
			b.queue.Drain(t, b.handler, 10)
			if got := len(b.exits); got != 1 {
				t.Fatalf("%d crashes, want 1", got)
			}
			var attempts []int
			for _, r := range b.effects(t)["a-1"] {
				attempts = append(attempts, esm.Num(r, attrAttempt))
			}
			slices.Sort(attempts)
			if !slices.Equal(attempts, c.attempts) {
				t.Errorf("effect rows written on attempts %v, want %v", attempts, c.attempts)
			}
		})
	}
}

func TestRedeliveryHasOneEffect(t *testing.T) {
	b := setup(t, 0)
	b.queue.Send(t, `{"order_id":"o-1"}`, "", "")
	ev := b.queue.ReceiveSome(t, 10)
	if len(ev.Records) != 1 {
		t.Fatalf("received %d records, want 1", len(ev.Records))
	}
	// SQS may deliver the very same message again (its visibility ran out,
	// or an invocation failed after the effect): run the event twice.
	for i := range 2 {
		resp, err := b.handler(context.Background(), ev)
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("invocation %d: failures %v, error %v", i+1, resp.BatchItemFailures, err)
		}
	}
	if eff := b.effects(t); len(eff["o-1"]) != 1 {
		t.Errorf("%d effect rows, want 1: %v", len(eff["o-1"]), eff["o-1"])
	}
	if got := b.outcomes(); got[lambdaidem.OutcomeProcessed] != 1 || got[lambdaidem.OutcomeDuplicate] != 1 {
		t.Errorf("outcomes %v, want one processed and one duplicate", got)
	}
}

func TestPoisonGoesToDLQWithReason(t *testing.T) {
	b := setup(t, 0)
	body := `{"order_id":"p-1","poison":true}`
	id := b.queue.Send(t, body, "", "")
	b.queue.Drain(t, b.handler, 10)

	// One copy, or more if the SDK retried a send (the order's or the
	// dead letter's): then the copy of the order's own message counts.
	msgs := b.dlq.Collect(t, 1)
	if n, most := len(msgs), 1+b.resends.Allowed(b.dlq.URL); n < 1 || n > most {
		t.Fatalf("DLQ holds %d messages, want 1 (at most %d with the SDK's resent copies)", n, most)
	}
	var dl sqsqueue.DeadLetterMessage
	for _, msg := range msgs {
		d, err := sqsqueue.Parse(msg)
		if err != nil {
			t.Fatalf("parse dead letter: %v", err)
		}
		if d.Metadata.MessageID == id {
			dl = d
		}
	}
	m := dl.Metadata
	if m.Reason != lambdaidem.ReasonPoison || m.Attempts != 1 || m.MessageID != id ||
		m.SourceARN != b.queue.ARN || m.Key != "p-1" || m.Namespace != DefaultNamespace {
		t.Errorf("metadata %+v: want reason poison, attempt 1, message %s from %s, key p-1 in %s",
			m, id, b.queue.ARN, DefaultNamespace)
	}
	if !strings.Contains(m.Error, "marked poison") {
		t.Errorf("error text %q does not say why", m.Error)
	}
	if dl.Body != body {
		t.Errorf("dead letter body %q, want the original %q", dl.Body, body)
	}
	if eff := b.effects(t); len(eff) != 0 {
		t.Errorf("effects %v, want none", eff)
	}
}

func TestReusedOrderIDIsAConflict(t *testing.T) {
	b := setup(t, 0)
	b.queue.Send(t, `{"order_id":"x-1"}`, "", "")
	b.queue.Drain(t, b.handler, 10)
	// The same order_id with another body is not "already done": it is
	// dead-lettered as a conflict and the first order's effect stays.
	id := b.queue.Send(t, `{"order_id":"x-1","amount":2}`, "", "")
	b.queue.Drain(t, b.handler, 10)

	if eff := b.effects(t); len(eff["x-1"]) != 1 {
		t.Errorf("%d effect rows, want 1: %v", len(eff["x-1"]), eff["x-1"])
	}
	msgs := b.dlq.Collect(t, 1)
	if len(msgs) != 1 {
		t.Fatalf("DLQ holds %d messages, want 1", len(msgs))
	}
	dl, err := sqsqueue.Parse(msgs[0])
	if err != nil || dl.Metadata.Reason != lambdaidem.ReasonKeyConflict || dl.Metadata.MessageID != id {
		t.Errorf("dead letter %+v, %v; want reason key_conflict for message %s", dl.Metadata, err, id)
	}
}

func TestFailuresThenSuccessHaveOneEffect(t *testing.T) {
	b := setup(t, 5)
	b.queue.Send(t, `{"order_id":"f-1","fail_times":2}`, "", "")
	b.queue.Drain(t, b.handler, 10)

	rows := b.effects(t)["f-1"]
	if len(rows) != 1 {
		t.Fatalf("%d effect rows, want 1: %v", len(rows), rows)
	}
	if a := esm.Num(rows[0], attrAttempt); a != 3 {
		t.Errorf("effect written on attempt %d, want 3", a)
	}
	if got := b.outcomes(); got[lambdaidem.OutcomeFailed] != 2 || got[lambdaidem.OutcomeProcessed] != 1 {
		t.Errorf("outcomes %v, want two failed and one processed", got)
	}
	if n := b.dlq.Count(t); n != 0 {
		t.Errorf("DLQ holds %d messages, want 0", n)
	}
}

func TestTooManyFailuresGoToDLQ(t *testing.T) {
	b := setup(t, 3)
	b.queue.Send(t, `{"order_id":"f-2","fail_times":10}`, "", "")
	b.queue.Drain(t, b.handler, 10)

	msgs := b.dlq.Collect(t, 1)
	if len(msgs) != 1 {
		t.Fatalf("DLQ holds %d messages, want 1", len(msgs))
	}
	dl, err := sqsqueue.Parse(msgs[0])
	if err != nil {
		t.Fatalf("parse dead letter: %v", err)
	}
	if dl.Metadata.Reason != lambdaidem.ReasonMaxAttempts || dl.Metadata.Attempts != 3 ||
		!strings.Contains(dl.Metadata.Error, "simulated failure") {
		t.Errorf("metadata %+v: want max_attempts after 3 attempts with the simulated failure", dl.Metadata)
	}
	if eff := b.effects(t); len(eff) != 0 {
		t.Errorf("effects %v, want none", eff)
	}
}

func TestCrashPointsAndAttempts(t *testing.T) {
	// In process, Exit returns instead of ending the process; the record
	// then fails, and the retry shows which attempts crash.
	cases := []struct {
		body        string
		exits       int
		wantAttempt int
	}{
		{`{"order_id":"c-1","crash":"before_effect"}`, 1, 2},
		{`{"order_id":"c-2","crash":"before_effect","crash_attempts":[1,2]}`, 2, 3},
	}
	for _, c := range cases {
		t.Run(c.body, func(t *testing.T) {
			b := setup(t, 0)
			b.queue.Send(t, c.body, "", "")
			b.queue.Drain(t, b.handler, 10)
			if got := len(b.exits); got != c.exits {
				t.Errorf("%d crashes, want %d", got, c.exits)
			}
			for range len(b.exits) {
				if code := <-b.exits; code != CrashExitCode {
					t.Errorf("exit code %d, want %d", code, CrashExitCode)
				}
			}
			var rows []map[string]dbtypes.AttributeValue
			for _, r := range b.effects(t) {
				rows = append(rows, r...)
			}
			if len(rows) != 1 || esm.Num(rows[0], attrAttempt) != c.wantAttempt {
				t.Errorf("effect rows %v, want one on attempt %d", rows, c.wantAttempt)
			}
		})
	}
}

func TestSleepEndsWithTheDeadline(t *testing.T) {
	b := setup(t, 0)
	b.queue.Send(t, `{"order_id":"s-1","sleep_ms":600000}`, "", "")
	ev := b.queue.ReceiveSome(t, 1)
	// A short invocation: the library ends the handler's context a margin
	// before the deadline, and the sleeping handler must give up then.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, _ := b.handler(ctx, ev)
	if len(resp.BatchItemFailures) != 1 {
		t.Fatalf("failures %v, want the sleeping record", resp.BatchItemFailures)
	}
	var got error
	b.mu.Lock()
	for _, r := range b.reports {
		got = r.Err
	}
	b.mu.Unlock()
	if !errors.Is(got, context.DeadlineExceeded) && !errors.Is(got, context.Canceled) {
		t.Errorf("record error %v, want the context's end", got)
	}
	if eff := b.effects(t); len(eff) != 0 {
		t.Errorf("effects %v, want none", eff)
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	full := []string{EnvIdempotencyTable, "idem", EnvEffectsTable, "effects"}
	cases := []struct {
		name string
		env  func(string) string
		want Config
		err  bool
	}{
		{"defaults", env(full...), Config{IdempotencyTable: "idem", EffectsTable: "effects", Namespace: DefaultNamespace, EffectMode: EffectModePlain}, false},
		{"everything", env(append(full, EnvNamespace, "shop", EnvDLQURL, "http://q/dlq", EnvMaxAttempts, "7",
			EnvEffectMode, "transactional", EnvFunctionName, "orders-fn", EnvStoreAttemptTimeout, "10s")...),
			Config{IdempotencyTable: "idem", EffectsTable: "effects", Namespace: "shop", DLQURL: "http://q/dlq", MaxAttempts: 7,
				EffectMode: EffectModeTransactional, FunctionName: "orders-fn", StoreAttemptTimeout: 10 * time.Second}, false},
		{"traces", env(append(full, EnvTracesExporter, "console")...),
			Config{IdempotencyTable: "idem", EffectsTable: "effects", Namespace: DefaultNamespace, EffectMode: EffectModePlain, TracesExporter: TracesConsole}, false},
		{"no traces", env(append(full, EnvTracesExporter, "none")...),
			Config{IdempotencyTable: "idem", EffectsTable: "effects", Namespace: DefaultNamespace, EffectMode: EffectModePlain}, false},
		{"unknown exporter", env(append(full, EnvTracesExporter, "zipkin")...), Config{}, true},
		{"bad effect mode", env(append(full, EnvEffectMode, "atomic")...), Config{}, true},
		{"no tables", env(), Config{}, true},
		{"bad attempts", env(append(full, EnvMaxAttempts, "0")...), Config{}, true},
		{"attempts not a number", env(append(full, EnvMaxAttempts, "five")...), Config{}, true},
		{"attempt timeout not a duration", env(append(full, EnvStoreAttemptTimeout, "10")...), Config{}, true},
		{"attempt timeout not positive", env(append(full, EnvStoreAttemptTimeout, "0s")...), Config{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ConfigFromEnv(c.env)
			if c.err {
				if !errors.Is(err, ErrConfig) {
					t.Errorf("error %v, want ErrConfig", err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Errorf("got %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

// TestMetricsForTheAlarms: the function prints EMF lines whose totals
// event (the one with Records) is under exactly the dimension set
// template.yaml's alarms select: FunctionName alone. A metric with one
// more dimension is another metric. The alarmed metrics (LeasesLost,
// StoreErrors) are in that event whenever they are not zero (emf's
// TestEveryMetricAppearsWheneverNotZero); in a healthy run they are zero
// and left out, as the default compact line does.
func TestMetricsForTheAlarms(t *testing.T) {
	b := setup(t, 0)
	cfg := b.cfg
	cfg.FunctionName = "orders-fn"
	var out lockedBuffer
	h := NewHandler(cfg, Deps{
		DynamoDB: b.db,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metrics:  &out,
	})
	b.queue.Send(t, `{"order_id":"m-1"}`, "", "")
	b.queue.Drain(t, h, 10)

	var found bool
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var ev struct {
			AWS struct {
				CloudWatchMetrics []struct {
					Namespace  string
					Dimensions [][]string
					Metrics    []struct{ Name string }
				}
			} `json:"_aws"`
			FunctionName string
			Records      *float64
			LeasesLost   *float64
			StoreErrors  *float64
			Processed    *float64
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("metrics line is not JSON: %v: %s", err, line)
		}
		cw := ev.AWS.CloudWatchMetrics
		if len(cw) != 1 || cw[0].Namespace != "lambdaidem" || len(cw[0].Dimensions) != 1 || len(cw[0].Dimensions[0]) == 0 ||
			cw[0].Dimensions[0][0] != "FunctionName" || ev.FunctionName != "orders-fn" {
			t.Errorf("event %s: want namespace lambdaidem, dimensions starting with FunctionName=orders-fn", line)
			continue
		}
		if ev.Records != nil {
			found = true
			if !slices.Equal(cw[0].Dimensions[0], []string{"FunctionName"}) {
				t.Errorf("totals under dimensions %v, want [FunctionName] as the alarms select", cw[0].Dimensions[0])
			}
			if ev.Processed == nil || *ev.Processed != 1 || ev.LeasesLost != nil || ev.StoreErrors != nil {
				t.Errorf("totals event %s: want Processed 1, and no LeasesLost or StoreErrors (zero in a healthy run)", line)
			}
		}
	}
	if !found {
		t.Fatalf("no totals event (with Records) in %q", out.String())
	}
}

// lockedBuffer is a buffer safe for concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestBuildsForLambda(t *testing.T) {
	t.Parallel()
	checkLambdaBinary(t, esm.Build(t, ".", "linux", "arm64"))
}

// checkLambdaBinary checks that path is a static linux/arm64 executable,
// what provided.al2023 on Graviton runs.
func checkLambdaBinary(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer f.Close()
	if f.Machine != elf.EM_AARCH64 || f.Type != elf.ET_EXEC {
		t.Errorf("%s: machine %v, type %v; want a static EM_AARCH64 executable", path, f.Machine, f.Type)
	}
	if interp := f.Section(".interp"); interp != nil {
		t.Errorf("%s asks for a dynamic loader; want a static binary", path)
	}
}
