package redisstore_test

import (
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/internal/faultproxy"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
)

// bundle is a store whose client goes through a RESP fault proxy in front
// of the real server, and a store straight to the server for checks.
type bundle struct {
	proxy  *faultproxy.RESP
	store  *redisstore.Store // through the proxy
	direct *redisstore.Store
	ns     string
	t0     time.Time
}

func setup(t *testing.T, retries int) *bundle {
	t.Helper()
	return setupWith(t, retries)
}

// setupWith is setup with options for both stores.
func setupWith(t *testing.T, retries int, opts ...redisstore.Option) *bundle {
	t.Helper()
	server := addr(t)
	p, err := faultproxy.NewRESP(server)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	viaProxy := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: retries, MinRetryBackoff: time.Millisecond, MaxRetryBackoff: 2 * time.Millisecond})
	t.Cleanup(func() { _ = viaProxy.Close() })
	b := &bundle{
		proxy:  p,
		store:  redisstore.New(viaProxy, "", opts...),
		direct: redisstore.New(newClient(t, server), "", opts...),
		ns:     "redisstore-" + rand.Text()[:12],
		t0:     time.Now().UTC().Truncate(time.Second),
	}
	// Cached scripts, so every call below is one EVALSHA.
	if err := b.direct.LoadScripts(t.Context()); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *bundle) at(sec int) time.Time { return b.t0.Add(time.Duration(sec) * time.Second) }

func (b *bundle) claimReq(key string, now int) idemstore.ClaimRequest {
	return idemstore.ClaimRequest{
		Namespace: b.ns, Key: key, PayloadHash: "hash", MessageID: "m-" + key,
		Now: b.at(now), LeaseUntil: b.at(now + 30), Grace: 2 * time.Second, ExpiresAt: b.at(now + 3600),
	}
}

func (b *bundle) get(t *testing.T, key string, now int) idemstore.Record {
	t.Helper()
	r, err := b.direct.Get(t.Context(), idemstore.GetRequest{Namespace: b.ns, Key: key, Now: b.at(now)})
	if err != nil {
		t.Fatalf("Get(%s): %v", key, err)
	}
	return r
}

// dropNextReply makes the server run the next script call and the client
// never hear its reply.
func (b *bundle) dropNextReply() {
	b.proxy.ResetCounts()
	b.proxy.Inject(faultproxy.RESPFault{Match: faultproxy.Command("EVALSHA"), Action: faultproxy.DropResponse, Times: 1})
}

// TestLostClaimReply: the claim ran, its reply was lost, the client sent it
// again. The re-sent script finds its own token and reports the claim as
// made, once: one attempt, one fence number.
func TestLostClaimReply(t *testing.T) {
	b := setup(t, 2)
	b.dropNextReply()
	res, err := b.store.Claim(t.Context(), b.claimReq("k", 0))
	if err != nil {
		t.Fatalf("Claim after a lost reply: %v", err)
	}
	if !res.Claimed || res.Lease.Attempt != 1 || res.Lease.Fence.Claim != 1 || res.Previous != "" {
		t.Fatalf("Claim after a lost reply = claimed %v, attempt %d, claim %d, previous %q; want true, 1, 1, \"\"",
			res.Claimed, res.Lease.Attempt, res.Lease.Fence.Claim, res.Previous)
	}
	if n, d := b.proxy.Count("EVALSHA"), b.proxy.Applied(faultproxy.DropResponse); n != 2 || d != 1 {
		t.Fatalf("proxy saw %d EVALSHA, dropped %d replies; want 2, 1", n, d)
	}
	if got := b.get(t, "k", 0); got.LeaseToken != res.Lease.Token || got.Attempts != 1 {
		t.Fatalf("stored token %q, attempts %d; want %q, 1", got.LeaseToken, got.Attempts, res.Lease.Token)
	}

	// A re-claim of a FAILED record keeps its previous status across a
	// lost reply too.
	if err := b.direct.Fail(t.Context(), idemstore.FailRequest{Lease: res.Lease, Now: b.at(1), Error: "x", ExpiresAt: b.at(3600)}); err != nil {
		t.Fatal(err)
	}
	b.dropNextReply()
	res, err = b.store.Claim(t.Context(), b.claimReq("k", 2))
	if err != nil || !res.Claimed || res.Previous != idemstore.StatusFailed || res.Lease.Attempt != 2 {
		t.Fatalf("re-claim after a lost reply = %+v, %v; want claimed, previous FAILED, attempt 2", res, err)
	}
}

// TestLostWriteReply: every fenced write whose reply was lost is re-sent
// and recognised as applied: a success, applied once.
func TestLostWriteReply(t *testing.T) {
	b := setup(t, 2)
	writes := map[idemstore.Status]func(l idemstore.Lease) error{
		idemstore.StatusCompleted: func(l idemstore.Lease) error {
			return b.store.Complete(t.Context(), idemstore.CompleteRequest{Lease: l, Now: b.at(1), Result: []byte(`"r"`), ExpiresAt: b.at(3600)})
		},
		idemstore.StatusFailed: func(l idemstore.Lease) error {
			return b.store.Fail(t.Context(), idemstore.FailRequest{Lease: l, Now: b.at(1), Error: "boom", ExpiresAt: b.at(3600)})
		},
		idemstore.StatusDeadLettered: func(l idemstore.Lease) error {
			return b.store.DeadLetter(t.Context(), idemstore.DeadLetterRequest{Lease: l, Now: b.at(1), Reason: idemstore.ReasonPoison,
				MessageID: "m", DeadLetterMessageID: "d", ExpiresAt: b.at(3600)})
		},
		idemstore.StatusInProgress: func(l idemstore.Lease) error {
			return b.store.Extend(t.Context(), idemstore.ExtendRequest{Lease: l, Now: b.at(1), LeaseUntil: b.at(90)})
		},
	}
	for status, write := range writes {
		key := "k-" + string(status)
		c, err := b.direct.Claim(t.Context(), b.claimReq(key, 0))
		if err != nil || !c.Claimed {
			t.Fatalf("Claim(%s) = %+v, %v", key, c, err)
		}
		b.dropNextReply()
		if err := write(c.Lease); err != nil {
			t.Errorf("write to %s after a lost reply: %v", status, err)
		}
		if n := b.proxy.Count("EVALSHA"); n != 2 {
			t.Errorf("write to %s: proxy saw %d EVALSHA, want 2 (one re-send)", status, n)
		}
		got := b.get(t, key, 1)
		if got.Status != status || got.LeaseToken != c.Lease.Token || got.Attempts != 1 {
			t.Errorf("after the write to %s: %s, token %q, attempts %d", status, got.Status, got.LeaseToken, got.Attempts)
		}
	}
}

// TestLostReplyWithoutRetry: a client that does not re-send reports the
// store unavailable, never success, and the record holds the lease the
// caller never heard of, so a new claim is refused until it runs out.
func TestLostReplyWithoutRetry(t *testing.T) {
	b := setup(t, -1)
	b.dropNextReply()
	_, err := b.store.Claim(t.Context(), b.claimReq("k", 0))
	if !errors.Is(err, idemstore.ErrStoreUnavailable) {
		t.Fatalf("Claim with its reply lost and no retry = %v, want ErrStoreUnavailable", err)
	}
	res, err := b.store.Claim(t.Context(), b.claimReq("k", 1))
	if err != nil || res.Claimed || res.Record.Status != idemstore.StatusInProgress {
		t.Fatalf("second Claim = %+v, %v; want refused by the IN_PROGRESS record", res, err)
	}
}

// TestLostPendingDeadLetterReply: a pending dead-letter mark whose reply
// was lost is re-sent and applies again under the same lease, changing
// nothing more: the record stays IN_PROGRESS with the reason recorded, so
// the holder goes on to send the copy.
func TestLostPendingDeadLetterReply(t *testing.T) {
	b := setup(t, 2)
	c, err := b.direct.Claim(t.Context(), b.claimReq("k", 0))
	if err != nil || !c.Claimed {
		t.Fatal(c, err)
	}
	b.dropNextReply()
	err = b.store.DeadLetter(t.Context(), idemstore.DeadLetterRequest{Lease: c.Lease, Now: b.at(1), Reason: idemstore.ReasonPoison,
		Error: "bad input", MessageID: "m-k", ExpiresAt: b.at(5000), Pending: true})
	if err != nil {
		t.Fatalf("pending DeadLetter after a lost reply: %v", err)
	}
	if n := b.proxy.Count("EVALSHA"); n != 2 {
		t.Errorf("proxy saw %d EVALSHA, want 2 (one re-send)", n)
	}
	got := b.get(t, "k", 1)
	if got.Status != idemstore.StatusInProgress || got.LeaseToken != c.Lease.Token || got.DeadLetterReason != idemstore.ReasonPoison ||
		got.DeadLetteredMessageID != "m-k" || got.DeadLetterMessageID != "" || !got.ExpiresAt.Equal(b.at(3600)) {
		t.Errorf("after the pending mark: %+v", got)
	}
}
