package redisstore_test

import (
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
)

// TestCompletionOverMaxmemory: Redis 7 runs a script that declares no
// flags (the store's declare none) whatever its memory, and refuses for
// lack of memory (over maxmemory, with noeviction) only a command that may
// grow it, and only while the script has written nothing; once it wrote,
// it runs to its end over the limit. So over maxmemory a completion
// applies whole or not at all: refused at its first command when that one
// grows memory (SET), applied whole when its first write cannot grow it
// (DEL), or when the script wrote before the commands (the optimistic
// commit prunes its open sets first). A batch's items are each one or the
// other. The store reports the refusal as unavailable, which it is: the
// same completion applies once memory is freed.
func TestCompletionOverMaxmemory(t *testing.T) {
	client := privateServer(t, redisServerBinary(t), "--maxmemory-policy", "noeviction")
	ctx := t.Context()
	store := redisstore.New(client, "")
	ns := "maxmemory-" + rand.Text()[:8]
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	claim := func(key string) idemstore.Lease {
		t.Helper()
		c, err := store.Claim(ctx, idemstore.ClaimRequest{Namespace: ns, Key: key, PayloadHash: "h", MessageID: "m-" + key,
			Now: t0, LeaseUntil: t0.Add(time.Hour), Grace: time.Second, ExpiresAt: t0.Add(2 * time.Hour)})
		if err != nil || !c.Claimed {
			t.Fatalf("Claim(%s) = %+v, %v", key, c, err)
		}
		return c.Lease
	}
	k := func(name string) string { return store.Key(ns, name) }
	complete := func(l idemstore.Lease, writes ...any) idemstore.CompleteRequest {
		return idemstore.CompleteRequest{Lease: l, Now: t0.Add(time.Second), ExpiresAt: t0.Add(time.Hour), Writes: writes}
	}
	status := func(key string) idemstore.Status {
		rec, err := store.Get(ctx, idemstore.GetRequest{Namespace: ns, Key: key, Now: t0.Add(2 * time.Second)})
		if err != nil {
			t.Fatalf("Get(%s): %v", key, err)
		}
		return rec.Status
	}
	grows, frees, batchGrows, batchFrees := claim("grows"), claim("frees"), claim("batch-grows"), claim("batch-frees")
	for _, name := range []string{"old", "batch-old"} {
		if err := client.Set(ctx, k(name), "x", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := client.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}

	err := store.Complete(ctx, complete(grows, redisstore.Set(k("a"), "v"), redisstore.IncrBy(k("n-a"), 1)))
	if err == nil || !strings.Contains(err.Error(), "OOM") {
		t.Errorf("a completion whose first command grows memory: %v, want refused for lack of memory", err)
	}
	if n := client.Exists(ctx, k("a"), k("n-a")).Val(); n != 0 || status("grows") != idemstore.StatusInProgress {
		t.Errorf("the refused completion left %d of its keys and a record %s", n, status("grows"))
	}

	if err := store.Complete(ctx, complete(frees, redisstore.Del(k("old")), redisstore.Set(k("b"), "v"), redisstore.IncrBy(k("n-b"), 1))); err != nil {
		t.Errorf("a completion whose first write is a DEL: %v, want applied whole", err)
	}
	if n := client.Exists(ctx, k("old"), k("b"), k("n-b")).Val(); n != 2 || status("frees") != idemstore.StatusCompleted {
		t.Errorf("the completion left %d of its keys (want b and n-b) and a record %s", n, status("frees"))
	}

	if _, err := store.Commit(ctx, idemstore.CommitRequest{Namespace: ns, Key: "commit", PayloadHash: "h", Token: "tok",
		Now: t0, Status: idemstore.StatusCompleted, ExpiresAt: t0.Add(time.Hour),
		Writes: []any{redisstore.Set(k("c"), "v"), redisstore.IncrBy(k("n-c"), 1)}}); err != nil {
		t.Errorf("an optimistic commit: %v, want applied whole", err)
	}
	if n := client.Exists(ctx, k("c"), k("n-c")).Val(); n != 2 || status("commit") != idemstore.StatusCompleted {
		t.Errorf("the commit left %d of its keys and a record %s", n, status("commit"))
	}

	errs := store.CompleteBatch(ctx, []idemstore.CompleteRequest{
		complete(batchGrows, redisstore.Set(k("d"), "v")),
		complete(batchFrees, redisstore.Del(k("batch-old")), redisstore.Set(k("e"), "v")),
	})
	if errs[0] == nil || client.Exists(ctx, k("d")).Val() != 0 || status("batch-grows") != idemstore.StatusInProgress {
		t.Errorf("the batch's first item: %v, want refused whole", errs[0])
	}
	if errs[1] != nil || client.Exists(ctx, k("batch-old"), k("e")).Val() != 1 || status("batch-frees") != idemstore.StatusCompleted {
		t.Errorf("the batch's second item: %v, want applied whole", errs[1])
	}

	// Memory freed, the refused completion applies, once.
	if err := client.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := store.Complete(ctx, complete(grows, redisstore.Set(k("a"), "v"), redisstore.IncrBy(k("n-a"), 1))); err != nil {
		t.Errorf("the refused completion sent again under no limit: %v", err)
	}
	if n, _ := client.Get(ctx, k("n-a")).Int(); n != 1 {
		t.Errorf("counter = %d, want 1", n)
	}
}
