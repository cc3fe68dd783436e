// Package storetest is the conformance suite every [idemstore.Store] must
// pass: the in-memory store and the DynamoDB store run the same cases, so
// the decorator can rely on one contract whatever is underneath.
//
// A store's own test calls [Run] with a constructor:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) idemstore.Store {
//			return memstore.New()
//		})
//	}
//
// # What the suite assumes
//
// Every subtest runs in parallel with a store of its own from newStore and
// a namespace of its own, so a constructor may hand out stores that share
// one backing table. The suite drives time only through the requests' Now:
// it never sleeps and never reads the store's clock. All request times are
// whole seconds counted from the wall clock at the start of the subtest
// (so a table with TTL switched on keeps the suite's records), which lets
// a store keep LeaseUntil in milliseconds and ExpiresAt and ResultUntil in
// seconds; times are compared with [time.Time.Equal].
//
// A nil and an empty result are treated as the same result: a store need
// not tell them apart.
//
// # What the suite pins down
//
//   - Claim of an absent key: Claimed, Attempt 1, Fence.Claim 1, a
//     non-empty Generation and Token, Previous "", every record field set
//     from the request, FirstAttemptAt and UpdatedAt equal to Now.
//   - A refused claim returns Claimed false, a nil error and the record
//     that refused it, unchanged: a valid IN_PROGRESS lease (up to and
//     including LeaseUntil+Grace), COMPLETED (with its result),
//     DEAD_LETTERED, and any record with a different payload hash
//     (COMPLETED, FAILED, IN_PROGRESS with an expired lease).
//   - Complete, Fail and DeadLetter set their status and fields and keep
//     the lease token; results round-trip byte for byte, ResultUntil too
//     (zero stays zero).
//   - A FAILED key with the same hash is claimed again in the same
//     generation: Attempt and Fence.Claim rise, Previous is FAILED,
//     Takeovers does not rise, FirstAttemptAt is kept.
//   - An IN_PROGRESS lease is taken over only when LeaseUntil < Now-Grace:
//     Previous is IN_PROGRESS and Takeovers rises. NoTakeover refuses the
//     takeover but not the claim of an absent or FAILED key.
//   - The lease token fences every write: after a takeover, a re-claim, a
//     Delete or an expiry, the old owner's Complete, Fail, DeadLetter and
//     Extend fail with [idemstore.ErrLeaseLost] and change nothing. A lease
//     that ran out but was not taken over still completes.
//   - Retries are safe: repeating a Complete, Fail or DeadLetter that
//     already applied returns nil and changes nothing; any other write on a
//     finished record is ErrLeaseLost.
//   - A record whose ExpiresAt is before Now is absent to every method:
//     Get returns [idemstore.ErrNotFound] and Claim starts a fresh
//     generation, whatever the old status or payload hash.
//   - Extend moves LeaseUntil and so delays a takeover.
//   - Delete removes a record and is nil for an absent one.
//   - Concurrent claims (and concurrent takeovers) of one key: exactly one
//     wins.
//   - Complete with an extra write of a type the store does not know fails
//     with [idemstore.ErrUnsupportedWrite] and records nothing.
//   - Namespaces are separate, and an empty namespace or key is an error
//     that is not [idemstore.ErrStoreUnavailable].
//
// For a store that implements [idemstore.DeadLetterResetter] (the others
// skip these cases), the suite pins redrive's reset: it applies only to a
// DEAD_LETTERED record carrying the copy's ID, below the redrive limit,
// and a fresh generation carries none of the old one's redrives.
//
// For a store that implements [idemstore.Admin] (the others skip these
// cases), it pins the operator calls:
//
//   - Release of an IN_PROGRESS lease that ended (LeaseUntil <
//     Now-Grace) leaves it FAILED under a new token, attempts and fence
//     kept; a live lease is refused with [idemstore.ErrInProgress], or with
//     Force revoked: a new token, the same LeaseUntil, so the key is only
//     taken over once that has passed. A changed token is
//     [idemstore.ErrRecordChanged], a finished record
//     [idemstore.ErrNotInProgress].
//   - Forget deletes a record without a live lease (the next claim starts
//     a new generation), refuses a live lease (ErrInProgress) or with Force
//     revokes it and lets the record expire at its end plus the grace, and
//     refuses a DEAD_LETTERED record with [idemstore.ErrWouldAbandonCopy]
//     unless AbandonCopy.
//   - Resolve of a record DEAD_LETTERED as outcome_unknown, conditioned
//     on the token and dead-letter copy the operator read: applied makes
//     it COMPLETED with the request's result (a duplicate from then on),
//     not_applied resets it as ResetDeadLetter does (the key is claimed
//     once more, and keeps the decision when it completes), abandoned
//     leaves it DEAD_LETTERED, refused by every reset and every later
//     decision ([idemstore.ErrResolved]). Each stores the decision and
//     ResolveRequest.StoredNote under a new token. Another token or copy
//     is [idemstore.ErrRecordChanged], any other record
//     [idemstore.ErrNotOutcomeUnknown], a bad request
//     [idemstore.ErrInvalidRequest]; a fresh generation carries no
//     decision.
//   - In every case the holder's later writes are refused as
//     ErrLeaseLost, and a refusal returns the record unchanged.
//   - Count and ListOpen see exactly the unexpired records of a status in a
//     namespace, with their filters and paging; COMPLETED records only with
//     AllowScan where the store can scan ([idemstore.ErrNotIndexed]
//     otherwise); an empty namespace is every namespace or
//     [idemstore.ErrNamespaceRequired].
//
// # Batched writes through the handler
//
// [BatchedWrites] is not part of [Run]: a store that implements
// [idemstore.Batcher] calls it from its own test to deliver one batch
// through lambdaidem.SQS one record at a time and with
// lambdaidem.WithBatchedWrites, check that the outcomes and records are
// the same, and count, with its own instruments, what each delivery cost.
package storetest
