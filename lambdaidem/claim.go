package lambdaidem

import (
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// minClaimBudget is the least time beyond the margin a claim needs: a
// claim cut off by the deadline may have applied in the store with its
// answer lost, leaving the record IN_PROGRESS (an attempt counted) until
// its lease and the grace run out.
const minClaimBudget = 250 * time.Millisecond

// canClaim reports whether there is time to claim and run a record.
func (t timing) canClaim(now time.Time) bool {
	return t.deadline.IsZero() || t.deadline.Sub(now) > t.margin+minClaimBudget
}

// leaseUntil is the end of a lease claimed at now: the invocation's
// deadline, capped; with no deadline, a fixed lease.
func (e *engine) leaseUntil(t timing, now time.Time) time.Time {
	if t.deadline.IsZero() {
		return now.Add(e.c.leaseNoDeadline)
	}
	return minTime(t.deadline, now.Add(e.c.maxLease))
}

// claimRequest asks for the lease on key at now, for the message msgID (""
// for Wrap): until the invocation's deadline or the lease cap, the record
// kept for the unfinished retention. In at-most-once mode it does not take
// over an abandoned lease.
func (e *engine) claimRequest(t timing, key, hash, msgID string, now time.Time) idemstore.ClaimRequest {
	return idemstore.ClaimRequest{
		Namespace:   e.c.namespace,
		Key:         key,
		PayloadHash: hash,
		MessageID:   msgID,
		Now:         now,
		LeaseUntil:  e.leaseUntil(t, now),
		Grace:       e.c.grace,
		NoTakeover:  e.c.atMostOnce,
		ExpiresAt:   e.retentionUntil(now, false),
	}
}
