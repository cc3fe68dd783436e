package redisstore_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/storetest"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
)

// TestConformance runs the suite every Store must pass on a real
// redis-server. The subtests share one database: each uses a namespace of
// its own.
func TestConformance(t *testing.T) {
	client := newClient(t, addr(t))
	storetest.Run(t, func(t *testing.T) idemstore.Store {
		return redisstore.New(client, "")
	})
}

// TestConformanceCluster runs the suite through a cluster client. The
// stack's redis-server is a cluster of one node that owns every slot, so
// a script whose keys span two slots fails with CROSSSLOT there, as on
// ElastiCache Serverless or MemoryDB: passing the suite shows that every
// transition stays in one slot.
func TestConformanceCluster(t *testing.T) {
	server := addr(t)
	plain := newClient(t, server)
	err := plain.Eval(t.Context(), "return redis.call('EXISTS', KEYS[1], KEYS[2])", []string{"{a}x", "{b}x"}).Err()
	if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		if os.Getenv("LAMBDAIDEM_REQUIRE_SERVICES") == "1" {
			t.Fatalf("a script across two slots = %v, want CROSSSLOT: the server at %s is not in cluster mode", err, server)
		}
		t.Skipf("the server at %s is not in cluster mode (%v)", server, err)
	}
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{server}})
	t.Cleanup(func() { _ = client.Close() })
	store := redisstore.New(client, "")
	if err := store.LoadScripts(t.Context()); err != nil {
		t.Fatal(err)
	}
	storetest.Run(t, func(t *testing.T) idemstore.Store { return store })
}

// redisEffects makes the completion-write cases' effects: SetNX on keys
// of the record's slot, read back with GET.
func redisEffects(client redis.UniversalClient, store *redisstore.Store) storetest.Effects {
	return storetest.Effects{
		Insert: func(ns, name, value string) any { return redisstore.SetNX(store.Key(ns, name), value) },
		Read: func(ctx context.Context, ns, name string) (string, error) {
			v, err := client.Get(ctx, store.Key(ns, name)).Result()
			if errors.Is(err, redis.Nil) {
				return "", nil
			}
			return v, err
		},
	}
}

// TestConformanceCompletionWrites runs the completion-write cases with
// Commands, on the plain client and, when the server is in cluster mode,
// through a cluster client (CROSSSLOT would refuse a command outside the
// record's slot there).
func TestConformanceCompletionWrites(t *testing.T) {
	server := addr(t)
	client := newClient(t, server)
	store := redisstore.New(client, "")
	storetest.RunCompletionWrites(t, func(t *testing.T) idemstore.Store { return store }, redisEffects(client, store))

	if err := client.Eval(t.Context(), "return redis.call('EXISTS', KEYS[1], KEYS[2])", []string{"{a}x", "{b}x"}).Err(); err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Logf("the server is not in cluster mode (%v): the cluster run is skipped", err)
		return
	}
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{server}})
	t.Cleanup(func() { _ = cluster.Close() })
	cstore := redisstore.New(cluster, "cluster")
	t.Run("Cluster", func(t *testing.T) {
		storetest.RunCompletionWrites(t, func(t *testing.T) idemstore.Store { return cstore }, redisEffects(cluster, cstore))
	})
}
