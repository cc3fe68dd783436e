// Package idemstore is the contract between lambdaidem's decorators and the
// stores that keep their records: everything a store implements, and
// nothing a function author needs. The DynamoDB store (package dynamo),
// the Redis store (package redisstore) and the in-memory store (package
// memstore, beneath this one) implement it; the conformance suite (package
// storetest, also beneath) holds each of them to it. To write a store, read
// this page and storetest's.
//
// # Records
//
// A store keeps one [Record] per (namespace, key) and moves it between four
// states with conditional writes:
//
//	absent ──Claim──▶ IN_PROGRESS ──Complete──▶ COMPLETED
//	                      │  ▲  ──Fail──────▶ FAILED ──Claim──▶ IN_PROGRESS
//	                      │  └─ takeover once LeaseUntil+Grace has passed
//	                      └────DeadLetter────▶ DEAD_LETTERED ──ResetDeadLetter──▶ FAILED
//
// An operator moves a DEAD_LETTERED record whose outcome is unknown
// (ReasonOutcomeUnknown) with [Admin]'s Resolve: to COMPLETED (the effect
// happened), to FAILED as a reset does (it did not), or nowhere, marked
// abandoned, which no reset undoes.
//
// Every condition compares against the request's Now, never the store's
// own clock, and a record whose ExpiresAt is before Now is absent to every
// method whatever its status (TTL deletion is late by design). A claim of
// an absent key starts a new generation: a random Fence.Generation, and
// Attempts and Fence.Claim counting from 1.
//
// # Fencing
//
// [Store.Claim] hands out a [Lease] whose Token every later write of the
// claim carries: Complete, Fail, DeadLetter and Extend apply only while the
// record still holds that token and is IN_PROGRESS, and yield
// [ErrLeaseLost] otherwise, changing nothing. The token stays on the
// record after the outcome, so a write that is sent again after its answer
// was lost recognises its own success and returns nil. A claim never
// takes over a lease before LeaseUntil+Grace, so a holder that may still
// run is never joined by a second one; [Record.Lease] rebuilds the lease
// of a record's latest claim.
//
// # Errors
//
// A store answers with the record's truth or with an error that says why
// not, and the decorators act on the error's identity (test with
// errors.Is):
//
//   - [ErrStoreUnavailable] (wrapped): the store could not answer, or the
//     answer was lost; the write may or may not have applied. Nothing is
//     acknowledged on it, and the request may be sent again.
//   - [ErrLeaseLost]: a fenced write found another token or status.
//   - [ErrNotFound]: Get or an operator call found no unexpired record.
//   - [ErrResultTooLarge], [ErrUnsupportedWrite], [ErrWriteRefused]: a
//     completion refused for good, recording nothing.
//   - [ErrInvalidRequest], [ErrMissingKey]: a request no record could
//     satisfy (a caller's bug); never ErrStoreUnavailable.
//
// # What a store may add
//
// Beyond [Store], a store implements what it can, each checked by the
// suite where it is implemented and refused by the decorators, when they
// are built, where it is not:
//
//   - [DeadLetterResetter]: redrive's conditional reset of a dead-lettered
//     record (package sqsqueue, the operator CLI).
//   - [Admin]: the operator calls (read, list and count open records,
//     release or revoke a lease, forget a key, resolve an unknown
//     outcome).
//   - [Committer]: the optimistic mode's commit of a run that held no
//     lease.
//   - [Batcher]: several claims, or completions, in one request.
//   - [Capable]: the [Capabilities] it declares (the completion writes it
//     commits atomically with a completion, the largest result it keeps,
//     the namespaces it cannot keep); a wrapper declares its inner store's
//     through [Wrapper].
//
// The rules several stores must apply alike are functions here, so that
// every store refuses the same records in the same words: [ResetRefusal],
// [ReleaseRefusal], [ForgetRefusal], [ResolveRefusal], [CheckResolve],
// [LeaseLive], [CommitRefusal], [CheckCommit] and [CheckNamespace]. Keys arrive as [StoredKey] made
// them (at most [MaxKeyLength] bytes, valid UTF-8), namespaces as
// CheckNamespace allows (at most [MaxNamespaceLength] bytes).
//
// # Proving a store
//
// A store's test runs the suite with a constructor; every subtest gets a
// store of its own and its own namespace:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) idemstore.Store {
//			return mystore.New(client, "test-"+rand.Text())
//		})
//	}
//
// The simulator of package lambdaidemtest runs the decorators on a store
// under crashes and faults; the in-memory store is the reference it and
// the test kit use.
package idemstore
