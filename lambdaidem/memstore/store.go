package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/lambdaidem/go-lambdaidem/internal/mutant"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// live returns the record of k unless it is absent or expired at now. The
// caller holds the lock.
func (s *Store) live(k id, now time.Time) *lambdaidem.Record {
	r := s.records[k]
	// r.Expired(now), without copying the record for the value receiver.
	if r == nil || !r.ExpiresAt.IsZero() && r.ExpiresAt.Before(now) {
		return nil
	}
	return r
}

// Claim takes the lease on a key; see [lambdaidem.Store].
func (s *Store) Claim(ctx context.Context, req lambdaidem.ClaimRequest) (lambdaidem.ClaimResult, error) {
	if err := validate(OpClaim, req.Namespace, req.Key); err != nil {
		return lambdaidem.ClaimResult{}, err
	}
	if err := s.begin(ctx, OpClaim); err != nil {
		return lambdaidem.ClaimResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.claimLocked(req), nil
}

// claimLocked is Claim's decision and write; the caller holds the lock.
func (s *Store) claimLocked(req lambdaidem.ClaimRequest) lambdaidem.ClaimResult {
	k := id{req.Namespace, req.Key}
	r := s.live(k, req.Now)
	reclaimAnyPayload := mutant.On("failed-reclaimed-by-other-payload") // the bug: a FAILED record claimed by any payload
	if reclaimAnyPayload && r != nil && r.Status == lambdaidem.StatusFailed {
		r.PayloadHash = req.PayloadHash
	}
	var prev lambdaidem.Status
	token := ""
	takeLiveLease := mutant.On("claim-takes-live-lease") // the bug: two holders of one key at once
	switch {
	case r == nil:
		// Absent or expired: a fresh generation, whatever was there before.
		// Its first lease token is the generation's id: no other claim is
		// ever given that id, and it saves making a second one.
		token = newID()
		r = &lambdaidem.Record{
			Namespace:      req.Namespace,
			Key:            req.Key,
			SchemaVersion:  lambdaidem.SchemaVersion,
			Fence:          lambdaidem.Fence{Generation: token},
			FirstAttemptAt: req.Now,
		}
		s.records[k] = r
	case r.PayloadHash != req.PayloadHash:
		// A key conflict is never a duplicate and never a takeover.
		return lambdaidem.ClaimResult{Record: copyRecord(r)}
	case r.Status == lambdaidem.StatusFailed:
		prev = lambdaidem.StatusFailed
	case r.Status == lambdaidem.StatusInProgress && !req.NoTakeover && (r.LeaseExpired(req.Now, req.Grace) || takeLiveLease):
		prev = lambdaidem.StatusInProgress
		r.Takeovers++
	default:
		return lambdaidem.ClaimResult{Record: copyRecord(r)}
	}

	if token == "" {
		token = newID()
	}
	r.Status = lambdaidem.StatusInProgress
	r.LeaseToken = token
	r.LeaseUntil = req.LeaseUntil
	r.Attempts++
	r.Fence.Claim++
	r.PayloadHash = req.PayloadHash
	r.MessageID = req.MessageID
	r.ExpiresAt = req.ExpiresAt
	r.UpdatedAt = req.Now
	return lambdaidem.ClaimResult{
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
func (s *Store) write(ctx context.Context, op string, l lambdaidem.Lease, now time.Time,
	finished lambdaidem.Status, apply func(r *lambdaidem.Record)) error {
	return s.writeOrRefuse(ctx, op, l, now, finished, func(r *lambdaidem.Record) error {
		apply(r)
		return nil
	})
}

// writeOrRefuse is write with an apply that may refuse: then the record is
// left as it was and the refusal returned.
func (s *Store) writeOrRefuse(ctx context.Context, op string, l lambdaidem.Lease, now time.Time,
	finished lambdaidem.Status, apply func(r *lambdaidem.Record) error) error {
	if err := s.open(ctx, op, l); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writeLocked(op, l, now, finished, apply)
}

// writeLocked is write's decision and write; the caller holds the lock.
func (s *Store) writeLocked(op string, l lambdaidem.Lease, now time.Time,
	finished lambdaidem.Status, apply func(r *lambdaidem.Record) error) error {
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
func (s *Store) open(ctx context.Context, op string, l lambdaidem.Lease) error {
	if err := validate(op, l.Namespace, l.Key); err != nil {
		return err
	}
	return s.begin(ctx, op)
}

// fenced returns the record a write under l may change, or nil: with an
// error when the lease is lost, without one when the record already is in
// the write's finished status under that lease (a retry of a write that
// applied). The caller holds the lock.
func (s *Store) fenced(op string, l lambdaidem.Lease, now time.Time, finished lambdaidem.Status) (*lambdaidem.Record, error) {
	r := s.live(id{l.Namespace, l.Key}, now)
	ignoreToken := mutant.On("complete-ignores-lease-token") // the bug: a stale holder's completion applies
	switch {
	case r == nil:
		return nil, fmt.Errorf("memstore: %s %s/%s: no record: %w", op, l.Namespace, l.Key, lambdaidem.ErrLeaseLost)
	case r.LeaseToken != l.Token && !(op == OpComplete && ignoreToken):
		return nil, fmt.Errorf("memstore: %s %s/%s: lease taken over: %w", op, l.Namespace, l.Key, lambdaidem.ErrLeaseLost)
	case r.Status == lambdaidem.StatusInProgress:
		return r, nil
	case finished != "" && r.Status == finished:
		return nil, nil
	default:
		return nil, fmt.Errorf("memstore: %s %s/%s: record is %s: %w", op, l.Namespace, l.Key, r.Status, lambdaidem.ErrLeaseLost)
	}
}

// Complete records success; see [lambdaidem.Store]. Extra Writes are
// committed with the completion through the store's [WriteApplier]
// ([WithCompletionWrites]); a store without one refuses them with
// [lambdaidem.ErrUnsupportedWrite] and records nothing.
func (s *Store) Complete(ctx context.Context, req lambdaidem.CompleteRequest) error {
	if len(req.Writes) > 0 && s.writes == nil {
		if err := validate(OpComplete, req.Lease.Namespace, req.Lease.Key); err != nil {
			return err
		}
		return fmt.Errorf("memstore: complete: %T: %w (a store made without WithCompletionWrites commits none)", req.Writes[0], lambdaidem.ErrUnsupportedWrite)
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
	r, err := s.fenced(OpComplete, req.Lease, req.Now, lambdaidem.StatusCompleted)
	if r != nil {
		completeRecord(r, &req, result)
		r.UpdatedAt = req.Now
	}
	return err
}

// completeRecord marks r completed by req, with result (the caller's copy
// of req.Result).
func completeRecord(r *lambdaidem.Record, req *lambdaidem.CompleteRequest, result []byte) {
	r.Status = lambdaidem.StatusCompleted
	r.Result = result
	r.ResultUntil = req.ResultUntil
	r.ExpiresAt = req.ExpiresAt
}

// completeWithWrites is Complete for a request that carries writes: they
// are applied through the store's WriteApplier, with the completion.
func (s *Store) completeWithWrites(ctx context.Context, req lambdaidem.CompleteRequest) error {
	result := cloneBytes(req.Result)
	complete := func(r *lambdaidem.Record) { completeRecord(r, &req, result) }
	writes := req.Writes
	unfenced := mutant.On("completion-writes-unfenced") // the bug: a stale holder's or a retried completion's writes land
	if unfenced {
		if err := s.writes.ApplyWrites(writes, func() {}); err != nil {
			return err
		}
		return s.write(ctx, OpComplete, req.Lease, req.Now, lambdaidem.StatusCompleted, complete)
	}
	return s.writeOrRefuse(ctx, OpComplete, req.Lease, req.Now, lambdaidem.StatusCompleted, func(r *lambdaidem.Record) error {
		return s.writes.ApplyWrites(writes, func() { complete(r) })
	})
}

// completion is what a completion sets on the record.
func completion(req lambdaidem.CompleteRequest) func(r *lambdaidem.Record) {
	result := cloneBytes(req.Result)
	return func(r *lambdaidem.Record) {
		r.Status = lambdaidem.StatusCompleted
		r.Result = result
		r.ResultUntil = req.ResultUntil
		r.ExpiresAt = req.ExpiresAt
	}
}

// Fail records a retryable failure; see [lambdaidem.Store].
func (s *Store) Fail(ctx context.Context, req lambdaidem.FailRequest) error {
	return s.write(ctx, OpFail, req.Lease, req.Now, lambdaidem.StatusFailed, func(r *lambdaidem.Record) {
		r.Status = lambdaidem.StatusFailed
		r.LastError = req.Error
		r.ExpiresAt = req.ExpiresAt
	})
}

// DeadLetter records that the message went to the dead-letter queue; see
// [lambdaidem.Store].
func (s *Store) DeadLetter(ctx context.Context, req lambdaidem.DeadLetterRequest) error {
	if req.Pending {
		return s.write(ctx, OpDeadLetter, req.Lease, req.Now, "", func(r *lambdaidem.Record) {
			r.DeadLetterReason = req.Reason
			r.LastError = req.Error
			r.DeadLetteredMessageID = req.MessageID
		})
	}
	return s.write(ctx, OpDeadLetter, req.Lease, req.Now, lambdaidem.StatusDeadLettered, func(r *lambdaidem.Record) {
		r.Status = lambdaidem.StatusDeadLettered
		r.DeadLetterReason = req.Reason
		r.LastError = req.Error
		r.DeadLetteredMessageID = req.MessageID
		r.DeadLetterMessageID = req.DeadLetterMessageID
		r.ExpiresAt = req.ExpiresAt
	})
}

// Extend moves the end of a lease the caller still holds; see
// [lambdaidem.Store].
func (s *Store) Extend(ctx context.Context, req lambdaidem.ExtendRequest) error {
	moveBack := mutant.On("late-extension-moves-lease-back") // the bug: a late extension shortens the lease
	return s.write(ctx, OpExtend, req.Lease, req.Now, "", func(r *lambdaidem.Record) {
		if r.LeaseUntil.After(req.LeaseUntil) && !moveBack {
			return // a later extension applied first; this one lands late
		}
		r.LeaseUntil = req.LeaseUntil
		if !req.ExpiresAt.IsZero() {
			r.ExpiresAt = req.ExpiresAt
		}
	})
}

// Get reads a record; see [lambdaidem.Store].
func (s *Store) Get(ctx context.Context, req lambdaidem.GetRequest) (lambdaidem.Record, error) {
	if err := validate(OpGet, req.Namespace, req.Key); err != nil {
		return lambdaidem.Record{}, err
	}
	if err := s.begin(ctx, OpGet); err != nil {
		return lambdaidem.Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.live(id{req.Namespace, req.Key}, req.Now)
	if r == nil {
		return lambdaidem.Record{}, fmt.Errorf("memstore: get %s/%s: %w", req.Namespace, req.Key, lambdaidem.ErrNotFound)
	}
	return copyRecord(r), nil
}

// Delete removes a record; see [lambdaidem.Store].
func (s *Store) Delete(ctx context.Context, req lambdaidem.DeleteRequest) error {
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
