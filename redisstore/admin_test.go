package redisstore_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
)

// TestRelease: a release whose reply was lost is recognised by its new
// token when re-sent; the open sets follow it. (The contract is the
// conformance suite's.)
func TestRelease(t *testing.T) {
	b := setup(t, 2)
	ctx := t.Context()
	c, err := b.direct.Claim(ctx, b.claimReq("k", 0))
	if err != nil || !c.Claimed {
		t.Fatal(c, err)
	}
	req := idemstore.ReleaseRequest{Namespace: b.ns, Key: "k", Token: c.Lease.Token, Now: b.at(31)}
	b.dropNextReply()
	r, err := b.store.Release(ctx, req)
	if err != nil || r.Status != idemstore.StatusFailed || r.LeaseToken == c.Lease.Token {
		t.Fatalf("Release of an expired lease = %+v, %v; want FAILED under a new token", r, err)
	}
	if _, err := b.store.Release(ctx, req); !errors.Is(err, idemstore.ErrRecordChanged) {
		t.Fatalf("second Release = %v, want ErrRecordChanged", err)
	}
	for st, want := range map[idemstore.Status]int{idemstore.StatusInProgress: 0, idemstore.StatusFailed: 1} {
		if n, err := b.store.Count(ctx, idemstore.CountRequest{Status: st, Namespace: b.ns, Now: b.at(31)}); err != nil || n != want {
			t.Errorf("Count(%s) after Release = %d, %v; want %d", st, n, err, want)
		}
	}
}

// TestForget: a forced forget of a live lease keeps the record in its open
// set, scored by its new expiry, until the lease has run out; a re-sent
// forget whose reply was lost finds its own token.
func TestForget(t *testing.T) {
	b := setup(t, 2)
	ctx := t.Context()
	if _, err := b.store.Claim(ctx, b.claimReq("k", 0)); err != nil { // lease until 30
		t.Fatal(err)
	}
	req := idemstore.ForgetRequest{Namespace: b.ns, Key: "k", Now: b.at(1), Grace: 5 * time.Second, Force: true}
	b.dropNextReply()
	res, err := b.store.Forget(ctx, req)
	if err != nil || !res.Revoked || !res.ForgottenAt.Equal(b.at(35)) {
		t.Fatalf("forced Forget of a live lease = %+v, %v; want revoked, forgotten at 35", res, err)
	}
	count := func(sec int) int {
		t.Helper()
		n, err := b.store.Count(ctx, idemstore.CountRequest{Status: idemstore.StatusInProgress, Namespace: b.ns, Now: b.at(sec)})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(35); n != 1 {
		t.Errorf("Count(IN_PROGRESS) at 35 = %d, want 1", n)
	}
	if n := count(36); n != 0 {
		t.Errorf("Count(IN_PROGRESS) at 36 = %d, want 0: the record expired", n)
	}
	if _, err := b.store.Forget(ctx, idemstore.ForgetRequest{Namespace: b.ns, Key: "k", Now: b.at(36)}); !errors.Is(err, idemstore.ErrNotFound) {
		t.Fatalf("Forget after the revoked lease ran out = %v, want ErrNotFound", err)
	}
}

// TestOpenSets: the open sets follow every transition, listing and counting
// read them without a scan, and expired records drop out.
func TestOpenSets(t *testing.T) {
	b := setup(t, 2)
	ctx := t.Context()
	leases := map[string]idemstore.Lease{}
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
	must(b.store.Complete(ctx, idemstore.CompleteRequest{Lease: leases["k0"], Now: b.at(1), ExpiresAt: b.at(3600)}))
	must(b.store.Fail(ctx, idemstore.FailRequest{Lease: leases["k1"], Now: b.at(1), Error: "x", ExpiresAt: b.at(3600)}))
	must(b.store.Fail(ctx, idemstore.FailRequest{Lease: leases["k2"], Now: b.at(1), Error: "x", ExpiresAt: b.at(3600)}))
	must(b.store.DeadLetter(ctx, idemstore.DeadLetterRequest{Lease: leases["k3"], Now: b.at(1), Reason: idemstore.ReasonPoison,
		MessageID: "m", DeadLetterMessageID: "d", ExpiresAt: b.at(3600)}))
	must(b.store.Delete(ctx, idemstore.DeleteRequest{Namespace: b.ns, Key: "k4"}))
	// k5 and k6 stay IN_PROGRESS; k6 expires at 20.

	b.proxy.ResetCounts()
	// Equal expiries list in key order (the sets break ties by member).
	want := map[idemstore.Status][]string{
		idemstore.StatusInProgress:   {"k5"},
		idemstore.StatusFailed:       {"k1", "k2"},
		idemstore.StatusDeadLettered: {"k3"},
	}
	for st, keys := range want {
		var got []string
		for r, err := range b.store.ListOpen(ctx, idemstore.ListOpenRequest{Status: st, Namespace: b.ns, Now: b.at(21), PageSize: 1}) {
			must(err)
			got = append(got, r.Key)
		}
		if fmt.Sprint(got) != fmt.Sprint(keys) {
			t.Errorf("ListOpen(%s) = %v, want %v", st, got, keys)
		}
		n, err := b.store.Count(ctx, idemstore.CountRequest{Status: st, Namespace: b.ns, Now: b.at(21)})
		if err != nil || n != len(keys) {
			t.Errorf("Count(%s) = %d, %v; want %d", st, n, err, len(keys))
		}
	}
	if b.proxy.Count("SCAN") != 0 || b.proxy.Count("KEYS") != 0 {
		t.Error("listing scanned the keyspace")
	}
	stuck, err := b.store.Count(ctx, idemstore.CountRequest{Status: idemstore.StatusInProgress, Namespace: b.ns, Now: b.at(31), LeaseEndedBefore: b.at(31)})
	if err != nil || stuck != 1 {
		t.Errorf("stuck count = %d, %v; want 1 (k5)", stuck, err)
	}
	if _, err := b.store.Count(ctx, idemstore.CountRequest{Status: idemstore.StatusCompleted, Namespace: b.ns}); !errors.Is(err, idemstore.ErrNotIndexed) {
		t.Errorf("Count(COMPLETED) = %v, want ErrNotIndexed", err)
	}
	if _, err := b.store.Count(ctx, idemstore.CountRequest{Status: idemstore.StatusFailed}); !errors.Is(err, idemstore.ErrNamespaceRequired) {
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
