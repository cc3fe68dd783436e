package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sort"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/examples/internal/esm"
	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  map[string]string
		want Config
		ok   bool
	}{
		{map[string]string{EnvRedisURL: "rediss+cluster://cache.example:6379", EnvDLQURL: "q"},
			Config{RedisURL: "rediss+cluster://cache.example:6379", DLQURL: "q", Namespace: DefaultNamespace}, true},
		{map[string]string{EnvRedisURL: "redis+cluster://127.0.0.1:6379", EnvDLQURL: "q", EnvNamespace: "billing", EnvMaxAttempts: "3"},
			Config{RedisURL: "redis+cluster://127.0.0.1:6379", DLQURL: "q", Namespace: "billing", MaxAttempts: 3}, true},
		{map[string]string{EnvDLQURL: "q"}, Config{}, false},
		{map[string]string{EnvRedisURL: "http://cache:6379", EnvDLQURL: "q"}, Config{}, false},
		{map[string]string{EnvRedisURL: "cache:6379", EnvDLQURL: "q"}, Config{}, false},
		{map[string]string{EnvRedisURL: "redis://cache:6379"}, Config{}, false},
		{map[string]string{EnvRedisURL: "redis://cache:6379", EnvDLQURL: "q", EnvMaxAttempts: "0"}, Config{}, false},
	} {
		got, err := ConfigFromEnv(func(k string) string { return c.env[k] })
		if !c.ok {
			if !errors.Is(err, ErrConfig) {
				t.Errorf("%v: error %v, want ErrConfig", c.env, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%v: got %+v, %v; want %+v", c.env, got, err, c.want)
		}
	}
}

// The function on the local redis-server (a cluster of one node, as the
// stack runs it) and the SQS emulator: each order runs once, a redelivery
// is skipped as a duplicate, and poison and a body that is no order land
// in the DLQ with their reason.
func TestOrdersOnceAndPoisonToTheDLQ(t *testing.T) {
	t.Parallel()
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{testenv.RedisAddr(t)}})
	t.Cleanup(func() { _ = client.Close() })
	sq := testenv.SQS(t)
	queue := esm.NewQueue(t, sq, "redis-orders", false)
	dlq := esm.NewQueue(t, sq, "redis-orders-dlq", false)
	cfg := Config{DLQURL: dlq.URL, Namespace: testenv.Name("orders")}
	var mu sync.Mutex
	outcomes := map[string][]lambdaidem.Outcome{}
	h := NewHandler(cfg, Deps{Redis: client, SQS: sq, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		lambdaidem.WithInvocationHook(func(r *lambdaidem.InvocationReport) {
			mu.Lock()
			defer mu.Unlock()
			for _, rec := range r.Records {
				outcomes[rec.MessageID] = append(outcomes[rec.MessageID], rec.Outcome)
			}
		}))

	ok := queue.Send(t, `{"order_id":"o-1"}`, "", "")
	poison := queue.Send(t, `{"order_id":"o-2","poison":true}`, "", "")
	junk := queue.Send(t, `not json`, "", "")
	queue.Drain(t, h, 10)
	// SQS delivers at least once: the same message again.
	redelivery := events.SQSEvent{Records: []events.SQSMessage{{
		MessageId: ok, Body: `{"order_id":"o-1"}`, EventSource: "aws:sqs", EventSourceARN: queue.ARN, AWSRegion: queue.Region,
		Attributes: map[string]string{"ApproximateReceiveCount": "2"},
	}}}
	if resp, err := h(context.Background(), redelivery); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("redelivery: %+v %v", resp, err)
	}
	want := map[string][]lambdaidem.Outcome{
		ok:     {lambdaidem.OutcomeProcessed, lambdaidem.OutcomeDuplicate},
		poison: {lambdaidem.OutcomeDeadLettered},
		junk:   {lambdaidem.OutcomeDeadLettered},
	}
	mu.Lock()
	diff := cmp.Diff(want, outcomes)
	mu.Unlock()
	if diff != "" {
		t.Errorf("outcomes by message (-want +got):\n%s", diff)
	}

	var got []string
	for _, m := range dlq.Collect(t, 2) {
		dl, err := sqsqueue.Parse(m)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, dl.Metadata.MessageID+" "+string(dl.Metadata.Reason))
	}
	wantDLQ := []string{poison + " poison", junk + " poison"}
	sort.Strings(got)
	sort.Strings(wantDLQ)
	if !cmp.Equal(wantDLQ, got) {
		t.Errorf("DLQ holds %v, want %v", got, wantDLQ)
	}
}

// The function builds for Lambda (linux/arm64, as template.yaml deploys
// it).
func TestBuildsForLambda(t *testing.T) {
	t.Parallel()
	esm.Build(t, ".", "linux", "arm64")
}
