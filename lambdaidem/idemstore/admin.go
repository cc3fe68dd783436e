package idemstore

import (
	"context"
	"fmt"
	"iter"
	"time"
	"unicode/utf8"
)

// Admin is what an operator does to a store: read a record, list and
// count the unfinished ones, release a stuck lease, forget a key, reset a
// dead-lettered record for a redrive, and resolve a record whose outcome
// is unknown. Functions never need it; the
// operator CLI, redrive and the simulator's operators use it, and nothing
// else. The in-memory, DynamoDB (dynamo.Admin) and Redis stores implement
// it, and the conformance suite (package storetest) checks every store
// that does.
//
// # Live leases and Force
//
// A lease is live while Now <= LeaseUntil + Grace, the same rule a claim
// uses before it takes a lease over. Release and Forget refuse a live
// lease with ErrInProgress unless the request sets Force. Force never lets
// a second handler start while the holder may still run: it revokes the
// lease (a new lease token, so the holder's heartbeat, completion,
// failure and dead-letter writes are all refused as ErrLeaseLost, and a
// heartbeat that is refused ends the holder's handler) but leaves the
// lease's end where it was. The key is claimed again only once that end
// plus the claimer's grace has passed, as after a crash. An operator who
// forces a lease therefore stops its holder from recording anything at
// once, and the message runs again within one lease.
//
// # Dead-letter copies
//
// A DEAD_LETTERED record is what lets redrive send its dead-letter copy
// back: ResetDeadLetter applies only to the record that copy
// dead-lettered. Forget therefore refuses a DEAD_LETTERED record with
// ErrWouldAbandonCopy unless the request sets AbandonCopy.
//
// # Unknown outcomes
//
// A record DEAD_LETTERED with ReasonOutcomeUnknown waits for a person to
// find out whether its effect happened. Resolve records the decision
// ([Resolution]) in one write fenced by what the operator read, and
// ResetDeadLetter refuses a record an operator abandoned, so redrive never
// sends its copy back.
type Admin interface {
	// Get reads a record, as Store.Get does. An absent or expired record
	// yields ErrNotFound.
	Get(ctx context.Context, req GetRequest) (Record, error)

	// ResetDeadLetter is redrive's conditional reset; see
	// DeadLetterResetter.
	DeadLetterResetter

	// Release ends the lease of an IN_PROGRESS record, in one write
	// conditioned on the lease token the operator read (req.Token).
	//
	// A lease that is no longer live (LeaseUntil < Now - Grace) is
	// released: the record becomes FAILED under a new lease token,
	// keeping its attempts and fence, with req.Note as its last error,
	// and without a pending dead-letter mark (as Fail). The next delivery
	// of its message claims it as after any failure.
	//
	// A live lease is refused with ErrInProgress, or with req.Force
	// revoked: the record stays IN_PROGRESS under a new lease token,
	// with the same LeaseUntil and req.Note as its last error, so it is
	// taken over (a takeover, counted in Attempts and Takeovers) once
	// the lease it had has run out.
	//
	// It returns the record as written. A refusal returns the current
	// record, unchanged, with ErrInProgress, ErrRecordChanged (the
	// record no longer carries req.Token) or ErrNotInProgress; an absent
	// or expired record yields ErrNotFound. A retried write that already
	// applied is a success.
	Release(ctx context.Context, req ReleaseRequest) (Record, error)

	// Forget removes a record so that the key is processed afresh by the
	// next message that carries it (a new generation: attempts count
	// from 1, and a different payload is no longer a conflict).
	//
	// A record without a live lease is deleted at once. A DEAD_LETTERED
	// record is refused with ErrWouldAbandonCopy unless
	// req.AbandonCopy. A live lease is refused with ErrInProgress, or
	// with req.Force revoked as Release revokes it, and the record
	// expires when that lease's end plus req.Grace has passed, which
	// becomes its LeaseUntil too, so that no takeover comes first: the
	// key is forgotten then, never while the holder may still be running.
	//
	// A refusal returns the record, unchanged, with the error; an absent
	// or expired record yields ErrNotFound (an expired one may be
	// deleted all the same).
	Forget(ctx context.Context, req ForgetRequest) (ForgetResult, error)

	// Count counts the unexpired records of one status. IN_PROGRESS,
	// FAILED and DEAD_LETTERED records are indexed. COMPLETED records
	// are not: a store counts them only with req.AllowScan, reading
	// every record it holds, and otherwise (or if it never scans)
	// returns ErrNotIndexed. A store whose indexes are kept per
	// namespace returns ErrNamespaceRequired for an empty Namespace. On
	// an error after some pages, it returns the count so far with the
	// error.
	Count(ctx context.Context, req CountRequest) (int, error)

	// ListOpen yields the unexpired records of one unfinished status
	// (IN_PROGRESS, FAILED or DEAD_LETTERED; any other status yields
	// ErrNotIndexed), page by page from the store's index: never a scan
	// of the whole store. The order is the store's index order (each
	// store documents it). An index may lag the records by a moment:
	// read a record with Get before acting on it. The sequence stops at
	// the first error, which it yields.
	ListOpen(ctx context.Context, req ListOpenRequest) iter.Seq2[Record, error]

	// Resolve records an operator's decision on a record whose outcome
	// is unknown, in one write conditioned on the record being
	// unexpired, DEAD_LETTERED with ReasonOutcomeUnknown, not abandoned,
	// and still carrying the lease token and dead-letter copy the
	// operator read (req.Token, req.DeadLetterMessageID). Each decision
	// writes a new lease token, which fences out any late write of an
	// older lease, and sets Resolution, ResolutionNote
	// (req.StoredNote()) and UpdatedAt:
	//
	//   - ResolutionApplied: COMPLETED, with req.Result as its result,
	//     ResultUntil cleared and the dead-letter fields cleared;
	//     attempts, fence, payload hash and expiry stay.
	//   - ResolutionNotApplied: what ResetDeadLetter writes (FAILED,
	//     Attempts 0, Redrives one higher, RedrivenFrom the copy or ""
	//     without one, the dead-letter fields cleared), with the stored
	//     note as LastError.
	//   - ResolutionAbandoned: still DEAD_LETTERED, nothing else
	//     changed.
	//
	// It returns the record as written. A refusal returns the current
	// record, unchanged, with ErrRecordChanged (another token or copy),
	// ErrNotOutcomeUnknown or ErrResolved (abandoned already); an absent
	// or expired record yields ErrNotFound; a request CheckResolve
	// refuses yields ErrInvalidRequest. A retried write that already
	// applied is a success.
	Resolve(ctx context.Context, req ResolveRequest) (Record, error)
}

// ResolveRequest is an operator's decision on one record whose outcome is
// unknown.
type ResolveRequest struct {
	Namespace string
	Key       string
	// Decision is what the operator found: ResolutionApplied,
	// ResolutionNotApplied or ResolutionAbandoned.
	Decision Resolution
	// Token is the lease token the operator read (Record.LeaseToken from
	// a Get). The decision applies only while the record still carries
	// it. Required.
	Token string
	// DeadLetterMessageID is the record's dead-letter copy as the
	// operator read it (Record.DeadLetterMessageID; empty for a record
	// that has none, such as Wrap's). The decision applies only while
	// the record names that copy.
	DeadLetterMessageID string
	// Now is the clock the expiry is judged by, and the decision's time.
	Now time.Time
	// By names who decided (a person, a ticket); required, at most
	// MaxResolveByBytes. Note says why (what they looked at), at most
	// MaxResolveNoteBytes. Both are kept in the record's ResolutionNote.
	By   string
	Note string
	// Result is the result an applied record keeps (a Wrap replay
	// returns it); nil keeps none. The operator tools store
	// lambdaidem's "result not stored" mark, so a later Wrap call gets
	// ErrResultNotStored rather than a result nobody kept. At most
	// MaxResolveNoteBytes.
	Result []byte
}

// Bounds of a ResolveRequest's text, so that a record's size stays
// bounded (StoredNote is at most MaxResolutionNoteBytes).
const (
	MaxResolveByBytes      = 128
	MaxResolveNoteBytes    = 512
	MaxResolutionNoteBytes = 1024
)

// CheckResolve refuses, with ErrInvalidRequest, a ResolveRequest no
// record could satisfy: an unknown decision, no token, no By, or text
// over its bound or not valid UTF-8. Every store checks it before
// sending anything.
func CheckResolve(req ResolveRequest) error {
	switch {
	case req.Decision != ResolutionApplied && req.Decision != ResolutionNotApplied && req.Decision != ResolutionAbandoned:
		return fmt.Errorf("%w: resolve: unknown decision %q (applied, not_applied or abandoned)", ErrInvalidRequest, req.Decision)
	case req.Token == "":
		return fmt.Errorf("%w: resolve: no lease token (read the record first)", ErrInvalidRequest)
	case req.By == "":
		return fmt.Errorf("%w: resolve: no By (who decided)", ErrInvalidRequest)
	case len(req.By) > MaxResolveByBytes || len(req.Note) > MaxResolveNoteBytes || len(req.Result) > MaxResolveNoteBytes:
		return fmt.Errorf("%w: resolve: By is %d bytes, Note %d and Result %d; at most %d, %d and %d", ErrInvalidRequest,
			len(req.By), len(req.Note), len(req.Result), MaxResolveByBytes, MaxResolveNoteBytes, MaxResolveNoteBytes)
	case !utf8.ValidString(req.By) || !utf8.ValidString(req.Note) || !utf8.ValidString(req.DeadLetterMessageID):
		return fmt.Errorf("%w: resolve: By, Note or the copy's ID is not valid UTF-8", ErrInvalidRequest)
	case len(req.DeadLetterMessageID) > MaxResolveByBytes:
		return fmt.Errorf("%w: resolve: dead-letter copy ID of %d bytes", ErrInvalidRequest, len(req.DeadLetterMessageID))
	}
	return nil
}

// StoredNote is the ResolutionNote a store keeps for the request: the
// decision, who took it and when, the copy it was about, and why, e.g.
// "applied by alice at 2026-11-21T09:01:25Z (dead-letter copy 9e41d7a0):
// the charge is in the payments dashboard". It is at most
// MaxResolutionNoteBytes for a request CheckResolve accepts.
func (req ResolveRequest) StoredNote() string {
	s := string(req.Decision) + " by " + req.By + " at " + req.Now.UTC().Format(time.RFC3339)
	if req.DeadLetterMessageID != "" {
		s += " (dead-letter copy " + req.DeadLetterMessageID + ")"
	}
	if req.Note != "" {
		s += ": " + req.Note
	}
	return s
}

// ResolveRefusal says why Resolve refuses the record r: an error wrapping
// ErrRecordChanged, ErrNotOutcomeUnknown or ErrResolved, or nil when the
// decision applies. Like ReleaseRefusal, it is the stores' common wording
// and the suite's reference.
func ResolveRefusal(r Record, req ResolveRequest) error {
	switch {
	case r.LeaseToken != req.Token:
		return fmt.Errorf("%w: it is now %s with another lease token (claim %d)", ErrRecordChanged, r.Status, r.Fence.Claim)
	case r.Status != StatusDeadLettered || r.DeadLetterReason != ReasonOutcomeUnknown:
		reason := ""
		if r.DeadLetterReason != "" {
			reason = " (" + string(r.DeadLetterReason) + ")"
		}
		return fmt.Errorf("%w: it is %s%s", ErrNotOutcomeUnknown, r.Status, reason)
	case r.Resolution == ResolutionAbandoned:
		return fmt.Errorf("%w: %s", ErrResolved, r.ResolutionNote)
	case r.DeadLetterMessageID != req.DeadLetterMessageID:
		return fmt.Errorf("%w: it was dead-lettered by another copy (%s)", ErrRecordChanged, r.DeadLetterMessageID)
	}
	return nil
}

// ReleaseRequest asks to end the lease of one IN_PROGRESS record.
type ReleaseRequest struct {
	Namespace string
	Key       string
	// Token is the lease token the operator read (Record.LeaseToken from
	// a Get). The release applies only while the record still carries
	// it, so a claim made in between is never undone. Required.
	Token string
	// Now is the clock the lease is judged by.
	Now time.Time
	// Grace is how long past LeaseUntil the lease still counts as live,
	// as ClaimRequest.Grace (use the function's: DefaultGrace unless it
	// set lambdaidem.WithGrace).
	Grace time.Duration
	// Force revokes a live lease instead of refusing it; see Admin.
	Force bool
	// Note is stored as the record's LastError, so the record says why
	// it changed. Default DefaultReleaseNote.
	Note string
}

// DefaultReleaseNote is the LastError a release stores when its request
// has no Note.
const DefaultReleaseNote = "lease released by operator"

// ForgetRequest asks to remove one record.
type ForgetRequest struct {
	Namespace string
	Key       string
	// Now is the clock the lease and the expiry are judged by.
	Now time.Time
	// Grace is how long past LeaseUntil the lease still counts as live,
	// as ClaimRequest.Grace; a forced forget of a live lease keeps the
	// record until LeaseUntil plus Grace.
	Grace time.Duration
	// Force revokes a live lease instead of refusing it, and forgets the
	// record when that lease has run out; see Admin.
	Force bool
	// AbandonCopy forgets a DEAD_LETTERED record although its
	// dead-letter copy can then no longer be redriven: redrive sends a
	// copy back only after resetting the record that copy dead-lettered,
	// and skips a copy whose record is absent.
	AbandonCopy bool
	// Note is stored as the LastError of a record whose lease is revoked
	// (Force). Default DefaultForgetNote.
	Note string
}

// DefaultForgetNote is the LastError a forced forget stores on the record
// it keeps until the revoked lease has run out.
const DefaultForgetNote = "lease revoked by operator; key forgotten when it runs out"

// ForgetResult is what Forget did.
type ForgetResult struct {
	// Record is the record as it was before the call, or, when the lease
	// was revoked, as written then.
	Record Record
	// Revoked reports that the record held a live lease, which Force
	// revoked: the record stays, IN_PROGRESS under a new lease token,
	// until ForgottenAt.
	Revoked bool
	// ForgottenAt is when the key counts as absent: the request's Now, or
	// when Revoked, the revoked lease's end plus the grace (rounded up to
	// the precision the store keeps expiries in: seconds on DynamoDB).
	ForgottenAt time.Time
}

// CountRequest selects the records Count counts.
type CountRequest struct {
	// Status is one of the four statuses.
	Status Status
	// Namespace, when set, counts only that namespace's records; empty
	// counts every namespace, where the store can (ErrNamespaceRequired
	// where it cannot).
	Namespace string
	// LeaseEndedBefore, when set, counts only records whose LeaseUntil is
	// before it (with Status IN_PROGRESS and Now: stuck records).
	LeaseEndedBefore time.Time
	// Now leaves out records expired at Now. Zero means time.Now().
	Now time.Time
	// AllowScan lets a store read every record it holds to count
	// COMPLETED ones, which no index holds: on DynamoDB a full table
	// scan, whose read capacity grows with the table.
	AllowScan bool
	// Progress, when set, is called after every page read.
	Progress func(PageProgress)
}

// ListOpenRequest selects unfinished records.
type ListOpenRequest struct {
	// Status is IN_PROGRESS, FAILED or DEAD_LETTERED.
	Status Status
	// Namespace, when set, keeps only that namespace's records; empty
	// lists every namespace, where the store can (ErrNamespaceRequired
	// where it cannot).
	Namespace string
	// UpdatedBefore, when set, keeps only records last written before it
	// (e.g. "stuck for an hour").
	UpdatedBefore time.Time
	// Now hides records expired at Now. Zero means time.Now().
	Now time.Time
	// PageSize is how many index entries one read takes. Zero means 100.
	PageSize int
	// Progress, when set, is called after every page read.
	Progress func(PageProgress)
}

// PageProgress reports how far a listing or a count has got.
type PageProgress struct {
	// Pages is the number of pages read so far.
	Pages int
	// Read is the number of index entries (or, for a scan, records)
	// read; Matched the number that passed every filter.
	Read    int
	Matched int
}

// LeaseLive reports whether r is IN_PROGRESS under a lease that may still
// have a running holder at now: one that a claim with this grace could
// not take over yet. Release and Forget refuse such a lease unless forced.
func LeaseLive(r Record, now time.Time, grace time.Duration) bool {
	return r.Status == StatusInProgress && !r.LeaseExpired(now, grace)
}

// ReleaseRefusal says why Release refuses the record r: an error wrapping
// ErrRecordChanged, ErrNotInProgress or ErrInProgress, or nil when the
// release applies (with Force on a live lease: revokes it). Stores explain
// their refusals with it, so all of them say the same; it is also the
// reference the conformance suite holds them to.
func ReleaseRefusal(r Record, req ReleaseRequest) error {
	switch {
	case r.LeaseToken != req.Token:
		return fmt.Errorf("%w: it is now %s with another lease token (claim %d)", ErrRecordChanged, r.Status, r.Fence.Claim)
	case r.Status != StatusInProgress:
		return fmt.Errorf("%w: it is %s", ErrNotInProgress, r.Status)
	case LeaseLive(r, req.Now, req.Grace) && !req.Force:
		return fmt.Errorf("%w: its lease runs until %s", ErrInProgress, r.LeaseUntil.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// ForgetRefusal says why Forget refuses the record r: an error wrapping
// ErrWouldAbandonCopy or ErrInProgress, or nil when Forget applies (with
// Force on a live lease: revokes it). Like ReleaseRefusal, it is the
// stores' common wording and the suite's reference.
func ForgetRefusal(r Record, req ForgetRequest) error {
	switch {
	case r.Status == StatusDeadLettered && !req.AbandonCopy:
		return fmt.Errorf("%w: its copy %s is redriven only while this record shows that copy dead-lettered it", ErrWouldAbandonCopy, r.DeadLetterMessageID)
	case LeaseLive(r, req.Now, req.Grace) && !req.Force:
		return fmt.Errorf("%w: its lease runs until %s", ErrInProgress, r.LeaseUntil.UTC().Format(time.RFC3339Nano))
	}
	return nil
}
