package memstore

import (
	"context"
	"fmt"

	"github.com/lambdaidem/go-lambdaidem/internal/mutant"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

var (
	_ idemstore.Committer = (*Store)(nil)
	_ idemstore.Batcher   = (*Store)(nil)
)

// Commit records the outcome of a run that held no lease, in one step;
// see [idemstore.Committer]. Extra Writes are committed through the
// store's [WriteApplier] in the same step, only when the commit applies;
// a store without one refuses them as Complete does.
func (s *Store) Commit(ctx context.Context, req idemstore.CommitRequest) (idemstore.CommitResult, error) {
	if err := idemstore.CheckCommit(req); err != nil {
		return idemstore.CommitResult{}, fmt.Errorf("memstore: %w", err)
	}
	if len(req.Writes) > 0 && s.writes == nil {
		return idemstore.CommitResult{}, fmt.Errorf("memstore: commit: %T: %w (a store made without WithCompletionWrites commits none)", req.Writes[0], idemstore.ErrUnsupportedWrite)
	}
	if err := s.begin(ctx, OpCommit); err != nil {
		return idemstore.CommitResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	res, err := s.commitLocked(req)
	if err != nil {
		return idemstore.CommitResult{}, fmt.Errorf("memstore: commit %s/%s: %w", req.Namespace, req.Key, err)
	}
	return res, nil
}

// commitLocked is Commit's decision and write, with its writes; the
// caller holds the lock.
func (s *Store) commitLocked(req idemstore.CommitRequest) (idemstore.CommitResult, error) {
	k := id{req.Namespace, req.Key}
	r := s.live(k, req.Now)
	apply, atLimit, own, takeover := idemstore.CommitRefusal(r, req)
	overLiveLease := mutant.On("commit-over-live-lease") // the bug: a commit replaces a lease holder's record
	if overLiveLease && r != nil && r.Status == idemstore.StatusInProgress && r.PayloadHash == req.PayloadHash {
		apply, atLimit = true, false
	}
	switch {
	case own:
		return idemstore.CommitResult{Committed: true, Record: copyRecord(r)}, nil
	case atLimit:
		var rec idemstore.Record
		if r != nil {
			rec = copyRecord(r)
		}
		return idemstore.CommitResult{AtLimit: true, Record: rec}, nil
	case !apply:
		return idemstore.CommitResult{Record: copyRecord(r)}, nil
	}
	if len(req.Writes) > 0 {
		if err := s.writes.ApplyWrites(req.Writes, func() { r = s.commitApply(k, r, takeover, req) }); err != nil {
			return idemstore.CommitResult{}, err
		}
	} else {
		r = s.commitApply(k, r, takeover, req)
	}
	return idemstore.CommitResult{Committed: true, Record: copyRecord(r)}, nil
}

// commitApply writes an applying commit to the record r of k (nil: absent
// or expired) and returns the record.
func (s *Store) commitApply(k id, r *idemstore.Record, takeover bool, req idemstore.CommitRequest) *idemstore.Record {
	if r == nil {
		// Absent or expired: a fresh generation, whatever was there before.
		r = &idemstore.Record{
			Namespace:      req.Namespace,
			Key:            req.Key,
			SchemaVersion:  idemstore.SchemaVersion,
			Fence:          idemstore.Fence{Generation: newID()},
			FirstAttemptAt: req.Now,
		}
		s.records[k] = r
	}
	if takeover {
		r.Takeovers++
	}
	r.Status = req.Status
	r.LeaseToken = req.Token
	r.LeaseUntil = req.Now
	r.Attempts++
	r.Fence.Claim++
	r.PayloadHash = req.PayloadHash
	r.MessageID = req.MessageID
	r.ExpiresAt = req.ExpiresAt
	r.UpdatedAt = req.Now
	if req.Status == idemstore.StatusCompleted {
		r.Result = cloneBytes(req.Result)
		r.ResultUntil = req.ResultUntil
	} else {
		r.LastError = req.Error
	}
	return r
}

// ClaimBatch claims each request as Claim would, in one call that counts
// as one request and meets the fault hook once; see [idemstore.Batcher].
func (s *Store) ClaimBatch(ctx context.Context, reqs []idemstore.ClaimRequest) []idemstore.BatchClaim {
	out := make([]idemstore.BatchClaim, len(reqs))
	valid := false
	for i, req := range reqs {
		out[i].Err = validate(OpClaimBatch, req.Namespace, req.Key)
		valid = valid || out[i].Err == nil
	}
	if !valid {
		return out
	}
	if err := s.begin(ctx, OpClaimBatch); err != nil {
		for i := range out {
			if out[i].Err == nil {
				out[i].Err = err
			}
		}
		return out
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, req := range reqs {
		if out[i].Err == nil {
			out[i].Result = s.claimLocked(req)
		}
	}
	return out
}

// CompleteBatch completes each request as Complete would, in one call
// that counts as one request and meets the fault hook once; see
// [idemstore.Batcher].
func (s *Store) CompleteBatch(ctx context.Context, reqs []idemstore.CompleteRequest) []error {
	errs := make([]error, len(reqs))
	valid := false
	for i, req := range reqs {
		switch {
		case validate(OpCompleteBatch, req.Lease.Namespace, req.Lease.Key) != nil:
			errs[i] = validate(OpCompleteBatch, req.Lease.Namespace, req.Lease.Key)
		case len(req.Writes) > 0 && s.writes == nil:
			errs[i] = fmt.Errorf("memstore: complete: %T: %w (a store made without WithCompletionWrites commits none)", req.Writes[0], idemstore.ErrUnsupportedWrite)
		default:
			valid = true
		}
	}
	if !valid {
		return errs
	}
	if err := s.begin(ctx, OpCompleteBatch); err != nil {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
		return errs
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, req := range reqs {
		if errs[i] == nil {
			complete, writes := completion(req), req.Writes
			errs[i] = s.writeLocked(OpComplete, req.Lease, req.Now, idemstore.StatusCompleted, func(r *idemstore.Record) error {
				if len(writes) == 0 {
					complete(r)
					return nil
				}
				return s.writes.ApplyWrites(writes, func() { complete(r) })
			})
		}
	}
	return errs
}
