package memstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
)

// The smallest use: claim a key, record success, and see a duplicate
// refused with the stored result.
func Example() {
	ctx := context.Background()
	store := memstore.New()
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	claim := idemstore.ClaimRequest{
		Namespace:   "orders",
		Key:         "order-42",
		PayloadHash: "sha256-of-body",
		MessageID:   "msg-1",
		Now:         now,
		LeaseUntil:  now.Add(30 * time.Second),
		Grace:       5 * time.Second,
		ExpiresAt:   now.Add(96 * time.Hour),
	}

	first, _ := store.Claim(ctx, claim)
	fmt.Println("first claimed:", first.Claimed, "attempt", first.Lease.Attempt)

	_ = store.Complete(ctx, idemstore.CompleteRequest{
		Lease:     first.Lease,
		Now:       now.Add(time.Second),
		Result:    []byte(`{"shipped":true}`),
		ExpiresAt: now.Add(96 * time.Hour),
	})

	claim.MessageID = "msg-2" // the producer sent it again
	dup, _ := store.Claim(ctx, claim)
	fmt.Println("duplicate claimed:", dup.Claimed, dup.Record.Status, string(dup.Record.Result))
	fmt.Println("claims:", store.Stats().Claim)

	// Output:
	// first claimed: true attempt 1
	// duplicate claimed: false COMPLETED {"shipped":true}
	// claims: 2
}
