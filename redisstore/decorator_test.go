package redisstore_test

import (
	"context"
	"errors"
	"log/slog"
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
// values than Lua's unpack takes. Delivered once through the decorator to
// a store whose request limit takes it (a server of one's own), the
// counter rises once and the list holds every value: the completion
// applied whole, once, instead of failing after the counter and being
// retried. Under the default limit (ElastiCache Serverless refuses a
// request of more than 3,999 arguments, on every try) AddCompletionWrite
// refuses the list at once, with ErrRequestTooLarge, and nothing is
// written.
func TestDecoratorLongCommandAppliesOnce(t *testing.T) {
	values := make([]string, 9000)
	for i := range values {
		values[i] = strconv.Itoa(i)
	}
	run := func(t *testing.T, b *bundle) (counter, list string, addErr error) {
		ctx := t.Context()
		counter, list = b.direct.Key(b.ns, "counter"), b.direct.Key(b.ns, "list")
		h := lambdaidem.SQS(b.store, func(ctx context.Context, _ events.SQSMessage) error {
			if err := lambdaidem.AddCompletionWrite(ctx, redisstore.IncrBy(counter, 1)); err != nil {
				return err
			}
			addErr = lambdaidem.AddCompletionWrite(ctx, redisstore.RPush(list, values...))
			return addErr
		}, lambdaidem.WithNamespace(b.ns), lambdaidem.WithCompletionWrites[redisstore.Command](),
			lambdaidem.WithLogger(slog.New(slog.DiscardHandler)))
		if _, err := h(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m1", Body: "{}"}}}); err != nil && !errors.As(err, new(*lambdaidem.BatchError)) {
			t.Fatal(err)
		}
		return counter, list, addErr
	}
	t.Run("a limit that takes it", func(t *testing.T) {
		b := setupWith(t, 2, redisstore.WithMaxRequestArgs(20000))
		counter, list, addErr := run(t, b)
		if addErr != nil {
			t.Fatalf("AddCompletionWrite = %v", addErr)
		}
		client := b.direct.Client()
		if n, err := client.Get(t.Context(), counter).Int(); err != nil || n != 1 {
			t.Errorf("counter = %d, %v; want 1", n, err)
		}
		if n, err := client.LLen(t.Context(), list).Result(); err != nil || n != int64(len(values)) {
			t.Errorf("list length = %d, %v; want %d", n, err, len(values))
		}
	})
	t.Run("the default limit", func(t *testing.T) {
		b := setup(t, 2)
		counter, list, addErr := run(t, b)
		if !errors.Is(addErr, redisstore.ErrRequestTooLarge) || !errors.Is(addErr, redisstore.ErrInvalidCommand) {
			t.Fatalf("AddCompletionWrite = %v, want ErrRequestTooLarge (an ErrInvalidCommand)", addErr)
		}
		if n := b.direct.Client().Exists(t.Context(), counter, list).Val(); n != 0 {
			t.Errorf("%d of the counter and the list exist, want none", n)
		}
	})
}
