package sim

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
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
func redisStore(t *testing.T) idemstore.Store {
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
	store := redisstore.New(client, prefix)
	if err := store.LoadScripts(t.Context()); err != nil {
		t.Fatal(err)
	}
	return &redisEffects{Store: store, client: client}
}

// redisEffects runs a scenario's transactional effects as the Redis
// store's completion commands: each Effect is an RPUSH of the message
// that had it onto a list of its key, in the record's slot, run by the
// completion's script; a refusal the scenario draws is a guard that does
// not hold. After every completion the ledger is read back from Redis, so
// the invariants judge what the store committed.
type redisEffects struct {
	*redisstore.Store
	client *redis.Client
}

// WithLedger implements EffectStore.
func (r *redisEffects) WithLedger(l *Ledger, refuse func() bool) idemstore.Store {
	return &redisLedger{redisEffects: r, ledger: l, refuse: refuse, lists: map[string]map[string][]string{}}
}

type redisLedger struct {
	*redisEffects
	ledger *Ledger
	refuse func() bool
	// lists holds, per effect key, each namespace's list as last read.
	lists map[string]map[string][]string
}

// Capabilities declares the Redis store's commands and the scenario's
// Effects, which Complete turns into commands.
func (r *redisLedger) Capabilities() idemstore.Capabilities {
	return withEffects(r.Store.Capabilities())
}

func (r *redisLedger) list(ns, key string) string { return r.Key(ns, "fx:"+key) }

// Complete implements idemstore.Store.
func (r *redisLedger) Complete(ctx context.Context, req idemstore.CompleteRequest) error {
	ns := req.Lease.Namespace
	var keys []string
	req.Writes, keys = r.commands(ns, req.Writes)
	err := r.Store.Complete(ctx, req)
	r.readBack(ctx, ns, keys)
	return err
}

// CompleteBatch implements idemstore.Batcher: the Redis store's batch,
// each completion's effects its own script's commands.
func (r *redisLedger) CompleteBatch(ctx context.Context, reqs []idemstore.CompleteRequest) []error {
	reqs = slices.Clone(reqs)
	keys := map[string][]string{}
	for i := range reqs {
		ns := reqs[i].Lease.Namespace
		var ks []string
		reqs[i].Writes, ks = r.commands(ns, reqs[i].Writes)
		keys[ns] = append(keys[ns], ks...)
	}
	errs := r.Store.CompleteBatch(ctx, reqs)
	for _, ns := range slices.Sorted(maps.Keys(keys)) {
		r.readBack(ctx, ns, keys[ns])
	}
	return errs
}

// Commit implements idemstore.Committer: the optimistic mode's commit
// runs the effects' commands in its own step.
func (r *redisLedger) Commit(ctx context.Context, req idemstore.CommitRequest) (idemstore.CommitResult, error) {
	var keys []string
	req.Writes, keys = r.commands(req.Namespace, req.Writes)
	res, err := r.Store.Commit(ctx, req)
	r.readBack(ctx, req.Namespace, keys)
	return res, err
}

// commands turns a completion's Effects into Redis commands, and returns
// the effects' keys.
func (r *redisLedger) commands(ns string, in []any) (writes []any, keys []string) {
	writes = make([]any, 0, len(in)+1)
	for _, w := range in {
		e, ok := w.(Effect)
		if !ok {
			writes = append(writes, w)
			continue
		}
		keys = append(keys, e.Key)
		writes = append(writes, redisstore.RPush(r.list(ns, e.Key), e.By))
	}
	if len(keys) > 0 && r.refuse != nil && r.refuse() {
		// The effect's own condition fails, as a balance check would.
		writes = append(writes, redisstore.Set(r.Key(ns, "refusal"), "x").If(redisstore.Guard{Key: r.Key(ns, "never"), Test: redisstore.TestExists}))
	}
	return writes, keys
}

// readBack reads the effects of keys back from Redis into the ledger.
func (r *redisLedger) readBack(ctx context.Context, ns string, keys []string) {
	for _, k := range keys {
		got, rerr := r.client.LRange(context.WithoutCancel(ctx), r.list(ns, k), 0, -1).Result()
		if rerr != nil {
			panic(fmt.Sprintf("sim: read the effects of %s back from Redis: %v", k, rerr))
		}
		if r.lists[k] == nil {
			r.lists[k] = map[string][]string{}
		}
		r.lists[k][ns] = got
		var all []string
		for _, ns := range slices.Sorted(maps.Keys(r.lists[k])) {
			all = append(all, r.lists[k][ns]...)
		}
		r.ledger.Tx[k] = all
	}
}

// exploreStore runs the generator against one real store for budget (at
// most three seconds under -short) from a fresh seed, and fails the test
// with the report of the first failure, shrunk.
func exploreStore(t *testing.T, what string, budget time.Duration, store idemstore.Store) {
	t.Helper()
	if testing.Short() {
		budget = min(budget, 3*time.Second)
	}
	seed := freshSeed()
	t.Logf("exploring %s from seed %d for %s", what, seed, budget)
	st := Explore(Options{Budget: budget, Seed: seed, Known: known(), Filter: *flagFilter, Shrink: true,
		Store: func() idemstore.Store { return store }})
	t.Logf("%d scenarios, %d messages, %d invocations in %s (seeds %d..%d)",
		st.Scenarios, st.Messages, st.Invocations, st.Elapsed.Round(time.Millisecond), seed, seed+uint64(st.Scenarios)-1)
	if st.Failure != nil {
		t.Fatal(st.Report())
	}
}
