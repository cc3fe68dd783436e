package lambdaidem_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

func TestParallelIdenticalRecordsRunOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var runs atomic.Int32
	h := lambdaidem.SQS(b.store, func(ctx context.Context, m events.SQSMessage) error {
		runs.Add(1)
		return nil
	}, b.opts(lambdaidem.WithKeyJSONField("id"), lambdaidem.WithConcurrency(10))...)
	var recs []events.SQSMessage
	for i := range 10 {
		recs = append(recs, msg(fmt.Sprintf("m%d", i), `{"id":"same"}`))
	}
	var wg sync.WaitGroup
	for range 4 { // four concurrent invocations of the same ten copies
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = h(context.Background(), batch(recs...)) }()
	}
	wg.Wait()
	if n := runs.Load(); n != 1 {
		t.Fatalf("handler ran %d times for one key, want 1", n)
	}
}

func TestCopiesOfAKeyInOneBatchWaitForTheFirst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var mu sync.Mutex
	var reps []*lambdaidem.InvocationReport
	h := lambdaidem.SQS(b.store, b.counting(ok), b.opts(lambdaidem.WithKeyJSONField("id"), reportsOf(&reps, &mu))...)
	resp, err := h(context.Background(), batch(msg("m1", `{"id":"k"}`), msg("m2", `{"id":"j"}`), msg("m3", `{"id":"k"}`)))
	if err != nil {
		t.Fatal(err)
	}
	// m3 is not turned away as "in progress" while m1 runs: it waits, then
	// is skipped as a duplicate of the completed key.
	wantFailed(t, resp)
	if got := reps[0].Records[2].Outcome; got != lambdaidem.OutcomeDuplicate {
		t.Fatalf("copy's outcome %s, want duplicate", got)
	}
	if b.calls.total() != 2 {
		t.Fatalf("handler ran %d times, want 2", b.calls.total())
	}
}

// Batches of up to 16 records find a record's group among the groups so
// far, larger ones through an index: both group copies of a key (standard
// queue) and message groups (FIFO) alike, and a record with no key stays
// a group of its own.
func TestGroupsAreFoundInSmallAndLargeBatches(t *testing.T) {
	t.Parallel()
	for _, n := range []int{6, 16, 17, 40} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			var mu sync.Mutex
			var reps []*lambdaidem.InvocationReport
			var order []string
			h := lambdaidem.SQS(b.store, b.counting(func(_ context.Context, m events.SQSMessage) error {
				mu.Lock()
				order = append(order, m.MessageId)
				mu.Unlock()
				return nil
			}), b.opts(lambdaidem.WithKeyJSONField("id"), lambdaidem.WithConcurrency(4), reportsOf(&reps, &mu))...)
			var recs []events.SQSMessage
			for i := range n - 1 {
				recs = append(recs, msg(fmt.Sprintf("m%d", i), fmt.Sprintf(`{"id":"k%d"}`, i%5)))
			}
			recs = append(recs, msg("nokey", `{}`))
			resp, err := h(context.Background(), batch(recs...))
			if err != nil {
				t.Fatal(err)
			}
			wantFailed(t, resp, "nokey")
			for i, r := range reps[0].Records[:n-1] {
				want := lambdaidem.OutcomeDuplicate
				if i < 5 {
					want = lambdaidem.OutcomeProcessed
				}
				if r.Outcome != want {
					t.Fatalf("record %d (key k%d): outcome %s, want %s", i, i%5, r.Outcome, want)
				}
			}
			if b.calls.total() != 5 {
				t.Fatalf("handler ran %d times for 5 keys, want 5", b.calls.total())
			}

			// The same shape on a FIFO queue: five message groups, each
			// run in its order.
			order = nil
			recs = recs[:0]
			for i := range n {
				recs = append(recs, fifo(fmt.Sprintf("f%02d", i), fmt.Sprintf("g%d", i%5), fmt.Sprintf(`{"id":"f%d"}`, i)))
			}
			if _, err := h(context.Background(), batch(recs...)); err != nil {
				t.Fatal(err)
			}
			last := map[byte]string{}
			for _, id := range order {
				var i int
				fmt.Sscanf(id, "f%d", &i)
				g := byte('0' + i%5)
				if id < last[g] {
					t.Fatalf("group g%c ran %s after %s: %v", g, id, last[g], order)
				}
				last[g] = id
			}
			if len(order) != n {
				t.Fatalf("%d of %d FIFO records ran: %v", len(order), n, order)
			}
		})
	}
}

func TestStandardQueueConcurrencyIsBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var cur, peak atomic.Int32
	gate := make(chan struct{})
	var arrived atomic.Int32
	h := lambdaidem.SQS(b.store, func(ctx context.Context, m events.SQSMessage) error {
		n := cur.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		if arrived.Add(1) == 3 {
			close(gate) // the first three run together
		}
		<-gate
		cur.Add(-1)
		return nil
	}, b.opts(lambdaidem.WithConcurrency(3))...)
	var recs []events.SQSMessage
	for i := range 10 {
		recs = append(recs, msg(fmt.Sprintf("m%d", i), "x"))
	}
	if _, err := h(context.Background(), batch(recs...)); err != nil {
		t.Fatal(err)
	}
	if p := peak.Load(); p != 3 {
		t.Fatalf("peak concurrency %d, want 3", p)
	}
}

func TestBatchErrorModes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fail := func(ctx context.Context, m events.SQSMessage) error {
		if m.Body == "bad" {
			return errors.New("no")
		}
		return nil
	}
	h := lambdaidem.SQS(b.store, fail, b.opts(lambdaidem.WithAllFailedError(false))...)
	resp, err := h(context.Background(), batch(msg("m1", "bad")))
	if err != nil {
		t.Fatalf("WithAllFailedError(false) returned %v", err)
	}
	wantFailed(t, resp, "m1")
	h = lambdaidem.SQS(b.store, fail, b.opts(lambdaidem.WithFailBatchOnAnyFailure())...)
	resp, err = h(context.Background(), batch(msg("m2", "ok"), msg("m3", "bad")))
	var be *lambdaidem.BatchError
	if !errors.As(err, &be) || be.Failed != 1 || be.Total != 2 {
		t.Fatalf("err = %v, want BatchError 1 of 2", err)
	}
	wantFailed(t, resp, "m3")
	if resp, err = h(context.Background(), batch()); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("empty batch: %v %v", resp, err)
	}
}

func TestFIFOGroupsRunInOrderAndStopAfterAFailure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var mu sync.Mutex
	var order []string
	h := lambdaidem.SQS(b.store, b.counting(func(ctx context.Context, m events.SQSMessage) error {
		mu.Lock()
		order = append(order, m.MessageId)
		mu.Unlock()
		if m.Body == "fail" {
			return errors.New("no")
		}
		return nil
	}), b.opts()...)
	resp, err := h(context.Background(), batch(
		fifo("a1", "A", "ok"), fifo("b1", "B", "ok"), fifo("a2", "A", "fail"),
		fifo("b2", "B", "ok"), fifo("a3", "A", "ok"), fifo("b3", "B", "ok"),
	))
	if err != nil {
		t.Fatal(err)
	}
	wantFailed(t, resp, "a2", "a3")
	if b.calls.get("a3") != 0 {
		t.Fatal("a3 ran after a2 failed in its group")
	}
	var a, bs []string
	for _, id := range order {
		if id[0] == 'a' {
			a = append(a, id)
		} else {
			bs = append(bs, id)
		}
	}
	if strings.Join(a, ",") != "a1,a2" || strings.Join(bs, ",") != "b1,b2,b3" {
		t.Fatalf("group order A=%v B=%v", a, bs)
	}
}

// fair is a record of a fair queue: a standard queue whose producer set a
// MessageGroupId, the tenant.
func fair(id, tenant, body string) events.SQSMessage {
	m := msg(id, body)
	m.Attributes["MessageGroupId"] = tenant
	return m
}

// On a fair queue the group is a tenant, not an order: a failure does not
// hold back the tenant's later records, and its records run concurrently
// (the barrier below is only passed when two of one tenant are inside the
// handler at once, which FIFO ordering would make impossible).
func TestFairQueueImposesNoOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var wg sync.WaitGroup
	wg.Add(2)
	h := lambdaidem.SQS(b.store, b.counting(func(ctx context.Context, m events.SQSMessage) error {
		switch m.Body {
		case "fail":
			return errors.New("no")
		case "together":
			wg.Done()
			wg.Wait()
		}
		return nil
	}), b.opts(lambdaidem.WithConcurrency(4))...)
	resp, err := h(context.Background(), batch(
		fair("t1", "acme", "fail"), fair("t2", "acme", "ok"),
		fair("t3", "acme", "together"), fair("t4", "acme", "together"),
	))
	if err != nil {
		t.Fatal(err)
	}
	wantFailed(t, resp, "t1")
	if b.calls.get("t2") != 1 {
		t.Fatal("t2 did not run after t1 of its tenant failed: a fair queue was treated as FIFO")
	}
}

// The same batch on a FIFO queue keeps the group's order and stops it at
// the failure, as before.
func TestFIFOGroupIsAnOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := lambdaidem.SQS(b.store, b.counting(func(ctx context.Context, m events.SQSMessage) error {
		if m.Body == "fail" {
			return errors.New("no")
		}
		return nil
	}), b.opts()...)
	resp, err := h(context.Background(), batch(fifo("f1", "acme", "fail"), fifo("f2", "acme", "ok"), fifo("f3", "globex", "ok")))
	if err != nil {
		t.Fatal(err)
	}
	wantFailed(t, resp, "f1", "f2")
	if b.calls.get("f2") != 0 {
		t.Fatal("f2 ran after f1 of its FIFO group failed")
	}
}

// Every record's log line and report carry its group as message_group_id,
// on both kinds of queue; records without a group carry none.
func TestMessageGroupIsLoggedAndReported(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var logs bytes.Buffer
	var mu sync.Mutex
	var reports []*lambdaidem.InvocationReport
	h := lambdaidem.SQS(b.store, ok, append(b.opts(),
		lambdaidem.WithLogger(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		reportsOf(&reports, &mu))...)
	for _, ev := range []events.SQSEvent{
		batch(fair("s1", "acme", "a"), msg("s2", "b")),
		batch(fifo("f1", "globex", "c")),
	} {
		if _, err := h(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{"s1": "acme", "s2": "", "f1": "globex"}
	logged := map[string]string{}
	dec := json.NewDecoder(&logs)
	for dec.More() {
		var line struct {
			MessageID string `json:"message_id"`
			Group     string `json:"message_group_id"`
		}
		if err := dec.Decode(&line); err != nil {
			t.Fatal(err)
		}
		if line.MessageID != "" {
			logged[line.MessageID] = line.Group
		}
	}
	reported := map[string]string{}
	for _, r := range reports {
		for _, rec := range r.Records {
			reported[rec.MessageID] = rec.MessageGroupID
		}
	}
	for id, g := range want {
		if got, ok := logged[id]; !ok || got != g {
			t.Errorf("log line of %s: message_group_id %q (logged: %t), want %q", id, got, ok, g)
		}
		if reported[id] != g {
			t.Errorf("report of %s: MessageGroupID %q, want %q", id, reported[id], g)
		}
	}
}
