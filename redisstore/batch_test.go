package redisstore_test

import (
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
)

// TestBatchWithoutCachedScripts runs the batched claims and completions on
// a server that has forgotten the store's scripts (a restart, a failover,
// SCRIPT FLUSH): a pipelined EVALSHA is refused with NOSCRIPT and nothing
// runs, so each key falls back to its own call, which loads the script.
func TestBatchWithoutCachedScripts(t *testing.T) {
	client := newClient(t, addr(t))
	store := redisstore.New(client, redisstore.Options{})
	ns := "batch-" + rand.Text()[:8]
	now := time.Now().Truncate(time.Second)
	var reqs []lambdaidem.ClaimRequest
	for i := range 3 {
		reqs = append(reqs, lambdaidem.ClaimRequest{Namespace: ns, Key: fmt.Sprint("k", i), PayloadHash: "h", MessageID: "m",
			Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)})
	}
	if err := client.ScriptFlush(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	var completes []lambdaidem.CompleteRequest
	for i, o := range store.ClaimBatch(t.Context(), reqs) {
		if o.Err != nil || !o.Result.Claimed {
			t.Fatalf("claim %d without cached scripts = %+v", i, o)
		}
		completes = append(completes, lambdaidem.CompleteRequest{Lease: o.Result.Lease, Now: now, ExpiresAt: now.Add(time.Hour)})
	}
	if err := client.ScriptFlush(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	for i, err := range store.CompleteBatch(t.Context(), completes) {
		if err != nil {
			t.Errorf("complete %d without cached scripts: %v", i, err)
		}
	}
	for _, r := range reqs {
		got, err := store.Get(t.Context(), lambdaidem.GetRequest{Namespace: ns, Key: r.Key, Now: now})
		if err != nil || got.Status != lambdaidem.StatusCompleted {
			t.Errorf("%s after the batch: %+v, %v", r.Key, got, err)
		}
	}
}
