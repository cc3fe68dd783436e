package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/lambdaidem/go-lambdaidem/internal/mutant"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// live returns the record of k unless it is absent or expired at now. The
// caller holds the lock.
func (s *Store) live(k id, now time.Time) *idemstore.Record {
	r := s.records[k]
	// r.Expired(now), without copying the record for the value receiver.
	if r == nil || !r.ExpiresAt.IsZero() && r.ExpiresAt.Before(now) {
		return nil
	}
	return r
}

// Claim takes the lease on a key; see [idemstore.Store].
func (s *Store) Claim(ctx context.Context, req idemstore.ClaimRequest) (idemstore.ClaimResult, error) {
	if err := validate(OpClaim, req.Namespace, req.Key); err != nil {
		return idemstore.ClaimResult{}, err
	}
	if err := s.begin(ctx, OpClaim); err != nil {
		return idemstore.ClaimResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.claimLocked(req), nil
}

// claimLocked is Claim's decision and write; the caller holds the lock.
func (s *Store) claimLocked(req idemstore.ClaimRequest) idemstore.ClaimResult {
	k := id{req.Namespace, req.Key}
	r := s.live(k, req.Now)
	reclaimAnyPayload := mutant.On("failed-reclaimed-by-other-payload") // the bug: a FAILED record claimed by any payload
	if reclaimAnyPayload && r != nil && r.Status == idemstore.StatusFailed {
		r.PayloadHash = req.PayloadHash
	}
	var prev idemstore.Status
	token := ""
	takeLiveLease := mutant.On("claim-takes-live-lease") // the bug: two holders of one key at once
	switch {
	case r == nil:
		// Absent or expired: a fresh generation, whatever was there before.
		// Its first lease token is the generation's id: no other claim is
		// ever given that id, and it saves making a second one.
		token = newID()
		r = &idemstore.Record{
			Namespace:      req.Namespace,
			Key:            req.Key,
			SchemaVersion:  idemstore.SchemaVersion,
			Fence:          idemstore.Fence{Generation: token},
			FirstAttemptAt: req.Now,
		}
		s.records[k] = r
	case r.PayloadHash != req.PayloadHash:
		// A key conflict is never a duplicate and never a takeover.
		return idemstore.ClaimResult{Record: copyRecord(r)}
	case r.Status == idemstore.StatusFailed:
		prev = idemstore.StatusFailed
		if mutant.On("retry-counts-two-attempts") {
			r.Attempts++ // the bug: a retry after a failure counts two attempts, so the last one allowed is never made
		}
	case r.Status == idemstore.StatusInProgress && !req.NoTakeover && (r.LeaseExpired(req.Now, req.Grace) || takeLiveLease):
		prev = idemstore.StatusInProgress
		r.Takeovers++
	default:
		return idemstore.ClaimResult{Record: copyRecord(r)}
	}

	if token == "" {
		token = newID()
	}
	r.Status = idemstore.StatusInProgress
	r.LeaseToken = token
	r.LeaseUntil = req.LeaseUntil
	r.Attempts++
	r.Fence.Claim++
	r.PayloadHash = req.PayloadHash
	r.MessageID = req.MessageID
	r.ExpiresAt = req.ExpiresAt
	r.UpdatedAt = req.Now
	return idemstore.ClaimResult{
		Claimed:  true,
		Lease:    r.Lease(),
		Previous: prev,
		Record:   copyRecord(r),
	}
}

// write applies a write fenced by the lease token. finished is the status
// the write leaves behind: a record already in that status with the
// caller's token means this is a retry of a write that applied, which is a
// success ("" for writes that keep the record IN_PROGRESS).
func (s *Store) write(ctx context.Context, op string, l idemstore.Lease, now time.Time,
	finished idemstore.Status, apply func(r *idemstore.Record)) error {
	return s.writeOrRefuse(ctx, op, l, now, finished, func(r *idemstore.Record) error {
		apply(r)
		return nil
	})
}

// writeOrRefuse is write with an apply that may refuse: then the record is
// left as it was and the refusal returned.
func (s *Store) writeOrRefuse(ctx context.Context, op string, l idemstore.Lease, now time.Time,
	finished idemstore.Status, apply func(r *idemstore.Record) error) error {
	if err := s.open(ctx, op, l); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writeLocked(op, l, now, finished, apply)
}

// writeLocked is write's decision and write; the caller holds the lock.
func (s *Store) writeLocked(op string, l idemstore.Lease, now time.Time,
	finished idemstore.Status, apply func(r *idemstore.Record) error) error {
	r, err := s.fenced(op, l, now, finished)
	if r == nil {
		return err
	}
	if err := apply(r); err != nil {
		return fmt.Errorf("memstore: %s %s/%s: %w", op, l.Namespace, l.Key, err)
	}
	r.UpdatedAt = now
	return nil
}

// open validates a write under l and counts it (see begin). It must be
// called without the lock held.
func (s *Store) open(ctx context.Context, op string, l idemstore.Lease) error {
	if err := validate(op, l.Namespace, l.Key); err != nil {
		return err
	}
	return s.begin(ctx, op)
}

// fenced returns the record a write under l may change, or nil: with an
// error when the lease is lost, without one when the record already is in
// the write's finished status under that lease (a retry of a write that
// applied). The caller holds the lock.
func (s *Store) fenced(op string, l idemstore.Lease, now time.Time, finished idemstore.Status) (*idemstore.Record, error) {
	r := s.live(id{l.Namespace, l.Key}, now)
	ignoreToken := mutant.On("complete-ignores-lease-token") // the bug: a stale holder's completion applies
	switch {
	case r == nil:
		return nil, fmt.Errorf("memstore: %s %s/%s: no record: %w", op, l.Namespace, l.Key, idemstore.ErrLeaseLost)
	case r.LeaseToken != l.Token && !(op == OpComplete && ignoreToken):
		return nil, fmt.Errorf("memstore: %s %s/%s: lease taken over: %w", op, l.Namespace, l.Key, idemstore.ErrLeaseLost)
	case r.Status == idemstore.StatusInProgress:
		return r, nil
	case finished != "" && r.Status == finished:
		return nil, nil
	default:
		return nil, fmt.Errorf("memstore: %s %s/%s: record is %s: %w", op, l.Namespace, l.Key, r.Status, idemstore.ErrLeaseLost)
	}
}

// Complete records success; see [idemstore.Store]. Extra Writes are
// committed with the completion through the store's [WriteApplier]
// ([WithCompletionWrites]); a store without one refuses them with
// [idemstore.ErrUnsupportedWrite] and records nothing.
func (s *Store) Complete(ctx context.Context, req idemstore.CompleteRequest) error {
	if len(req.Writes) > 0 && s.writes == nil {
		if err := validate(OpComplete, req.Lease.Namespace, req.Lease.Key); err != nil {
			return err
		}
		return fmt.Errorf("memstore: complete: %T: %w (a store made without WithCompletionWrites commits none)", req.Writes[0], idemstore.ErrUnsupportedWrite)
	}
	if len(req.Writes) > 0 {
		return s.completeWithWrites(ctx, req)
	}
	// The common case, written out rather than through write: no closure
	// and no copy of the request on the heap per completion.
	if err := s.open(ctx, OpComplete, req.Lease); err != nil {
		return err
	}
	result := cloneBytes(req.Result)
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.fenced(OpComplete, req.Lease, req.Now, idemstore.StatusCompleted)
	if r != nil {
		completeRecord(r, &req, result)
		r.UpdatedAt = req.Now
	}
	return err
}

// completeRecord marks r completed by req, with result (the caller's copy
// of req.Result).
func completeRecord(r *idemstore.Record, req *idemstore.CompleteRequest, result []byte) {
	r.Status = idemstore.StatusCompleted
	r.Result = result
	r.ResultUntil = req.ResultUntil
	r.ExpiresAt = req.ExpiresAt
}

// completeWithWrites is Complete for a request that carries writes: they
// are applied through the store's WriteApplier, with the completion.
func (s *Store) completeWithWrites(ctx context.Context, req idemstore.CompleteRequest) error {
	result := cloneBytes(req.Result)
	complete := func(r *idemstore.Record) { completeRecord(r, &req, result) }
	writes := req.Writes
	unfenced := mutant.On("completion-writes-unfenced") // the bug: a stale holder's or a retried completion's writes land
	if unfenced {
		if err := s.writes.ApplyWrites(writes, func() {}); err != nil {
			return err
		}
		return s.write(ctx, OpComplete, req.Lease, req.Now, idemstore.StatusCompleted, complete)
	}
	return s.writeOrRefuse(ctx, OpComplete, req.Lease, req.Now, idemstore.StatusCompleted, func(r *idemstore.Record) error {
		return s.writes.ApplyWrites(writes, func() { complete(r) })
	})
}

// completion is what a completion sets on the record.
func completion(req idemstore.CompleteRequest) func(r *idemstore.Record) {
	result := cloneBytes(req.Result)
	return func(r *idemstore.Record) {
		r.Status = idemstore.StatusCompleted
		r.Result = result
		r.ResultUntil = req.ResultUntil
		r.ExpiresAt = req.ExpiresAt
	}
}

// Fail records a retryable failure; see [idemstore.Store].
func (s *Store) Fail(ctx context.Context, req idemstore.FailRequest) error {
	return s.write(ctx, OpFail, req.Lease, req.Now, idemstore.StatusFailed, func(r *idemstore.Record) {
		r.Status = idemstore.StatusFailed
		r.LastError = req.Error
		r.ExpiresAt = req.ExpiresAt
		if mutant.On("fail-keeps-pending-mark") {
			return // the bug: the FAILED record keeps the mark of a dead-lettering whose copy was never sent
		}
		r.DeadLetterReason, r.DeadLetteredMessageID = "", "" // no dead-lettering pending
	})
}

// DeadLetter records that the message went to the dead-letter queue; see
// [idemstore.Store].
func (s *Store) DeadLetter(ctx context.Context, req idemstore.DeadLetterRequest) error {
	if req.Pending {
		return s.write(ctx, OpDeadLetter, req.Lease, req.Now, "", func(r *idemstore.Record) {
			r.DeadLetterReason = req.Reason
			r.LastError = req.Error
			r.DeadLetteredMessageID = req.MessageID
		})
	}
	return s.write(ctx, OpDeadLetter, req.Lease, req.Now, idemstore.StatusDeadLettered, func(r *idemstore.Record) {
		r.Status = idemstore.StatusDeadLettered
		r.DeadLetterReason = req.Reason
		r.LastError = req.Error
		r.DeadLetteredMessageID = req.MessageID
		r.DeadLetterMessageID = req.DeadLetterMessageID
		r.ExpiresAt = req.ExpiresAt
	})
}

// Extend moves the end of a lease the caller still holds; see
// [idemstore.Store].
func (s *Store) Extend(ctx context.Context, req idemstore.ExtendRequest) error {
	moveBack := mutant.On("late-extension-moves-lease-back") // the bug: a late extension shortens the lease
	return s.write(ctx, OpExtend, req.Lease, req.Now, "", func(r *idemstore.Record) {
		if r.LeaseUntil.After(req.LeaseUntil) && !moveBack {
			return // a later extension applied first; this one lands late
		}
		r.LeaseUntil = req.LeaseUntil
		if !req.ExpiresAt.IsZero() {
			r.ExpiresAt = req.ExpiresAt
		}
	})
}

// Get reads a record; see [idemstore.Store].
func (s *Store) Get(ctx context.Context, req idemstore.GetRequest) (idemstore.Record, error) {
	if err := validate(OpGet, req.Namespace, req.Key); err != nil {
		return idemstore.Record{}, err
	}
	if err := s.begin(ctx, OpGet); err != nil {
		return idemstore.Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.live(id{req.Namespace, req.Key}, req.Now)
	if r == nil {
		return idemstore.Record{}, fmt.Errorf("memstore: get %s/%s: %w", req.Namespace, req.Key, idemstore.ErrNotFound)
	}
	return copyRecord(r), nil
}

// Delete removes a record; see [idemstore.Store].
func (s *Store) Delete(ctx context.Context, req idemstore.DeleteRequest) error {
	if err := validate(OpDelete, req.Namespace, req.Key); err != nil {
		return err
	}
	if err := s.begin(ctx, OpDelete); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.records, id{req.Namespace, req.Key})
	return nil
}
