package lambdaidem_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest/testclock"
)

const (
	stdARN  = "arn:aws:sqs:us-east-1:123456789012:orders"
	fifoARN = "arn:aws:sqs:us-east-1:123456789012:orders.fifo"
	ns      = "test"
)

// clock is a settable clock shared by the decorator and the test: every
// time the decorator reads or waits for is its (see testclock). The few
// milliseconds a store write's retry waits pass at once.
type clock = testclock.Clock

func newClock() *clock {
	return testclock.New(time.Now().Truncate(time.Second)).PassShort(200 * time.Millisecond)
}

// sink records dead letters; err makes Send fail.
type sink struct {
	mu   sync.Mutex
	sent []lambdaidem.DeadLetter
	err  error
}

func (s *sink) Send(_ context.Context, dl lambdaidem.DeadLetter) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return "", s.err
	}
	s.sent = append(s.sent, dl)
	return fmt.Sprintf("dlq-%d", len(s.sent)), nil
}

func (s *sink) reasons() []lambdaidem.Reason {
	s.mu.Lock()
	defer s.mu.Unlock()
	var r []lambdaidem.Reason
	for _, d := range s.sent {
		r = append(r, d.Reason)
	}
	return r
}

// visibility records visibility changes.
type visibility struct {
	mu      sync.Mutex
	changes map[string]time.Duration
}

func (v *visibility) ChangeVisibility(_ context.Context, m events.SQSMessage, d time.Duration) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.changes == nil {
		v.changes = map[string]time.Duration{}
	}
	v.changes[m.MessageId] = d
	return nil
}

func (v *visibility) get(id string) (time.Duration, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	d, ok := v.changes[id]
	return d, ok
}

type bundle struct {
	store *memstore.Store
	clock *clock
	sink  *sink
	vis   *visibility
	calls *counter
}

// counter counts handler calls per message ID.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) inc(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[id]++
}

func (c *counter) get(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[id]
}

func (c *counter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := 0
	for _, v := range c.n {
		t += v
	}
	return t
}

func setup(t *testing.T) *bundle {
	t.Helper()
	return &bundle{store: memstore.New(), clock: newClock(), sink: &sink{}, vis: &visibility{}, calls: &counter{}}
}

func (b *bundle) opts(extra ...lambdaidem.Option) []lambdaidem.Option {
	return append([]lambdaidem.Option{
		lambdaidem.WithNamespace(ns),
		lambdaidem.WithClock(b.clock),
		lambdaidem.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		lambdaidem.WithVisibility(b.vis),
	}, extra...)
}

// wrapOpts are opts without the SQS handler's own options, for Wrap.
func (b *bundle) wrapOpts(extra ...lambdaidem.Option) []lambdaidem.Option {
	return append([]lambdaidem.Option{
		lambdaidem.WithNamespace(ns),
		lambdaidem.WithClock(b.clock),
		lambdaidem.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
	}, extra...)
}

// counting wraps a handler so every call is counted by message ID.
func (b *bundle) counting(h lambdaidem.MessageHandler) lambdaidem.MessageHandler {
	return func(ctx context.Context, m events.SQSMessage) error {
		b.calls.inc(m.MessageId)
		return h(ctx, m)
	}
}

func ok(context.Context, events.SQSMessage) error { return nil }

func msg(id, body string) events.SQSMessage {
	return events.SQSMessage{
		MessageId: id, Body: body, EventSourceARN: stdARN, ReceiptHandle: "rh-" + id,
		Attributes: map[string]string{"ApproximateReceiveCount": "1"},
	}
}

func redelivered(m events.SQSMessage, n int) events.SQSMessage {
	m.Attributes = map[string]string{"ApproximateReceiveCount": strconv.Itoa(n)}
	for k, v := range m.Attributes {
		m.Attributes[k] = v
	}
	return m
}

func fifo(id, group, body string) events.SQSMessage {
	return events.SQSMessage{
		MessageId: id, Body: body, EventSourceARN: fifoARN,
		Attributes: map[string]string{"ApproximateReceiveCount": "1", "MessageGroupId": group, "MessageDeduplicationId": id},
	}
}

func batch(ms ...events.SQSMessage) events.SQSEvent { return events.SQSEvent{Records: ms} }

func failedIDs(resp events.SQSEventResponse) []string {
	var ids []string
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

func wantFailed(t *testing.T, resp events.SQSEventResponse, want ...string) {
	t.Helper()
	got := strings.Join(failedIDs(resp), ",")
	if got != strings.Join(want, ",") {
		t.Fatalf("failed IDs = [%s], want [%s]", got, strings.Join(want, ","))
	}
}

func (b *bundle) record(t *testing.T, key string) idemstore.Record {
	t.Helper()
	r, err := b.store.Get(context.Background(), idemstore.GetRequest{Namespace: ns, Key: key, Now: b.clock.Now()})
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	return r
}

func reportsOf(hookOut *[]*lambdaidem.InvocationReport, mu *sync.Mutex) lambdaidem.Option {
	return lambdaidem.WithInvocationHook(func(r *lambdaidem.InvocationReport) {
		mu.Lock()
		*hookOut = append(*hookOut, r)
		mu.Unlock()
	})
}

func alwaysFail(context.Context, events.SQSMessage) error { return errors.New("downstream says no") }

// status is the key's status, or "" when absent.
func (b *bundle) status(key string) lambdaidem.Status {
	r, err := b.store.Get(context.Background(), idemstore.GetRequest{Namespace: ns, Key: key, Now: b.clock.Now()})
	if err != nil {
		return ""
	}
	return r.Status
}

func mustHandle(t *testing.T, h func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), ctx context.Context, ev events.SQSEvent) events.SQSEventResponse {
	t.Helper()
	resp, err := h(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
