package redisstore_test

import (
	"crypto/rand"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
)

// TestBatchWithoutCachedScripts runs the batched claims and completions on
// a server that has forgotten the store's scripts (a restart, a failover,
// SCRIPT FLUSH): the batch's EVALSHA is refused with NOSCRIPT and nothing
// runs, so it is sent again as an EVAL, which loads the script.
func TestBatchWithoutCachedScripts(t *testing.T) {
	client := newClient(t, addr(t))
	store := redisstore.New(client, "")
	ns := "batch-" + rand.Text()[:8]
	now := time.Now().Truncate(time.Second)
	var reqs []idemstore.ClaimRequest
	for i := range 3 {
		reqs = append(reqs, idemstore.ClaimRequest{Namespace: ns, Key: fmt.Sprint("k", i), PayloadHash: "h", MessageID: "m",
			Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)})
	}
	if err := client.ScriptFlush(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	var completes []idemstore.CompleteRequest
	for i, o := range store.ClaimBatch(t.Context(), reqs) {
		if o.Err != nil || !o.Result.Claimed {
			t.Fatalf("claim %d without cached scripts = %+v", i, o)
		}
		completes = append(completes, idemstore.CompleteRequest{Lease: o.Result.Lease, Now: now, ExpiresAt: now.Add(time.Hour)})
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
		got, err := store.Get(t.Context(), idemstore.GetRequest{Namespace: ns, Key: r.Key, Now: now})
		if err != nil || got.Status != idemstore.StatusCompleted {
			t.Errorf("%s after the batch: %+v, %v", r.Key, got, err)
		}
	}
}

// TestBatchStepErrorStaysWithItsKey: one script call serves the whole
// batch, and a key whose step raises an error in it (here a record key
// someone overwrote with a string, so HGETALL meets the wrong type) gets
// the answer its single call gets — the store unavailable for that key —
// while the other keys of the batch are claimed and completed.
func TestBatchStepErrorStaysWithItsKey(t *testing.T) {
	client := newClient(t, addr(t))
	store := redisstore.New(client, "")
	ns := "batch-" + rand.Text()[:8]
	now := time.Now().Truncate(time.Second)
	req := func(key string) idemstore.ClaimRequest {
		return idemstore.ClaimRequest{Namespace: ns, Key: key, PayloadHash: "h", MessageID: "m-" + key,
			Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}
	}
	recordKey := func(key string) string { return redisstore.DefaultPrefix + ":{" + ns + "}:r:" + key }
	if err := client.Set(t.Context(), recordKey("wrong"), "not a hash", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	_, single := store.Claim(t.Context(), req("wrong"))
	if !errors.Is(single, idemstore.ErrStoreUnavailable) {
		t.Fatalf("single claim of a key of the wrong type: %v, want ErrStoreUnavailable", single)
	}

	got := store.ClaimBatch(t.Context(), []idemstore.ClaimRequest{req("a"), req("wrong"), req("b")})
	if !errors.Is(got[1].Err, idemstore.ErrStoreUnavailable) || got[1].Result.Claimed {
		t.Errorf("batched claim of the key of the wrong type: %+v, want ErrStoreUnavailable as alone (%v)", got[1], single)
	}
	var completes []idemstore.CompleteRequest
	for _, i := range []int{0, 2} {
		if got[i].Err != nil || !got[i].Result.Claimed {
			t.Fatalf("claim %d beside it: %+v", i, got[i])
		}
		completes = append(completes, idemstore.CompleteRequest{Lease: got[i].Result.Lease, Now: now, ExpiresAt: now.Add(time.Hour)})
	}

	// The same in a completion: b's record is overwritten after its claim.
	if err := client.Set(t.Context(), recordKey("b"), "not a hash", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	errs := store.CompleteBatch(t.Context(), completes)
	if errs[0] != nil {
		t.Errorf("completion of a beside the broken record: %v", errs[0])
	}
	if !errors.Is(errs[1], idemstore.ErrStoreUnavailable) {
		t.Errorf("completion of the overwritten record: %v, want ErrStoreUnavailable", errs[1])
	}
	rec, err := store.Get(t.Context(), idemstore.GetRequest{Namespace: ns, Key: "a", Now: now})
	if err != nil || rec.Status != idemstore.StatusCompleted || rec.Attempts != 1 {
		t.Errorf("a after the batch: %s at attempt %d (%v), want COMPLETED at attempt 1", rec.Status, rec.Attempts, err)
	}
}
