package harness_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdaidem/go-lambdaidem/cmd/internal/harness"
	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/localrun"
	"github.com/lambdaidem/go-lambdaidem/producer"
)

func TestBody(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		m    harness.Message
		want string
	}{
		{harness.Message{Key: "o-1"}, `{"order_id":"o-1"}`},
		{harness.Message{Key: "o-2", Poison: true, FailTimes: 2, Sleep: 1500 * time.Millisecond, Crash: "after_effect"},
			`{"order_id":"o-2","poison":true,"fail_times":2,"sleep_ms":1500,"crash":"after_effect","crash_attempts":[1]}`},
		{harness.Message{Key: `q"<`}, `{"order_id":"q\"\u003c"}`},
	} {
		if got := tc.m.Body(harness.OrdersKeyField); got != tc.want {
			t.Errorf("Body = %s, want %s", got, tc.want)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(tc.m.Body("key")), &v); err != nil || v["key"] != tc.m.Key {
			t.Errorf("Body(key) = %s: %v, key %v", tc.m.Body("key"), err, v["key"])
		}
	}
	padded := harness.Message{Key: "k", Size: 1000}.Body("key")
	if len(padded) != 1000 || !json.Valid([]byte(padded)) {
		t.Errorf("a 1000-byte body is %d bytes (valid JSON: %t)", len(padded), json.Valid([]byte(padded)))
	}
}

func TestExpand(t *testing.T) {
	t.Parallel()
	w := harness.Workload{Messages: []harness.Message{
		{Key: "a", Copies: 2, LateCopies: 1}, {Key: "b", Copies: 1}, {Key: "c", Copies: 0, LateCopies: 2},
	}}
	if got := w.Expand(func(m harness.Message) int { return m.Copies }); !slices.Equal(got, []int{0, 0, 1}) {
		t.Errorf("copies = %v", got)
	}
	if got := w.Expand(func(m harness.Message) int { return m.LateCopies }); !slices.Equal(got, []int{0, 2, 2}) {
		t.Errorf("late copies = %v", got)
	}
	if w.Sends() != 6 || !slices.Equal(w.Keys(), []string{"a", "b", "c"}) {
		t.Errorf("sends %d, keys %v", w.Sends(), w.Keys())
	}
	if m, ok := w.Find("b"); !ok || m.Copies != 1 {
		t.Errorf("Find(b) = %+v, %t", m, ok)
	}
}

func TestMix(t *testing.T) {
	t.Parallel()
	x := harness.Mix{Messages: 1000, KeyFormat: "k-%04d", Seed: 7, DuplicateRate: 0.2, DuplicateSpread: 5,
		CrashRate: 0.03, CrashPoints: []string{"a", "b", "c"}, PoisonRate: 0.001, MinPoison: 3, SlowRate: 0.01, Slow: time.Second}
	w := x.Workload()
	if again := x.Workload(); !slices.Equal(w.Order, again.Order) || !slices.Equal(w.Messages, again.Messages) {
		t.Fatal("the same Mix drew two workloads")
	}
	crash, poison, slow, sends := map[string]int{}, 0, 0, map[int]int{}
	for _, m := range w.Messages {
		roles := 0
		if m.Crash != "" {
			crash[m.Crash]++
			roles++
		}
		if m.Poison {
			poison++
			roles++
		}
		if m.Sleep > 0 {
			slow++
			roles++
		}
		if roles > 1 {
			t.Errorf("%s has %d roles", m.Key, roles)
		}
	}
	if crash["a"] != 10 || crash["b"] != 10 || crash["c"] != 10 || poison != 3 || slow != 10 {
		t.Errorf("crashes %v, poison %d, slow %d; want 10 of each point, 3, 10", crash, poison, slow)
	}
	original := -1
	for _, i := range w.Order {
		sends[i]++
		if sends[i] == 1 {
			if i != original+1 {
				t.Fatalf("original %d sent after %d: originals go in key order", i, original)
			}
			original = i
		} else if i < original-x.DuplicateSpread-1 {
			t.Errorf("duplicate of %d sent after original %d, more than the spread later", i, original)
		}
	}
	dups := 0
	for i, m := range w.Messages {
		if sends[i] != m.Copies {
			t.Errorf("%s sent %d times, want %d", m.Key, sends[i], m.Copies)
		}
		if m.Copies == 2 {
			dups++
		}
	}
	if dups != 200 || len(w.Order) != 1200 || w.Sends() != 1200 {
		t.Errorf("%d duplicated, %d sends; want 200, 1200", dups, len(w.Order))
	}
	plain := harness.Mix{Messages: 3, KeyFormat: "e-%d"}.Workload()
	if !slices.Equal(plain.Order, []int{0, 1, 2}) || plain.Messages[2] != (harness.Message{Key: "e-2", Copies: 1}) {
		t.Errorf("a Mix without rates: %+v", plain)
	}
}

// The observer counts the library's record lines, skips metric lines,
// learns keys from the producer's attribute, and counts a message deleted
// twice once.
func TestObserver(t *testing.T) {
	t.Parallel()
	o := harness.NewObserver()
	var mu sync.Mutex
	var seen []string
	o.OnLine = func(l harness.LogLine) {
		mu.Lock()
		seen = append(seen, l.Message)
		mu.Unlock()
	}
	key := func(id, k string) types.Message {
		return types.Message{MessageId: aws.String(id), MessageAttributes: map[string]types.MessageAttributeValue{
			producer.DefaultKeyAttribute: {DataType: aws.String("String"), StringValue: aws.String(k)}}}
	}
	o.Receive([]types.Message{key("m-1", "o-1"), key("m-2", "o-2"), key("m-3", "o-2")})
	if o.InFlight() != 3 || o.KeyOf("m-3") != "o-2" {
		t.Fatalf("in flight %d, key of m-3 %q", o.InFlight(), o.KeyOf("m-3"))
	}
	w := o.Output(nil)
	lines := strings.Join([]string{
		`{"level":"DEBUG","message":"lambdaidem: record processed","key":"o-1","outcome":"processed","attempt":1}`,
		`{"level":"INFO","message":"lambdaidem: record in_progress","key":"o-2","outcome":"in_progress","attempt":1}`,
		`{"level":"DEBUG","message":"lambdaidem: record duplicate","key":"o-1","outcome":"duplicate","attempt":1}`,
		`not JSON at all`,
		`{"message":"effect written","order_id":"o-1"}`,
		// An EMF metric line with members that look like a record line's.
		`{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"lambdaidem","Dimensions":[["FunctionName"]],"Metrics":[{"Name":"Processed","Unit":"Count"}]}]},"FunctionName":"orders","Processed":1,"message":"lambdaidem: record processed","outcome":"processed","key":"o-1"}`,
	}, "\n") + "\n"
	for i := 0; i < len(lines); i += 7 {
		if _, err := w.Write([]byte(lines[i:min(i+7, len(lines))])); err != nil {
			t.Fatal(err)
		}
	}
	o.Invoke(localrun.Invocation{RequestID: "r-1", Outcome: localrun.OutcomeSuccess, MessageIDs: []string{"m-1", "m-2"}, Deleted: []string{"m-1", "m-2"}})
	o.Invoke(localrun.Invocation{RequestID: "r-2", Outcome: localrun.OutcomeCrash, MessageIDs: []string{"m-2", "m-3"}, Deleted: []string{"m-2"}})
	o.Process(localrun.ProcessEvent{Kind: localrun.ProcessStarted, Start: 2})

	s := o.Snapshot()
	if s.Outcomes["processed"] != 1 || s.Outcomes["duplicate"] != 1 || s.Outcomes["in_progress"] != 1 || len(s.Outcomes) != 3 {
		t.Errorf("outcomes = %v", s.Outcomes)
	}
	if s.ByKey["o-1"]["duplicate"] != 1 || s.ByKey["o-2"]["in_progress"] != 1 {
		t.Errorf("by key = %v", s.ByKey)
	}
	if s.OtherLines != 1 || len(seen) != 4 {
		t.Errorf("other lines %d, lines seen %q", s.OtherLines, seen)
	}
	if o.Deleted() != 2 || o.InFlight() != 0 {
		t.Errorf("deleted %d (want 2 distinct), in flight %d", o.Deleted(), o.InFlight())
	}
	if s.Deliveries["o-1"] != 1 || s.Deliveries["o-2"] != 3 || !o.Crashed("o-2") || o.Crashed("o-1") {
		t.Errorf("deliveries %v, crashed o-2 %t, o-1 %t", s.Deliveries, o.Crashed("o-2"), o.Crashed("o-1"))
	}
	if s.Invocations[localrun.OutcomeCrash] != 1 || s.InvocationOutcome["r-2"] != localrun.OutcomeCrash || s.Restarts != 1 {
		t.Errorf("invocations %v, restarts %d", s.Invocations, s.Restarts)
	}
}

func TestTally(t *testing.T) {
	t.Parallel()
	tl := harness.Tally{Effects: map[string]int{"a": 1, "b": 2}, DLQ: map[string][]string{"c": {"poison"}}}
	keys := []string{"a", "b", "c", "d"}
	if got := tl.Lost(keys); !slices.Equal(got, []string{"d"}) {
		t.Errorf("Lost = %v", got)
	}
	if got := tl.Duplicates(keys); len(got) != 1 || got["b"] != 2 {
		t.Errorf("Duplicates = %v", got)
	}
	if got := harness.CountList(nil); got != "-" {
		t.Errorf("CountList(nil) = %q", got)
	}
	if got, want := harness.CountList(map[string]int{"b": 1, "a": 1, "c": 3}), "c 3, a 1, b 1"; got != want {
		t.Errorf("CountList = %q, want %q", got, want)
	}
	if got, want := harness.Sample([]string{"1", "2", "3", "4", "5", "6", "7"}), "1, 2, 3, 4, 5, ... (2 more)"; got != want {
		t.Errorf("Sample = %q, want %q", got, want)
	}
}

func TestLog(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	start := time.Now()
	l := &harness.Log{Out: &b, Start: start, Prefix: "x: "}
	l.PrintAt(start.Add(1500*time.Millisecond), "hello %d", 1)
	(&harness.Log{Out: &b, Prefix: "y: "}).Printf("bare")
	var nilLog *harness.Log
	nilLog.Printf("nothing")
	if got, want := b.String(), "[  1.5s] x: hello 1\ny: bare\n"; got != want {
		t.Errorf("log = %q, want %q", got, want)
	}
}

func TestEvery(t *testing.T) {
	t.Parallel()
	finals := make(chan bool, 100)
	stop := harness.Every(time.Millisecond, func(final bool) { finals <- final })
	<-finals // ticked at least once
	stop()
	stop() // twice is fine
	last := false
	for len(finals) > 0 {
		last = <-finals
	}
	if !last {
		t.Error("stop did not make the final call last")
	}
	harness.Every(0, func(bool) { t.Error("an interval of 0 ticked") })()
}

func TestStackCheck(t *testing.T) {
	t.Parallel()
	s := harness.Stack{DynamoDBEndpoint: "http://127.0.0.1:1"}
	if err := s.Check(false, "p", "t", "./p"); err != nil {
		t.Errorf("DynamoDB alone, SQS not needed: %v", err)
	}
	err := s.Check(true, "lambdaidem-x", "x", "./cmd/lambdaidem-x")
	if err == nil || !strings.Contains(err.Error(), "make x") || !strings.Contains(err.Error(), "go run ./cmd/lambdaidem-x") {
		t.Errorf("Check = %v, want how to run it", err)
	}
	if _, err := harness.New(harness.Config{}); err == nil {
		t.Error("New without an endpoint succeeded")
	}
}

// TestScenario runs the orders example through the whole harness on the
// local stack, as two functions (one on a FIFO queue): three phases (one
// crash; then the rest with a duplicate, a poison key, a 300 KiB body and
// two message groups; then a late copy), and checks what the run left
// behind.
func TestScenario(t *testing.T) {
	stack := harness.StackFromEnv()
	stack.DynamoDBEndpoint = testenv.Endpoint(t, testenv.DynamoDBEndpointVar)
	stack.SQSEndpoint = testenv.Endpoint(t, testenv.SQSEndpointVar)
	if testing.Short() {
		t.Skip("builds examples/orders")
	}
	t.Parallel()
	var log testenv.Buffer
	h, err := harness.New(harness.Config{Stack: stack, Name: "lambdaidem-harness-test", Log: harness.NewLog(&log, ""), WaitTimeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := h.Close(); err != nil {
			t.Error(err)
		}
	}()
	ctx := t.Context()
	bootstrap, err := h.Bootstrap(ctx, harness.OrdersPackage, "")
	if err != nil {
		t.Fatal(err)
	}
	err = h.Start(ctx, bootstrap, harness.Function{
		Name: "orders", KeyField: harness.OrdersKeyField, Effects: true, Debug: true,
		Visibility: time.Second, MaxReceives: 10, FunctionTimeout: 8 * time.Second, MaxConcurrency: 2, PollWait: time.Second,
	}, harness.Function{
		Name: "orders-fifo", Suffix: "-fifo", FIFO: true, KeyField: harness.OrdersKeyField, Effects: true,
		Env: []string{"IDEMPOTENCY_NAMESPACE=orders-fifo"}, FunctionTimeout: 8 * time.Second, PollWait: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(h.QueueURL("orders-fifo"), "-fifo.fifo") {
		t.Errorf("FIFO queue %s", h.QueueURL("orders-fifo"))
	}
	w := harness.Workload{Messages: []harness.Message{
		{Key: "h-crash", Crash: "before_effect", Copies: 1},
		{Key: "h-1", Copies: 1},
		{Key: "h-2", Copies: 2, LateCopies: 1},
		{Key: "h-poison", Poison: true, Copies: 1},
		{Key: "h-big", Size: 300 << 10, Copies: 1},
		{Key: "f-1", Function: "orders-fifo", GroupID: "g1", Copies: 1},
		{Key: "f-2", Function: "orders-fifo", GroupID: "g1", Copies: 1},
		{Key: "f-3", Function: "orders-fifo", GroupID: "g2", Copies: 1},
	}}
	err = h.Play(ctx, w,
		harness.Phase{Name: "crash", Text: "crash first", Sends: w.Expand(func(m harness.Message) int { return min(len(m.Crash), m.Copies) }), Until: harness.UntilCrashed},
		harness.Phase{Name: "main", Sends: w.Expand(func(m harness.Message) int { return m.Copies - min(len(m.Crash), m.Copies) })},
		harness.Phase{Name: "late", Sends: w.Expand(func(m harness.Message) int { return m.LateCopies })},
	)
	if err != nil {
		t.Fatalf("%v\nlog:\n%s", err, log.String())
	}
	if err := h.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	effects, err := h.CountBy(ctx, h.EffectsTable("orders"), "order_id")
	if err != nil {
		t.Fatal(err)
	}
	n, err := h.Count(ctx, h.EffectsTable(""))
	if err != nil {
		t.Fatal(err)
	}
	dlq, err := h.ReadDLQ(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tl := harness.Tally{Effects: effects, DLQ: map[string][]string{}}
	for _, d := range dlq {
		tl.DLQ[d.Key] = append(tl.DLQ[d.Key], string(d.Reason))
	}
	fifo, err := h.CountBy(ctx, h.EffectsTable("orders-fifo"), "order_id")
	if err != nil {
		t.Fatal(err)
	}
	for k, c := range fifo {
		effects[k] += c
	}
	if lost := tl.Lost(w.Keys()); len(lost) > 0 || len(tl.Duplicates(w.Keys())) > 0 || n != 4 || len(fifo) != 3 {
		t.Errorf("lost %v, duplicates %v, %d effects (want 4) and %v in FIFO order; effects %v, DLQ %v", lost, tl.Duplicates(w.Keys()), n, fifo, effects, tl.DLQ)
	}
	if len(dlq) != 1 || !dlq[0].Library || dlq[0].Key != "h-poison" || dlq[0].Reason != "poison" {
		t.Errorf("DLQ = %+v, want h-poison with reason poison", dlq)
	}
	recs, err := harness.ReadRecords(ctx, h.Store(), "orders", w.Keys())
	if err != nil {
		t.Fatal(err)
	}
	// h-crash crashes on attempt 1 and completes on attempt 2; h-1
	// completes on attempt 1. On a loaded machine a store call of the
	// function can time out and end an attempt before its handler runs
	// (store_error), or an invocation can reach its timeout; the next
	// attempt claims again, and h-crash then completes without its crash.
	// Only the lower bounds hold then.
	obs := h.Obs.Snapshot()
	slow := obs.ByKey["h-crash"][string(lambdaidem.OutcomeStoreError)]+obs.ByKey["h-1"][string(lambdaidem.OutcomeStoreError)] > 0 || h.Stats().Timeouts > 0
	crashed := h.Stats().Crashes >= 1 && h.Obs.Crashed("h-crash")
	if !slow && (recs["h-crash"].Attempts != 2 || recs["h-1"].Attempts != 1 || !crashed) ||
		recs["h-crash"].Attempts < 2 || recs["h-1"].Attempts < 1 {
		t.Errorf("attempts: h-crash %d (crashed: %v), h-1 %d; store errors or timeouts: %v", recs["h-crash"].Attempts, crashed, recs["h-1"].Attempts, slow)
	}
	if h.Sent() != 10 {
		t.Errorf("sent %d, want 10", h.Sent())
	}
	if !strings.Contains(log.String(), "crash first") || !strings.Contains(log.String(), "built bootstrap in") {
		t.Errorf("log lacks the phase's line or the build's:\n%s", log.String())
	}
}

// A FIFO queue's redrive would need a FIFO DLQ: Start refuses before it
// makes anything.
func TestFIFORedriveRefused(t *testing.T) {
	t.Parallel()
	h, err := harness.New(harness.Config{Stack: harness.Stack{DynamoDBEndpoint: "http://127.0.0.1:1", SQSEndpoint: "http://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	err = h.Start(t.Context(), "bootstrap", harness.Function{Name: "f", FIFO: true, MaxReceives: 3})
	if err == nil || !strings.Contains(err.Error(), "FIFO DLQ") {
		t.Errorf("Start = %v, want the FIFO DLQ refusal", err)
	}
	if err := h.Close(); err != nil {
		t.Errorf("Close after a refused Start: %v", err)
	}
}

// A wait goes on as long as the run makes progress, past WaitTimeout, and
// gives up only after WaitTimeout without any.
func TestWaitForFollowsProgress(t *testing.T) {
	t.Parallel()
	const stall = 100 * time.Millisecond
	h, err := harness.New(harness.Config{Stack: harness.Stack{DynamoDBEndpoint: "http://127.0.0.1:1"}, WaitTimeout: stall})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	n := 0
	// Every look sees an invocation end, so the run always moves; the
	// condition holds only once three stall bounds have passed.
	err = h.WaitFor(t.Context(), "a slow run", func(context.Context) (bool, error) {
		n++
		h.Obs.Invoke(localrun.Invocation{RequestID: fmt.Sprint(n)})
		return time.Since(start) > 3*stall, nil
	})
	if err != nil {
		t.Fatalf("a run that kept moving: %v", err)
	}
	err = h.WaitFor(t.Context(), "a stalled run", func(context.Context) (bool, error) { return false, nil })
	if !errors.Is(err, harness.ErrWaitTimeout) || !strings.Contains(err.Error(), "a stalled run") {
		t.Fatalf("a run that never moved: %v, want ErrWaitTimeout naming what it waited for", err)
	}
}
