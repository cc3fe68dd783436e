package redisstore_test

import (
	"context"
	"crypto/rand"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/storetest"
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
// a time costs 10. Every record ends as one at a time leaves it
// (storetest.BatchedWrites): the same outcomes, COMPLETED at attempt 1.
func TestBatchedWritesRoundTrips(t *testing.T) {
	client := newClient(t, addr(t))
	counter := &roundTrips{}
	client.AddHook(counter)
	store := redisstore.New(client, "")
	// Cached scripts, so every call below is one EVALSHA.
	if err := store.LoadScripts(t.Context()); err != nil {
		t.Fatal(err)
	}
	type cost struct{ trips, scripts int }
	want := map[storetest.BatchedDelivery]cost{
		storetest.DeliverSingle:       {20, 20},
		storetest.DeliverBatched:      {4, 4},
		storetest.DeliverSingleAgain:  {10, 10},
		storetest.DeliverBatchedAgain: {2, 2},
	}
	storetest.BatchedWrites(t, store, "batched-"+rand.Text()[:8], time.Now(), func(d storetest.BatchedDelivery, after bool) {
		gt, gs := counter.take()
		if w := want[d]; after && (gt != w.trips || gs != w.scripts) {
			t.Errorf("%s: %d round trips carrying %d store commands, want %d carrying %d", d, gt, gs, w.trips, w.scripts)
		}
	})
}
