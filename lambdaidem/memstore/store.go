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
	if r == nil || r.Expired(now) {
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
	takeLiveLease := mutant.On("claim-takes-live-lease") // the bug: two holders of one key at once
	switch {
	case r == nil:
		// Absent or expired: a fresh generation, whatever was there before.
		r = &lambdaidem.Record{
			Namespace:      req.Namespace,
			Key:            req.Key,
			SchemaVersion:  lambdaidem.SchemaVersion,
			Fence:          lambdaidem.Fence{Generation: newID()},
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

	r.Status = lambdaidem.StatusInProgress
	r.LeaseToken = newID()
	r.LeaseUntil = req.LeaseUntil
	r.Attempts++
	r.Fence.Claim++
	r.PayloadHash = req.PayloadHash
	r.MessageID = req.MessageID
	r.ExpiresAt = req.ExpiresAt
	r.UpdatedAt = req.Now
	return lambdaidem.ClaimResult{
		Claimed: true,
		Lease: lambdaidem.Lease{
			Namespace: r.Namespace,
			Key:       r.Key,
			Token:     r.LeaseToken,
			Until:     r.LeaseUntil,
			Fence:     r.Fence,
			Attempt:   r.Attempts,
		},
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
	if err := validate(op, l.Namespace, l.Key); err != nil {
		return err
	}
	if err := s.begin(ctx, op); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writeLocked(op, l, now, finished, apply)
}

// writeLocked is write's decision and write; the caller holds the lock.
func (s *Store) writeLocked(op string, l lambdaidem.Lease, now time.Time,
	finished lambdaidem.Status, apply func(r *lambdaidem.Record) error) error {
	r := s.live(id{l.Namespace, l.Key}, now)
	ignoreToken := mutant.On("complete-ignores-lease-token") // the bug: a stale holder's completion applies
	switch {
	case r == nil:
		return fmt.Errorf("memstore: %s %s/%s: no record: %w", op, l.Namespace, l.Key, lambdaidem.ErrLeaseLost)
	case r.LeaseToken != l.Token && !(op == OpComplete && ignoreToken):
		return fmt.Errorf("memstore: %s %s/%s: lease taken over: %w", op, l.Namespace, l.Key, lambdaidem.ErrLeaseLost)
	case r.Status == lambdaidem.StatusInProgress:
		if err := apply(r); err != nil {
			return fmt.Errorf("memstore: %s %s/%s: %w", op, l.Namespace, l.Key, err)
		}
		r.UpdatedAt = now
		return nil
	case finished != "" && r.Status == finished:
		return nil
	default:
		return fmt.Errorf("memstore: %s %s/%s: record is %s: %w", op, l.Namespace, l.Key, r.Status, lambdaidem.ErrLeaseLost)
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
	complete := completion(req)
	if len(req.Writes) == 0 {
		return s.write(ctx, OpComplete, req.Lease, req.Now, lambdaidem.StatusCompleted, complete)
	}
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
