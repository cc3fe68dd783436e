package lambdaidem_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// A key completed in this container is cached no longer than the store
// keeps it: once the store forgot it, a new message runs.
func TestCacheNeverOutlivesRetention(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var mu sync.Mutex
	var reps []*lambdaidem.InvocationReport
	h := lambdaidem.SQS(b.store, b.counting(ok), b.opts(lambdaidem.WithRetention(time.Minute), lambdaidem.WithCache(100, time.Hour), reportsOf(&reps, &mu))...)
	_, _ = h(context.Background(), batch(msg("m1", "a")))
	b.clock.Advance(2 * time.Minute)
	_, _ = h(context.Background(), batch(msg("m1", "a")))
	mu.Lock()
	defer mu.Unlock()
	if got := reps[1].Records[0].Outcome; got != lambdaidem.OutcomeProcessed || b.calls.get("m1") != 2 {
		t.Fatalf("outcome %s after the store forgot the key, want processed", got)
	}
}

// After the result retention, the cache must not answer where the store
// would say late replay.
func TestCacheDoesNotHideALateReplay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var mu sync.Mutex
	var reps []*lambdaidem.InvocationReport
	h := lambdaidem.SQS(b.store, ok, b.opts(lambdaidem.WithResultRetention(time.Minute), lambdaidem.WithCache(100, time.Hour), reportsOf(&reps, &mu))...)
	_, _ = h(context.Background(), batch(msg("m1", "a")))
	b.clock.Advance(2 * time.Minute)
	_, _ = h(context.Background(), batch(msg("m1", "a")))
	mu.Lock()
	defer mu.Unlock()
	if got := reps[1].Records[0].Outcome; got != lambdaidem.OutcomeLateReplay {
		t.Fatalf("outcome %s after the result retention, want late_replay", got)
	}
}
