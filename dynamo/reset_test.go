package dynamo_test

import (
	"errors"
	"testing"

	"github.com/lambdaidem/go-lambdaidem/internal/faultproxy"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// TestResetDeadLetterRequests: a reset is one UpdateItem, applied or
// refused (the refusal carries the record: no second read), and a reset
// whose response was lost is recognised as applied on the SDK's retry.
func TestResetDeadLetterRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, testTuning)
	ctx := t.Context()
	deadLetter := func(key, copyID string) {
		t.Helper()
		c := b.mustClaim(t, b.claimReq(key, 0))
		if err := b.store.DeadLetter(ctx, idemstore.DeadLetterRequest{Lease: c.Lease, Now: b.at(1), Reason: idemstore.ReasonPoison, MessageID: "m", DeadLetterMessageID: copyID, ExpiresAt: b.at(3600)}); err != nil {
			t.Fatal(err)
		}
		b.proxy.ResetCounts()
	}
	req := func(key, copyID string) idemstore.ResetRequest {
		return idemstore.ResetRequest{Namespace: b.ns, Key: key, DeadLetterMessageID: copyID, Now: b.at(2)}
	}

	deadLetter("a", "copy-a")
	r, err := b.store.ResetDeadLetter(ctx, req("a", "copy-a"))
	if err != nil || r.Status != idemstore.StatusFailed || r.Redrives != 1 || r.RedrivenFrom != "copy-a" {
		t.Fatalf("reset = %+v, %v", r, err)
	}
	wantRequests(t, b.proxy, "reset", map[string]int{"UpdateItem": 1})

	r, err = b.store.ResetDeadLetter(ctx, req("a", "copy-a"))
	if !errors.Is(err, idemstore.ErrResetRefused) || r.Status != idemstore.StatusFailed || r.RedrivenFrom != "copy-a" {
		t.Fatalf("second reset = %+v, %v; want refused with the record", r, err)
	}
	wantRequests(t, b.proxy, "refused reset", map[string]int{"UpdateItem": 1})

	if _, err := b.store.ResetDeadLetter(ctx, req("absent", "copy-x")); !errors.Is(err, idemstore.ErrNotFound) {
		t.Fatalf("reset of an absent key = %v, want ErrNotFound", err)
	}
	wantRequests(t, b.proxy, "reset of an absent key", map[string]int{"UpdateItem": 1})

	deadLetter("lost", "copy-l")
	b.proxy.Inject(faultproxy.Fault{Match: faultproxy.Op("UpdateItem"), Action: faultproxy.DropResponse, Times: 1})
	r, err = b.store.ResetDeadLetter(ctx, req("lost", "copy-l"))
	if err != nil || r.Redrives != 1 || r.Status != idemstore.StatusFailed {
		t.Fatalf("reset after a lost response = %+v, %v; want applied once", r, err)
	}
	wantRequests(t, b.proxy, "reset with a lost response", map[string]int{"UpdateItem": 2})
}
