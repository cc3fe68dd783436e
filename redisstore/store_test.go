package redisstore_test

import (
	"testing"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// TestZeroTimesAndOddKeys: a zero LeaseUntil is "long ago" (as in the
// in-memory store), not a script error (an extension to it changes
// nothing), and keys may hold any bytes,
// braces included: only the namespace is the hash tag.
func TestZeroTimesAndOddKeys(t *testing.T) {
	b := setup(t, 2)
	ctx := t.Context()
	for _, key := range []string{"a}b{c", "with space:and:colons", "ünï/cødé", "{ns}"} {
		req := b.claimReq(key, 0)
		req.LeaseUntil = time.Time{}
		c, err := b.store.Claim(ctx, req)
		if err != nil || !c.Claimed {
			t.Fatalf("Claim(%q) with a zero lease = %+v, %v", key, c, err)
		}
		if !c.Record.LeaseUntil.IsZero() || c.Record.Key != key {
			t.Errorf("Claim(%q): record key %q, lease until %v", key, c.Record.Key, c.Record.LeaseUntil)
		}
		// The lease counts as long expired: the next claim takes it over.
		next, err := b.store.Claim(ctx, b.claimReq(key, 1))
		if err != nil || !next.Claimed || next.Previous != idemstore.StatusInProgress || next.Record.Takeovers != 1 {
			t.Fatalf("takeover of %q = %+v, %v", key, next, err)
		}
		if err := b.store.Extend(ctx, idemstore.ExtendRequest{Lease: next.Lease, Now: b.at(2)}); err != nil {
			t.Errorf("Extend(%q) to a zero time: %v", key, err)
		}
		// An extension never moves the lease's end back, to long ago
		// included.
		if got := b.get(t, key, 2); !got.LeaseUntil.Equal(next.Record.LeaseUntil) || got.LeaseToken != next.Lease.Token {
			t.Errorf("after Extend(%q): %+v", key, got)
		}
	}
}
