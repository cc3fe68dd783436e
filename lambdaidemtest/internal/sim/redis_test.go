package sim

import (
	"context"
	"crypto/rand"
	"flag"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
)

var flagRedisBudget = flag.Duration("sim.redis-budget", 20*time.Second, "how long TestSimulationRedis explores")

// TestSimulationRedis runs the same generator against the Redis store on
// the local redis-server, so its scripts are under the same invariants as
// the other stores. It skips without LAMBDAIDEM_REDIS_ADDR, unless
// LAMBDAIDEM_REQUIRE_SERVICES=1 (and LAMBDAIDEM_REDIS is not 0).
//
// The simulated clock starts in 2100, so the keys' PEXPIREAT lies in the
// server's future and the server deletes nothing the simulation still
// needs; the run's keys carry a prefix of their own and are removed at the
// end.
func TestSimulationRedis(t *testing.T) {
	exploreStore(t, "redis-server", *flagRedisBudget, redisStore(t))
}

// redisStore is the Redis store on the local redis-server, under a key
// prefix of its own whose keys are removed when t ends; t skips without a
// server.
func redisStore(t *testing.T) lambdaidem.Store {
	t.Helper()
	client := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	prefix := "sim-" + rand.Text()[:10]
	t.Cleanup(func() {
		ctx := context.Background()
		iter := client.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			_ = client.Unlink(ctx, iter.Val()).Err()
		}
		if err := iter.Err(); err != nil {
			t.Logf("remove the run's keys: %v", err)
		}
		_ = client.Close()
	})
	store := redisstore.New(client, redisstore.Options{Prefix: prefix})
	if err := store.LoadScripts(t.Context()); err != nil {
		t.Fatal(err)
	}
	return store
}

// exploreStore runs the generator against one real store for budget (at
// most three seconds under -short) from a fresh seed, and fails the test
// with the report of the first failure, shrunk.
func exploreStore(t *testing.T, what string, budget time.Duration, store lambdaidem.Store) {
	t.Helper()
	if testing.Short() {
		budget = min(budget, 3*time.Second)
	}
	seed := freshSeed()
	t.Logf("exploring %s from seed %d for %s", what, seed, budget)
	st := Explore(Options{Budget: budget, Seed: seed, Known: known(), Filter: *flagFilter, Shrink: true,
		Store: func() lambdaidem.Store { return store }})
	t.Logf("%d scenarios, %d messages, %d invocations in %s (seeds %d..%d)",
		st.Scenarios, st.Messages, st.Invocations, st.Elapsed.Round(time.Millisecond), seed, seed+uint64(st.Scenarios)-1)
	if st.Failure != nil {
		t.Fatal(st.Report())
	}
}
