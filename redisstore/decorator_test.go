package redisstore_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/storetest"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
)

// TestDecoratorRequestsPerMessage: the decorator on the real store, counted
// at the proxy: first delivery 1+1 round trips, duplicate 1, cached
// duplicate 0, handler failure 1+1. Connection set-up (HELLO) is not a
// store request and is not counted.
func TestDecoratorRequestsPerMessage(t *testing.T) {
	b := setup(t, 2)
	storetest.RequestsPerMessage(t, b.store, b.ns, b.proxy.ResetCounts, func() int {
		return b.proxy.Count("EVALSHA") + b.proxy.Count("EVAL") + b.proxy.Count("HGETALL")
	})
}

// A dead-letter copy whose final mark the store did not take is never
// stranded, on a real redis-server (storetest.UnwrittenFinalMark).
func TestDecoratorUnwrittenFinalMark(t *testing.T) {
	b := setup(t, 2)
	storetest.UnwrittenFinalMark(t, b.store, b.ns)
}

// The completion a reviewer broke: a counter and then a list of more
// values than Lua's unpack takes. Delivered once through the decorator,
// the counter rises once and the list holds every value: the completion
// applied whole, once, instead of failing after the counter and being
// retried.
func TestDecoratorLongCommandAppliesOnce(t *testing.T) {
	b := setup(t, 2)
	ctx := t.Context()
	counter, list := b.direct.Key(b.ns, "counter"), b.direct.Key(b.ns, "list")
	values := make([]string, 9000)
	for i := range values {
		values[i] = strconv.Itoa(i)
	}
	h := lambdaidem.SQS(b.store, func(ctx context.Context, _ events.SQSMessage) error {
		if err := lambdaidem.AddCompletionWrite(ctx, redisstore.IncrBy(counter, 1)); err != nil {
			return err
		}
		return lambdaidem.AddCompletionWrite(ctx, redisstore.RPush(list, values...))
	}, lambdaidem.WithNamespace(b.ns), lambdaidem.WithCompletionWrites[redisstore.Command]())
	resp, err := h(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m1", Body: "{}"}}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("delivery: %+v, %v", resp, err)
	}
	client := b.direct.Client()
	if n, err := client.Get(ctx, counter).Int(); err != nil || n != 1 {
		t.Errorf("counter = %d, %v; want 1", n, err)
	}
	if n, err := client.LLen(ctx, list).Result(); err != nil || n != int64(len(values)) {
		t.Errorf("list length = %d, %v; want %d", n, err, len(values))
	}
}
