package compat

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/dynamo/dynamotest"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest"
)

// TestKit runs every feature the kit supports in a kit, and asserts that
// the kit refuses, when it is built, every feature the SQS handler
// refuses, with the same named error.
func TestKit(t *testing.T) {
	for _, f := range features {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			if f.kit != nil {
				f.kit(t)
				return
			}
			if f.kitRefused != nil {
				err := lambdaidem.Check(func() { lambdaidemtest.New(noop, keyed, f.option()) })
				var ce *idemstore.ConfigError
				if !errors.As(err, &ce) || !errors.Is(err, f.kitRefused) {
					t.Fatalf("the kit built with %s: %v, want a *lambdaidem.ConfigError matching %v (if the kit runs it now, give the feature a kit scenario)", f.name, err, f.kitRefused)
				}
				return
			}
			c := cellOf(f, entries[0], stores[0])
			if c.supported {
				t.Fatalf("the SQS handler supports %s, and the kit does not run it", f.name)
			}
			err := lambdaidem.Check(func() { lambdaidemtest.New(noop, c.option()) })
			var ce *idemstore.ConfigError
			if !errors.As(err, &ce) || !errors.Is(err, c.refused) {
				t.Fatalf("the kit built with %s: %v, want a *lambdaidem.ConfigError matching %v", f.name, err, c.refused)
			}
		})
	}
}

// keyed is the kits' key: the body's "key" field.
var keyed = lambdaidem.WithKeyJSONField("key")

// checked fails t when the kit's Check does.
func checked(t *testing.T, k *lambdaidemtest.Kit) {
	t.Helper()
	if err := k.Check(); err != nil {
		t.Fatal(err)
	}
}

// counter is a handler that counts its runs per body.
type counter struct{ runs map[string]int }

func (c *counter) handle(_ context.Context, m events.SQSMessage) error {
	c.runs[m.Body]++
	return nil
}

func kitCompletionWrites(t *testing.T) {
	db := dynamotest.New(effectsTable)
	insert := func(ctx context.Context, m events.SQSMessage) error {
		return lambdaidem.AddCompletionWrite(ctx, types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String(effectsTable.Name),
			Item:      map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: m.Body}},
		}})
	}
	declared := lambdaidem.WithCompletionWrites[types.TransactWriteItem]()
	k := lambdaidemtest.NewWithStore(memstore.New(memstore.WithCompletionWrites(db)), insert, keyed, declared)
	k.CrashAfterEffect(`{"key":"k"}`)
	if n := k.Runs("k"); n != 2 {
		t.Fatalf("the handler ran %d times, want twice (once more after the crash)", n)
	}
	if n := len(db.Items(effectsTable.Name)); n != 1 {
		t.Fatalf("%d effects after a crash after the effect, want the one committed with the completion", n)
	}
	checked(t, k)

	// The kit's default store commits none: refused when the kit is made.
	err := lambdaidem.Check(func() { lambdaidemtest.New(insert, keyed, declared) })
	var ce *idemstore.ConfigError
	if !errors.As(err, &ce) || !errors.Is(err, idemstore.ErrUnsupportedWrite) || ce.Store != "in-memory" {
		t.Fatalf("New with a declared transactional handler: %v, want a ConfigError naming the in-memory store, ErrUnsupportedWrite", err)
	}
}

func kitAtMostOnce(t *testing.T) {
	c := &counter{runs: map[string]int{}}
	k := lambdaidemtest.New(c.handle, keyed, lambdaidem.WithAtMostOnce())
	k.ExpectDeadLetter("k", idemstore.ReasonOutcomeUnknown)
	k.CrashAfterEffect(`{"key":"k"}`)
	if n := k.Runs("k"); n != 1 {
		t.Fatalf("the handler ran %d times after a crash, want once (at most once)", n)
	}
	checked(t, k)

	// The effect happens and its answer is lost (an API's 504): the error
	// the handler returns is never retried.
	k = lambdaidemtest.New(func(ctx context.Context, _ events.SQSMessage) error {
		return lambdaidemtest.Effect(ctx, "email")
	}, keyed, lambdaidem.WithAtMostOnce())
	k.ExpectDeadLetter("k", idemstore.ReasonOutcomeUnknown)
	k.ErrorAfterEffect(`{"key":"k"}`)
	if got := k.Effects("k"); len(got) != 1 {
		t.Fatalf("effects %v after an error after the effect, want one (at most once)", got)
	}
	checked(t, k)
}

func kitHeartbeat(t *testing.T) {
	// The first run takes half the function's timeout (15 s), the lease
	// is 6 s: only the heartbeat keeps the second delivery from taking
	// it over.
	c := &counter{runs: map[string]int{}}
	k := lambdaidemtest.New(c.handle, keyed, lambdaidem.WithLease(6*time.Second), lambdaidem.WithHeartbeat(time.Second))
	k.RedeliverWhileRunning(`{"key":"k"}`)
	if n := k.Runs("k"); n != 1 {
		t.Fatalf("the handler ran %d times, want once: the heartbeat holds the lease", n)
	}
	checked(t, k)
}

func kitCache(t *testing.T) {
	c := &counter{runs: map[string]int{}}
	k := lambdaidemtest.New(c.handle, keyed, lambdaidem.WithCache(10, time.Hour))
	// One execution environment takes one message at a time: the second
	// finds the first's key in its cache.
	k.Pollers, k.BatchSize = 1, 1
	k.Send(`{"key":"k"}`)
	k.Send(`{"key":"k"}`)
	k.Run()
	if got := k.Outcomes("k"); !slices.Contains(got, lambdaidem.OutcomeCachedDuplicate) || k.Runs("k") != 1 {
		t.Fatalf("outcomes %v, %d runs; want one run and a duplicate answered by the cache", got, k.Runs("k"))
	}
	checked(t, k)
}

func kitFIFO(t *testing.T) {
	failed := false
	k := lambdaidemtest.New(func(_ context.Context, m events.SQSMessage) error {
		if m.Body == "a" && !failed {
			failed = true
			return errors.New("not yet")
		}
		return nil
	}, lambdaidem.WithKeyDeduplicationID(false))
	// Keyed by deduplication ID: the body, as content-based
	// deduplication gives it.
	k.ExpectFailure("a")
	k.StopGroup("g", "a", "b")
	if got := k.RunOrder(); strings.Join(got, ",") != "a,a,b" {
		t.Fatalf("run order %v, want a (failed), a, then b", got)
	}
	checked(t, k)
}

func kitRedrive(t *testing.T) {
	poison := true
	k := lambdaidemtest.New(func(context.Context, events.SQSMessage) error {
		if poison {
			return lambdaidem.Poison(errors.New("cannot be processed yet"))
		}
		return nil
	}, keyed)
	k.ExpectDeadLetter("k", idemstore.ReasonPoison)
	k.Poison(`{"key":"k"}`)
	poison = false
	if _, err := k.Redrive(); err != nil {
		t.Fatal(err)
	}
	if st := k.Status("k"); st != idemstore.StatusCompleted || k.Runs("k") != 2 {
		t.Fatalf("after the redrive: %s, %d runs; want completed by a second run", st, k.Runs("k"))
	}
	checked(t, k)
}

func kitFailOnAny(t *testing.T) {
	k := lambdaidemtest.New(func(_ context.Context, m events.SQSMessage) error {
		if strings.Contains(m.Body, "bad") {
			return lambdaidem.Poison(errors.New("refused"))
		}
		return nil
	}, keyed, lambdaidem.WithFailBatchOnAnyFailure())
	k.ExpectDeadLetter("bad", idemstore.ReasonPoison)
	k.Send(`{"key":"good"}`)
	k.Send(`{"key":"bad"}`)
	k.Run()
	if k.Status("good") != idemstore.StatusCompleted || k.Runs("good") != 1 {
		t.Fatalf("the good record: %s after %d runs, want completed once", k.Status("good"), k.Runs("good"))
	}
	checked(t, k)
}

func kitKeyConflict(t *testing.T) {
	k := lambdaidemtest.New(noop, keyed)
	k.ExpectDeadLetter("k", idemstore.ReasonKeyConflict)
	k.Send(`{"key":"k","payload":"a"}`)
	k.Run()
	k.Send(`{"key":"k","payload":"b"}`)
	k.Run()
	if got := k.Outcomes("k"); !slices.Contains(got, lambdaidem.OutcomeDeadLettered) || k.Runs("k") != 1 {
		t.Fatalf("outcomes %v, %d runs; want one run and the other payload dead-lettered (Check asks for the key_conflict copy)", got, k.Runs("k"))
	}
	checked(t, k)
}

func kitLateReplay(t *testing.T) {
	k := lambdaidemtest.New(noop, keyed, lambdaidem.WithRetention(24*time.Hour), lambdaidem.WithResultRetention(time.Second))
	k.Send(`{"key":"k"}`)
	k.Run() // the kit's clock runs on past the second
	k.Send(`{"key":"k"}`)
	k.Run()
	if got := k.Outcomes("k"); !slices.Contains(got, lambdaidem.OutcomeLateReplay) || k.Runs("k") != 1 {
		t.Fatalf("outcomes %v, %d runs; want one run and a late replay", got, k.Runs("k"))
	}
	checked(t, k)
}

// kitBatched: ten messages, one of them twice, with batched writes: each
// key runs once.
func kitBatched(t *testing.T) {
	k := lambdaidemtest.New(noop, keyed, lambdaidem.WithBatchedWrites())
	for i := range 10 {
		k.Send(fmt.Sprintf(`{"key":"k%d"}`, i))
	}
	k.Send(`{"key":"k0"}`)
	k.Run()
	for i := range 10 {
		if n := k.Runs(fmt.Sprintf("k%d", i)); n != 1 {
			t.Fatalf("k%d ran %d times, want 1", i, n)
		}
	}
	checked(t, k)
}

// kitOptimistic: a message delivered twice in the optimistic mode commits
// its effect once, with its completion.
func kitOptimistic(t *testing.T) {
	db := dynamotest.New(effectsTable)
	insert := func(ctx context.Context, m events.SQSMessage) error {
		return lambdaidem.AddCompletionWrite(ctx, types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String(effectsTable.Name),
			Item:      map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: m.Body}},
		}})
	}
	k := lambdaidemtest.NewWithStore(memstore.New(memstore.WithCompletionWrites(db)), insert, keyed,
		lambdaidem.WithCompletionWrites[types.TransactWriteItem](), lambdaidem.WithOptimisticCommit())
	k.DeliverTwice(`{"key":"k"}`)
	if n := len(db.Items(effectsTable.Name)); n != 1 {
		t.Fatalf("%d effects after a message delivered twice, want 1", n)
	}
	checked(t, k)
}
