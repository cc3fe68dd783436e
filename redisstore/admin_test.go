package redisstore_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
)

func TestRelease(t *testing.T) {
	b := setup(t, 2)
	ctx := t.Context()
	c, err := b.direct.Claim(ctx, b.claimReq("k", 0))
	if err != nil || !c.Claimed {
		t.Fatal(c, err)
	}
	req := redisstore.ReleaseRequest{Namespace: b.ns, Key: "k", Token: c.Lease.Token, Now: b.at(10)}
	if _, err := b.store.Release(ctx, req); !errors.Is(err, redisstore.ErrLeaseValid) {
		t.Fatalf("Release of a valid lease = %v, want ErrLeaseValid", err)
	}
	stale := req
	stale.Token, stale.Now = "someone-else", b.at(31)
	if _, err := b.store.Release(ctx, stale); !errors.Is(err, redisstore.ErrRecordChanged) {
		t.Fatalf("Release with another token = %v, want ErrRecordChanged", err)
	}
	// Its reply lost, the re-sent release finds its own new token.
	b.dropNextReply()
	req.Now = b.at(31)
	r, err := b.store.Release(ctx, req)
	if err != nil || r.Status != lambdaidem.StatusFailed || r.LeaseToken == c.Lease.Token {
		t.Fatalf("Release of an expired lease = %+v, %v; want FAILED under a new token", r, err)
	}
	if _, err := b.store.Release(ctx, req); !errors.Is(err, redisstore.ErrRecordChanged) {
		t.Fatalf("second Release = %v, want ErrRecordChanged", err)
	}
	// The old holder is fenced off; the next delivery claims it again.
	if err := b.store.Complete(ctx, lambdaidem.CompleteRequest{Lease: c.Lease, Now: b.at(32), ExpiresAt: b.at(3600)}); !errors.Is(err, lambdaidem.ErrLeaseLost) {
		t.Fatalf("old holder's Complete = %v, want ErrLeaseLost", err)
	}
	again, err := b.store.Claim(ctx, b.claimReq("k", 33))
	if err != nil || !again.Claimed || again.Previous != lambdaidem.StatusFailed || again.Lease.Attempt != 2 {
		t.Fatalf("claim after release = %+v, %v", again, err)
	}
	done := req
	done.Token, done.Force = again.Lease.Token, true
	if err := b.store.Complete(ctx, lambdaidem.CompleteRequest{Lease: again.Lease, Now: b.at(34), ExpiresAt: b.at(3600)}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Release(ctx, done); !errors.Is(err, redisstore.ErrNotInProgress) {
		t.Fatalf("Release of a COMPLETED record = %v, want ErrNotInProgress", err)
	}
}

func TestForget(t *testing.T) {
	b := setup(t, 2)
	ctx := t.Context()
	if _, err := b.store.Claim(ctx, b.claimReq("k", 0)); err != nil {
		t.Fatal(err)
	}
	req := redisstore.ForgetRequest{Namespace: b.ns, Key: "k", Now: b.at(1)}
	if _, err := b.store.Forget(ctx, req); !errors.Is(err, redisstore.ErrLeaseValid) {
		t.Fatalf("Forget of a valid lease = %v, want ErrLeaseValid", err)
	}
	req.Force = true
	if r, err := b.store.Forget(ctx, req); err != nil || r.Key != "k" || r.Status != lambdaidem.StatusInProgress {
		t.Fatalf("forced Forget = %+v, %v", r, err)
	}
	if _, err := b.store.Forget(ctx, req); !errors.Is(err, lambdaidem.ErrNotFound) {
		t.Fatalf("Forget of an absent record = %v, want ErrNotFound", err)
	}
	if n, err := b.store.Count(ctx, redisstore.CountRequest{Status: lambdaidem.StatusInProgress, Namespace: b.ns, Now: b.at(1)}); err != nil || n != 0 {
		t.Fatalf("Count after Forget = %d, %v; want 0", n, err)
	}
}

// TestOpenSets: the open sets follow every transition, listing and counting
// read them without a scan, and expired records drop out.
func TestOpenSets(t *testing.T) {
	b := setup(t, 2)
	ctx := t.Context()
	leases := map[string]lambdaidem.Lease{}
	for i := range 7 {
		key := fmt.Sprintf("k%d", i)
		req := b.claimReq(key, 0)
		if i == 6 {
			req.ExpiresAt = b.at(20) // gone by second 21
		}
		c, err := b.store.Claim(ctx, req)
		if err != nil || !c.Claimed {
			t.Fatal(c, err)
		}
		leases[key] = c.Lease
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(b.store.Complete(ctx, lambdaidem.CompleteRequest{Lease: leases["k0"], Now: b.at(1), ExpiresAt: b.at(3600)}))
	must(b.store.Fail(ctx, lambdaidem.FailRequest{Lease: leases["k1"], Now: b.at(1), Error: "x", ExpiresAt: b.at(3600)}))
	must(b.store.Fail(ctx, lambdaidem.FailRequest{Lease: leases["k2"], Now: b.at(1), Error: "x", ExpiresAt: b.at(3600)}))
	must(b.store.DeadLetter(ctx, lambdaidem.DeadLetterRequest{Lease: leases["k3"], Now: b.at(1), Reason: lambdaidem.ReasonPoison,
		MessageID: "m", DeadLetterMessageID: "d", ExpiresAt: b.at(3600)}))
	must(b.store.Delete(ctx, lambdaidem.DeleteRequest{Namespace: b.ns, Key: "k4"}))
	// k5 and k6 stay IN_PROGRESS; k6 expires at 20.

	b.proxy.ResetCounts()
	// Equal expiries list in key order (the sets break ties by member).
	want := map[lambdaidem.Status][]string{
		lambdaidem.StatusInProgress:   {"k5"},
		lambdaidem.StatusFailed:       {"k1", "k2"},
		lambdaidem.StatusDeadLettered: {"k3"},
	}
	for st, keys := range want {
		var got []string
		for r, err := range b.store.ListOpen(ctx, redisstore.ListOpenRequest{Status: st, Namespace: b.ns, Now: b.at(21), PageSize: 1}) {
			must(err)
			got = append(got, r.Key)
		}
		if fmt.Sprint(got) != fmt.Sprint(keys) {
			t.Errorf("ListOpen(%s) = %v, want %v", st, got, keys)
		}
		n, err := b.store.Count(ctx, redisstore.CountRequest{Status: st, Namespace: b.ns, Now: b.at(21)})
		if err != nil || n != len(keys) {
			t.Errorf("Count(%s) = %d, %v; want %d", st, n, err, len(keys))
		}
	}
	if b.proxy.Count("SCAN") != 0 || b.proxy.Count("KEYS") != 0 {
		t.Error("listing scanned the keyspace")
	}
	stuck, err := b.store.Count(ctx, redisstore.CountRequest{Status: lambdaidem.StatusInProgress, Namespace: b.ns, Now: b.at(31), LeaseEndedBefore: b.at(31)})
	if err != nil || stuck != 1 {
		t.Errorf("stuck count = %d, %v; want 1 (k5)", stuck, err)
	}
	if _, err := b.store.Count(ctx, redisstore.CountRequest{Status: lambdaidem.StatusCompleted, Namespace: b.ns}); !errors.Is(err, redisstore.ErrNotIndexed) {
		t.Errorf("Count(COMPLETED) = %v, want ErrNotIndexed", err)
	}
	if _, err := b.store.Count(ctx, redisstore.CountRequest{Status: lambdaidem.StatusFailed}); !errors.Is(err, redisstore.ErrNoNamespace) {
		t.Errorf("Count without a namespace = %v, want ErrNoNamespace", err)
	}
}

// TestNamespaceIsHashTag: a namespace that would break the hash tag is
// refused before anything is sent.
func TestNamespaceIsHashTag(t *testing.T) {
	b := setup(t, 2)
	b.proxy.ResetCounts()
	req := b.claimReq("k", 0)
	req.Namespace = "a}b"
	if _, err := b.store.Claim(t.Context(), req); !errors.Is(err, redisstore.ErrInvalidKey) {
		t.Fatalf("Claim in namespace %q = %v, want ErrInvalidKey", req.Namespace, err)
	}
	if n := b.proxy.Count("EVALSHA"); n != 0 {
		t.Fatalf("%d scripts sent for an invalid namespace", n)
	}
}
