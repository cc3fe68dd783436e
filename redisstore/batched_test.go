package redisstore_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
)

// roundTrips counts, at the client, the round trips that carry the
// store's commands (its scripts and reads): one per command sent alone,
// one per pipeline; and the commands in them.
type roundTrips struct {
	mu             sync.Mutex
	trips, scripts int
}

func isStoreCommand(c redis.Cmder) bool {
	switch c.Name() {
	case "evalsha", "eval", "hgetall":
		return true
	}
	return false
}

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isStoreCommand(cmd) {
			r.mu.Lock()
			r.trips++
			r.scripts++
			r.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, c := range cmds {
			if isStoreCommand(c) {
				n++
			}
		}
		if n > 0 {
			r.mu.Lock()
			r.trips++
			r.scripts += n
			r.mu.Unlock()
		}
		return next(ctx, cmds)
	}
}

// take returns the counts so far and resets them.
func (r *roundTrips) take() (trips, scripts int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	trips, scripts = r.trips, r.scripts
	r.trips, r.scripts = 0, 0
	return trips, scripts
}

// TestBatchedWritesRoundTrips: a batch of 10 fresh records under
// WithBatchedWrites costs a redis-server 4 round trips, two script calls
// claiming five records each (the two lanes) and two completing them,
// where one at a time costs 20 calls; its redelivery costs 2 where one at
// a time costs 10.
// Every record ends as one at a time leaves it: the same outcomes,
// COMPLETED at attempt 1.
func TestBatchedWritesRoundTrips(t *testing.T) {
	client := newClient(t, addr(t))
	counter := &roundTrips{}
	client.AddHook(counter)
	store := redisstore.New(client, redisstore.Options{})
	// Cached scripts, so every call below is one EVALSHA.
	if err := store.LoadScripts(t.Context()); err != nil {
		t.Fatal(err)
	}
	base := "batched-" + rand.Text()[:8]
	quiet := lambdaidem.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	var ev events.SQSEvent
	for i := range 10 {
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: fmt.Sprint("m", i), Body: fmt.Sprintf(`{"key":"k%d"}`, i),
			EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:orders",
			Attributes:     map[string]string{"ApproximateReceiveCount": "1"},
		})
	}
	type delivery struct {
		outcomes []lambdaidem.Outcome
		failures int
	}
	deliver := func(what, ns string, trips, scripts int, opts ...lambdaidem.Option) delivery {
		t.Helper()
		var rep *lambdaidem.InvocationReport
		opts = append([]lambdaidem.Option{lambdaidem.WithNamespace(base + "-" + ns), lambdaidem.WithKeyJSONField("key"), quiet,
			lambdaidem.WithInvocationHook(func(r *lambdaidem.InvocationReport) { rep = r })}, opts...)
		h := lambdaidem.SQS(store, func(context.Context, events.SQSMessage) error { return nil }, opts...)
		counter.take()
		resp, err := h(t.Context(), ev)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if gt, gs := counter.take(); gt != trips || gs != scripts {
			t.Errorf("%s: %d round trips carrying %d store commands, want %d carrying %d", what, gt, gs, trips, scripts)
		}
		var d delivery
		for _, r := range rep.Records {
			d.outcomes = append(d.outcomes, r.Outcome)
		}
		d.failures = len(resp.BatchItemFailures)
		return d
	}
	batched := lambdaidem.WithBatchedWrites()
	single1 := deliver("one at a time", "single", 20, 20)
	batched1 := deliver("batched", "batched", 4, 4, batched)
	single2 := deliver("one at a time, again", "single", 10, 10)
	batched2 := deliver("batched, again", "batched", 2, 2, batched)

	for _, c := range []struct {
		what            string
		single, batched delivery
		want            lambdaidem.Outcome
	}{{"first delivery", single1, batched1, lambdaidem.OutcomeProcessed}, {"redelivery", single2, batched2, lambdaidem.OutcomeDuplicate}} {
		if !slices.Equal(c.batched.outcomes, c.single.outcomes) || c.batched.failures != c.single.failures {
			t.Errorf("%s: batched outcomes %v (%d failed), one at a time %v (%d failed)", c.what, c.batched.outcomes, c.batched.failures, c.single.outcomes, c.single.failures)
		}
		for i, o := range c.batched.outcomes {
			if o != c.want {
				t.Errorf("%s: record %d %s, want %s", c.what, i, o, c.want)
			}
		}
	}
	for _, ns := range []string{"single", "batched"} {
		for i := range 10 {
			rec, err := store.Get(t.Context(), lambdaidem.GetRequest{Namespace: base + "-" + ns, Key: fmt.Sprint("k", i), Now: time.Now()})
			if err != nil || rec.Status != lambdaidem.StatusCompleted || rec.Attempts != 1 {
				t.Errorf("%s k%d: %s at attempt %d (%v), want COMPLETED at attempt 1", ns, i, rec.Status, rec.Attempts, err)
			}
		}
	}
}
