package dynamo_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// TestOpenIndex: the sparse index lists IN_PROGRESS, FAILED and
// DEAD_LETTERED records and drops them once COMPLETED.
func TestOpenIndex(t *testing.T) {
	t.Parallel()
	b := setup(t, testTuning)
	ctx := t.Context()
	leases := map[string]idemstore.Lease{}
	for i, k := range []string{"running", "failed", "dead", "done"} {
		leases[k] = b.mustClaim(t, b.claimReq(k, i)).Lease
	}
	if err := b.store.Fail(ctx, idemstore.FailRequest{Lease: leases["failed"], Now: b.at(10), Error: "e", ExpiresAt: b.at(3600)}); err != nil {
		t.Fatal(err)
	}
	if err := b.store.DeadLetter(ctx, idemstore.DeadLetterRequest{Lease: leases["dead"], Now: b.at(11), Reason: idemstore.ReasonPoison, ExpiresAt: b.at(3600)}); err != nil {
		t.Fatal(err)
	}
	if err := b.store.Complete(ctx, idemstore.CompleteRequest{Lease: leases["done"], Now: b.at(12), ExpiresAt: b.at(3600)}); err != nil {
		t.Fatal(err)
	}
	// Another namespace's record, filtered out by Namespace.
	other := b.claimReq("running", 0)
	other.Namespace = "other"
	b.mustClaim(t, other)

	list := func(status idemstore.Status, before time.Time) []string {
		t.Helper()
		var keys []string
		for r, err := range b.store.ListOpen(ctx, idemstore.ListOpenRequest{Status: status, Namespace: b.ns, UpdatedBefore: before, Now: b.at(20), PageSize: 1}) {
			if err != nil {
				t.Fatalf("ListOpen(%s): %v", status, err)
			}
			keys = append(keys, r.Key)
		}
		return keys
	}
	// DynamoDB Local keeps its indexes in step with the table, so a single
	// read suffices here; on AWS the index lags by a moment.
	if got := list(idemstore.StatusInProgress, time.Time{}); !slices.Equal(got, []string{"running"}) {
		t.Errorf("IN_PROGRESS: %v, want [running] (done is COMPLETED)", got)
	}
	if got := list(idemstore.StatusFailed, time.Time{}); !slices.Equal(got, []string{"failed"}) {
		t.Errorf("FAILED: %v", got)
	}
	if got := list(idemstore.StatusDeadLettered, time.Time{}); !slices.Equal(got, []string{"dead"}) {
		t.Errorf("DEAD_LETTERED: %v", got)
	}
	if got := list(idemstore.StatusFailed, b.at(10)); len(got) != 0 {
		t.Errorf("FAILED updated before the failure: %v, want none", got)
	}
	for _, err := range b.store.ListOpen(ctx, idemstore.ListOpenRequest{Status: idemstore.StatusCompleted}) {
		if !errors.Is(err, idemstore.ErrNotIndexed) {
			t.Errorf("ListOpen(COMPLETED) yielded %v, want ErrNotIndexed", err)
		}
	}
	// An expired record is absent from the listing too.
	var n int
	for _, err := range b.store.ListOpen(ctx, idemstore.ListOpenRequest{Status: idemstore.StatusFailed, Namespace: b.ns, Now: b.at(7200)}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 0 {
		t.Errorf("%d expired records listed", n)
	}
}
