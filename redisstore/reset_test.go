package redisstore_test

import (
	"errors"
	"testing"

	"github.com/lambdaidem/go-lambdaidem/internal/faultproxy"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// deadLettered claims key and dead-letters it as the DLQ copy copyID.
func (b *bundle) deadLettered(t *testing.T, key, copyID string) idemstore.Lease {
	t.Helper()
	c, err := b.direct.Claim(t.Context(), b.claimReq(key, 0))
	if err != nil || !c.Claimed {
		t.Fatal(c, err)
	}
	if err := b.direct.DeadLetter(t.Context(), idemstore.DeadLetterRequest{Lease: c.Lease, Now: b.at(1), Reason: idemstore.ReasonPoison,
		Error: "bad input", MessageID: "m-" + key, DeadLetterMessageID: copyID, ExpiresAt: b.at(3600)}); err != nil {
		t.Fatal(err)
	}
	return c.Lease
}

// TestLostResetReply: the reset ran, its reply was lost, the client sent
// it again. The re-sent script finds its own new token and reports the
// reset as made, once: one redrive, and the record moved from the
// DEAD_LETTERED open set to the FAILED one.
func TestLostResetReply(t *testing.T) {
	b := setup(t, 2)
	ctx := t.Context()
	b.deadLettered(t, "k", "dlq-1")
	req := idemstore.ResetRequest{Namespace: b.ns, Key: "k", DeadLetterMessageID: "dlq-1", Now: b.at(2)}
	b.dropNextReply()
	r, err := b.store.ResetDeadLetter(ctx, req)
	if err != nil || r.Status != idemstore.StatusFailed || r.Redrives != 1 || r.RedrivenFrom != "dlq-1" || r.Attempts != 0 {
		t.Fatalf("ResetDeadLetter after a lost reply = %+v, %v; want FAILED, redriven once from dlq-1, 0 attempts", r, err)
	}
	if n, d := b.proxy.Count("EVALSHA"), b.proxy.Applied(faultproxy.DropResponse); n != 2 || d != 1 {
		t.Fatalf("proxy saw %d EVALSHA, dropped %d replies; want 2, 1", n, d)
	}
	if got := b.get(t, "k", 2); got.Redrives != 1 || got.LeaseToken != r.LeaseToken || got.DeadLetterMessageID != "" {
		t.Fatalf("stored after the reset: redrives %d, token %q (want %q), copy %q", got.Redrives, got.LeaseToken, r.LeaseToken, got.DeadLetterMessageID)
	}
	for st, want := range map[idemstore.Status]int{idemstore.StatusDeadLettered: 0, idemstore.StatusFailed: 1} {
		if n, err := b.store.Count(ctx, idemstore.CountRequest{Status: st, Namespace: b.ns, Now: b.at(2)}); err != nil || n != want {
			t.Errorf("Count(%s) after the reset = %d, %v; want %d", st, n, err, want)
		}
	}
	// The same copy again: refused, with the record the script read.
	again, err := b.store.ResetDeadLetter(ctx, req)
	if !errors.Is(err, idemstore.ErrResetRefused) || again.Status != idemstore.StatusFailed || again.Redrives != 1 {
		t.Fatalf("second reset = %+v, %v; want ErrResetRefused with the FAILED record", again, err)
	}
}

// TestLostResetReplyWithoutRetry: a client that does not re-send reports
// the store unavailable, never success or refusal.
func TestLostResetReplyWithoutRetry(t *testing.T) {
	b := setup(t, -1)
	b.deadLettered(t, "k", "dlq-1")
	b.dropNextReply()
	_, err := b.store.ResetDeadLetter(t.Context(), idemstore.ResetRequest{Namespace: b.ns, Key: "k", DeadLetterMessageID: "dlq-1", Now: b.at(2)})
	if !errors.Is(err, idemstore.ErrStoreUnavailable) {
		t.Fatalf("reset with its reply lost and no retry = %v, want ErrStoreUnavailable", err)
	}
}

// TestResetWithoutCopyID: a reset that names no dead-letter copy is
// refused before anything is sent.
func TestResetWithoutCopyID(t *testing.T) {
	b := setup(t, 2)
	b.deadLettered(t, "k", "dlq-1")
	b.proxy.ResetCounts()
	_, err := b.store.ResetDeadLetter(t.Context(), idemstore.ResetRequest{Namespace: b.ns, Key: "k", Now: b.at(2)})
	if !errors.Is(err, idemstore.ErrResetRefused) || b.requests() != 0 {
		t.Fatalf("reset without a copy ID = %v after %d requests; want ErrResetRefused, none sent", err, b.requests())
	}
}
