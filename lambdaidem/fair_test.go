package lambdaidem_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

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
