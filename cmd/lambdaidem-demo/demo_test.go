package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lambdaidem/go-lambdaidem/cmd/internal/harness"
	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// TestDemo runs the whole demo in process against the local services, with
// a smaller workload and shorter timeouts than `make demo`, and checks the
// invariants: nothing lost, no duplicate effect, the poison order in the
// DLQ with its reason. Counts that depend on timing (redeliveries,
// duplicates held back) are not asserted.
func TestDemo(t *testing.T) {
	t.Parallel()
	opts := DefaultOptions()
	opts.Stack = harness.StackFromEnv()
	opts.Stack.DynamoDBEndpoint = testenv.Endpoint(t, testenv.DynamoDBEndpointVar)
	opts.Stack.SQSEndpoint = testenv.Endpoint(t, testenv.SQSEndpointVar)
	// 12 plain orders: o-005 and o-010 twice, o-012 twice at once and once
	// late; plus the slow, poison, retry and crash orders.
	opts.Workload = NewWorkload(12, 2*time.Second)
	opts.Visibility = time.Second
	// Room for a loaded machine: an invocation killed at its deadline after
	// an effect and before its completion would be a real duplicate.
	opts.FunctionTimeout = 8 * time.Second
	opts.MaxConcurrency = 2
	opts.Progress = 0
	out := &testenv.Buffer{}
	opts.Out = out
	opts.FunctionLog = nil

	// The run waits as long as it makes progress; this only bounds a hang.
	s, err := Run(testenv.Context(t), opts)
	if err != nil {
		t.Fatalf("Run: %v\noutput:\n%s", err, out)
	}
	var summary strings.Builder
	s.Print(&summary)
	t.Log(summary.String())

	if !s.OK() {
		t.Errorf("violations: %q", s.Violations)
	}
	w := opts.Workload
	if s.Sent != w.Sends() {
		t.Errorf("Sent = %d, want %d", s.Sent, w.Sends())
	}
	if s.UniqueOrders != len(w.Messages) {
		t.Errorf("UniqueOrders = %d, want %d", s.UniqueOrders, len(w.Messages))
	}
	// Every order but the poison one has exactly one effect; the poison
	// one has none and one DLQ message.
	if want := len(w.Messages) - 1; s.Effects != want {
		t.Errorf("Effects = %d, want %d", s.Effects, want)
	}
	for _, m := range Modes {
		if ms := s.PerMode[m]; ms.Orders == 0 || ms.ExactlyOne != ms.Orders {
			t.Errorf("%s function: %d of %d orders with exactly one effect", m, ms.ExactlyOne, ms.Orders)
		}
	}
	if tx := s.PerMode[ModeTransactional]; tx.Orders != TransactionalOrders+1 {
		t.Errorf("transactional orders = %d, want %d", tx.Orders, TransactionalOrders+1)
	}
	// The DLQ holds the poison order only. Usually one copy; a second when
	// the function sent it again, as any SQS producer may: its SDK retried
	// a send whose response was lost, or a store call that timed out left
	// the dead-letter mark unwritten and the next delivery sent a spare.
	// PoisonDeadLettered (checked by OK) says the copies are the poison
	// order's, with its reason.
	if got := s.DeadLettered[string(idemstore.ReasonPoison)]; got < 1 || len(s.DeadLettered) != 1 {
		t.Errorf("DeadLettered = %v, want poison only", s.DeadLettered)
	}
	// Each crash order (before the effect in plain mode, after it in
	// transactional mode) crashes on its first attempt, once. A loaded
	// machine can end that attempt before its handler runs (a store call
	// timed out, or the invocation did), and the order then completes on
	// a later attempt without a crash: fewer crashes only with such an
	// ending in the crash orders' outcomes or a timeout.
	var crashStoreErrors bool
	for _, r := range s.Rows {
		if (r.Scenario == ScenarioCrash || r.Scenario == ScenarioCrashAfter) && strings.Contains(r.Outcomes, string(lambdaidem.OutcomeStoreError)) {
			crashStoreErrors = true
		}
	}
	if s.Crashes > 2 || s.Crashes < 2 && !crashStoreErrors && s.Timeouts == 0 {
		t.Errorf("Crashes = %d, want 2 (fewer only after a store error or a timeout)", s.Crashes)
	}
	// Every claim is a handler run: each crashed one and the retry order's
	// two failures come on top of one per effect.
	if want := s.Effects + s.Crashes + 2; s.HandlerRuns < want {
		t.Errorf("HandlerRuns = %d, want at least %d", s.HandlerRuns, want)
	}
	if !strings.Contains(summary.String(), "transactional") {
		t.Error("the summary does not show the transactional function")
	}
	// Producer copies beyond the first never run the handler: they are
	// suppressed (possibly after being held back while the first ran).
	if want := s.Sent - s.UniqueOrders; s.DuplicatesSuppressed < want {
		t.Errorf("DuplicatesSuppressed = %d, want at least %d", s.DuplicatesSuppressed, want)
	}
}

func TestNewWorkload(t *testing.T) {
	t.Parallel()
	w := NewWorkload(48, 5*time.Second)
	// 52 for the plain function; 8 plus the crash for the transactional
	// one, whose even orders are sent twice.
	if got, want := len(w.Messages), 52+9; got != want {
		t.Errorf("orders = %d, want %d", got, want)
	}
	if got, want := w.Sends(), 69+13; got != want {
		t.Errorf("messages = %d, want %d", got, want)
	}
	if again := NewWorkload(48, 5*time.Second); fmt.Sprint(again) != fmt.Sprint(w) {
		t.Error("NewWorkload is not deterministic")
	}
	for _, tc := range []struct {
		id   string
		body string
	}{
		{"o-001", `{"order_id":"o-001"}`},
		{"o-slow", `{"order_id":"o-slow","sleep_ms":5000}`},
		{"o-poison", `{"order_id":"o-poison","poison":true}`},
		{"o-retry", `{"order_id":"o-retry","fail_times":2}`},
		{"o-crash", `{"order_id":"o-crash","crash":"before_effect","crash_attempts":[1]}`},
		{"t-crash", `{"order_id":"t-crash","crash":"after_effect","crash_attempts":[1]}`},
		{"t-002", `{"order_id":"t-002"}`},
	} {
		o, ok := w.Find(tc.id)
		if !ok {
			t.Errorf("order %s missing", tc.id)
			continue
		}
		if got := o.Body(harness.OrdersKeyField); got != tc.body {
			t.Errorf("%s body = %s, want %s", tc.id, got, tc.body)
		}
	}
	o12, _ := w.Find("o-012")
	o05, _ := w.Find("o-005")
	if o12.Copies != 2 || o12.LateCopies != 1 || o05.Copies != 2 || o05.LateCopies != 0 {
		t.Errorf("copies: o-012 %d+%d, o-005 %d+%d; want 2+1 and 2+0", o12.Copies, o12.LateCopies, o05.Copies, o05.LateCopies)
	}
}

// TestNarrator feeds function log lines through the harness's observer and
// checks what the demo tells of them: the special orders' moments, not the
// plain ones'.
func TestNarrator(t *testing.T) {
	t.Parallel()
	h, err := harness.New(harness.Config{Stack: harness.Stack{DynamoDBEndpoint: "http://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	n := narrate(h, harness.Workload{Messages: []harness.Message{
		{Key: "o-1", Scenario: string(ScenarioPlain)}, {Key: "o-slow", Scenario: string(ScenarioSlow)},
	}})
	lines := strings.Join([]string{
		`{"level":"DEBUG","message":"lambdaidem: record processed","key":"o-1","outcome":"processed","attempt":1}`,
		`{"level":"INFO","message":"lambdaidem: record in_progress","key":"o-slow","outcome":"in_progress","attempt":1}`,
		`{"level":"WARN","message":"crashing on purpose","order_id":"o-1","point":"before_effect","attempt":1}`,
	}, "\n") + "\n"
	if _, err := h.Obs.Output(nil).Write([]byte(lines)); err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	ev := n.events
	n.mu.Unlock()
	if len(ev) != 1 || !strings.Contains(ev[0].text, "o-slow") {
		t.Errorf("events = %v, want one about o-slow", ev)
	}
}

func TestRunWithoutEndpoints(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", "")
	t.Setenv("AWS_ENDPOINT_URL_SQS", "")
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), nil, &stdout, &stderr); code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
	if !strings.Contains(stderr.String(), "make demo") {
		t.Errorf("stderr does not say how to run it: %q", stderr.String())
	}
}
