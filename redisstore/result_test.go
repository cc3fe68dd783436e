package redisstore_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
)

// recordKey and resultKey are the keys the package documentation lays out
// for a record of the bundle's namespace under the default prefix.
func (b *bundle) recordKey(key string) string { return "lambdaidem:{" + b.ns + "}:r:" + key }
func (b *bundle) resultKey(key string) string { return "lambdaidem:{" + b.ns + "}:res:" + key }

// requests is the number of commands the proxy received since its counts
// were last reset.
func (b *bundle) requests() int {
	n := 0
	for _, c := range b.proxy.Counts() {
		n += c
	}
	return n
}

// expireTime is the key's PEXPIRETIME in Unix ms (-1: none, -2: no key).
func (b *bundle) expireTime(t *testing.T, key string) int64 {
	t.Helper()
	ms, err := b.direct.Client().PExpireTime(t.Context(), key).Result()
	if err != nil {
		t.Fatalf("PEXPIRETIME %s: %v", key, err)
	}
	return ms.Milliseconds()
}

// TestLargeResultApart: a result over the inline limit lives apart from
// the record, so a claim that does not replay it gets a small reply; a
// replay still reads it in one round trip, and it expires with its
// ResultUntil.
func TestLargeResultApart(t *testing.T) {
	b := setup(t, 2)
	ctx := t.Context()
	slack := redisstore.DefaultExpirySlack.Milliseconds()
	large := bytes.Repeat([]byte("0123456789abcdef"), idemstore.MinResultBytes/16+1)
	c, err := b.store.Claim(ctx, b.claimReq("big", 0))
	if err != nil || !c.Claimed {
		t.Fatal(c, err)
	}
	if err := b.store.Complete(ctx, idemstore.CompleteRequest{
		Lease: c.Lease, Now: b.at(1), Result: large, ResultUntil: b.at(60), ExpiresAt: b.at(3600),
	}); err != nil {
		t.Fatal(err)
	}
	client := b.direct.Client()
	if in, err := client.HExists(ctx, b.recordKey("big"), "r").Result(); err != nil || in {
		t.Errorf("the record's hash holds the large result (%v, %v)", in, err)
	}
	if got, want := b.expireTime(t, b.resultKey("big")), b.at(60).UnixMilli()+slack; got != want {
		t.Errorf("the result's PEXPIRETIME = %d, want %d (ResultUntil plus the slack)", got, want)
	}
	if got, want := b.expireTime(t, b.recordKey("big")), b.at(3600).UnixMilli()+slack; got != want {
		t.Errorf("the record's PEXPIRETIME = %d, want %d", got, want)
	}

	// A replay: the result, in one script call.
	b.proxy.ResetCounts()
	res, err := b.store.Claim(ctx, b.claimReq("big", 2))
	if err != nil || res.Claimed || !bytes.Equal(res.Record.Result, large) {
		t.Fatalf("replaying claim = claimed %v, %d result bytes, %v; want refused with %d", res.Claimed, len(res.Record.Result), err, len(large))
	}
	if n := b.requests(); n != 1 {
		t.Errorf("replaying claim took %d requests, want 1", n)
	}
	// A conflict and a claim after ResultUntil are refused without it.
	other := b.claimReq("big", 3)
	other.PayloadHash = "other"
	for name, req := range map[string]idemstore.ClaimRequest{"conflicting": other, "late": b.claimReq("big", 61)} {
		res, err := b.store.Claim(ctx, req)
		if err != nil || res.Claimed || res.Record.Status != idemstore.StatusCompleted || res.Record.Result != nil {
			t.Errorf("%s claim = claimed %v, %s, %d result bytes, %v; want refused by COMPLETED, no result",
				name, res.Claimed, res.Record.Status, len(res.Record.Result), err)
		}
	}
	if r := b.get(t, "big", 2); !bytes.Equal(r.Result, large) {
		t.Errorf("Get returned %d result bytes, want %d", len(r.Result), len(large))
	}
	if r := b.get(t, "big", 61); r.Result != nil {
		t.Errorf("Get after ResultUntil returned %d result bytes, want none", len(r.Result))
	}

	// A small result stays in the record's hash, with nothing apart.
	c, err = b.store.Claim(ctx, b.claimReq("small", 0))
	if err != nil || !c.Claimed {
		t.Fatal(c, err)
	}
	if err := b.store.Complete(ctx, idemstore.CompleteRequest{Lease: c.Lease, Now: b.at(1), Result: []byte(`"ok"`), ExpiresAt: b.at(3600)}); err != nil {
		t.Fatal(err)
	}
	if n, err := client.Exists(ctx, b.resultKey("small")).Result(); err != nil || n != 0 {
		t.Errorf("a small result was kept apart (%d, %v)", n, err)
	}

	// Forget takes the result with the record.
	if _, err := b.store.Forget(ctx, idemstore.ForgetRequest{Namespace: b.ns, Key: "big", Now: b.at(3)}); err != nil {
		t.Fatal(err)
	}
	if n, err := client.Exists(ctx, b.resultKey("big")).Result(); err != nil || n != 0 {
		t.Errorf("Forget left the result behind (%d, %v)", n, err)
	}
}

// TestTamperedResult: a result hash that does not carry the completion's
// token (only a hand on the keys can do that) is an error, never replayed.
func TestTamperedResult(t *testing.T) {
	b := setup(t, 2)
	ctx := t.Context()
	c, err := b.store.Claim(ctx, b.claimReq("k", 0))
	if err != nil || !c.Claimed {
		t.Fatal(c, err)
	}
	if err := b.store.Complete(ctx, idemstore.CompleteRequest{
		Lease: c.Lease, Now: b.at(1), Result: bytes.Repeat([]byte("x"), 4096), ExpiresAt: b.at(3600),
	}); err != nil {
		t.Fatal(err)
	}
	if err := b.direct.Client().HSet(ctx, b.resultKey("k"), "t", "someone-else").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Claim(ctx, b.claimReq("k", 2)); !errors.Is(err, idemstore.ErrStoreUnavailable) {
		t.Errorf("replaying claim of a tampered result = %v, want ErrStoreUnavailable", err)
	}
	if _, err := b.store.Get(ctx, idemstore.GetRequest{Namespace: b.ns, Key: "k", Now: b.at(2)}); !errors.Is(err, idemstore.ErrStoreUnavailable) {
		t.Errorf("Get of a tampered result = %v, want ErrStoreUnavailable", err)
	}
}

// TestExtendMovesKeyExpiry: an extension with ExpiresAt moves the key's
// PEXPIREAT and the record's score in the open set with it, so the server
// never deletes a record whose lease is being extended; a pending
// dead-letter mark and an extension without ExpiresAt leave both alone.
func TestExtendMovesKeyExpiry(t *testing.T) {
	b := setup(t, 2)
	ctx := t.Context()
	slack := redisstore.DefaultExpirySlack.Milliseconds()
	req := b.claimReq("k", 0)
	req.ExpiresAt = b.at(60)
	c, err := b.store.Claim(ctx, req)
	if err != nil || !c.Claimed {
		t.Fatal(c, err)
	}
	check := func(when string, at time.Time) {
		t.Helper()
		if got, want := b.expireTime(t, b.recordKey("k")), at.UnixMilli()+slack; got != want {
			t.Errorf("%s: PEXPIRETIME = %d, want %d", when, got, want)
		}
		set := "lambdaidem:{" + b.ns + "}:open:IN_PROGRESS"
		if score, err := b.direct.Client().ZScore(ctx, set, "k").Result(); err != nil || int64(score) != at.UnixMilli() {
			t.Errorf("%s: open-set score = %v, %v; want %d", when, int64(score), err, at.UnixMilli())
		}
	}
	check("after the claim", b.at(60))
	if err := b.store.Extend(ctx, idemstore.ExtendRequest{Lease: c.Lease, Now: b.at(20), LeaseUntil: b.at(80), ExpiresAt: b.at(200)}); err != nil {
		t.Fatal(err)
	}
	check("after Extend with ExpiresAt", b.at(200))
	if err := b.store.Extend(ctx, idemstore.ExtendRequest{Lease: c.Lease, Now: b.at(30), LeaseUntil: b.at(90)}); err != nil {
		t.Fatal(err)
	}
	check("after Extend without ExpiresAt", b.at(200))
	if err := b.store.DeadLetter(ctx, idemstore.DeadLetterRequest{Lease: c.Lease, Now: b.at(31), Reason: idemstore.ReasonPoison,
		Error: "bad", MessageID: "m", ExpiresAt: b.at(5000), Pending: true}); err != nil {
		t.Fatal(err)
	}
	check("after a pending DeadLetter", b.at(200))
}
