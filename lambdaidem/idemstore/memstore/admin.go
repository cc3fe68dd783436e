package memstore

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/lambdaidem/go-lambdaidem/internal/mutant"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

var _ idemstore.Admin = (*Store)(nil)

// Release ends the lease of an IN_PROGRESS record; see [idemstore.Admin].
func (s *Store) Release(ctx context.Context, req idemstore.ReleaseRequest) (idemstore.Record, error) {
	if err := validate(OpRelease, req.Namespace, req.Key); err != nil {
		return idemstore.Record{}, err
	}
	if req.Token == "" {
		return idemstore.Record{}, fmt.Errorf("memstore: release %s/%s: no lease token (read the record first): %w", req.Namespace, req.Key, idemstore.ErrMissingKey)
	}
	if err := s.begin(ctx, OpRelease); err != nil {
		return idemstore.Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.live(id{req.Namespace, req.Key}, req.Now)
	if r == nil {
		return idemstore.Record{}, fmt.Errorf("memstore: release %s/%s: %w", req.Namespace, req.Key, idemstore.ErrNotFound)
	}
	if err := idemstore.ReleaseRefusal(*r, req); err != nil {
		return copyRecord(r), fmt.Errorf("memstore: release %s/%s: %w", req.Namespace, req.Key, err)
	}
	live := idemstore.LeaseLive(*r, req.Now, req.Grace)
	if mutant.On("release-force-frees-live-lease") {
		live = false // the bug: a forced release lets a claim start beside the holder
	}
	if !live {
		r.Status = idemstore.StatusFailed
		r.DeadLetterReason, r.DeadLetteredMessageID = "", "" // no dead-lettering pending
	}
	r.LeaseToken = "released-" + newID()
	r.LastError = cmp.Or(req.Note, idemstore.DefaultReleaseNote)
	r.UpdatedAt = req.Now
	return copyRecord(r), nil
}

// Forget removes a record, or revokes its live lease and lets it expire
// when that lease has run out; see [idemstore.Admin].
func (s *Store) Forget(ctx context.Context, req idemstore.ForgetRequest) (idemstore.ForgetResult, error) {
	if err := validate(OpForget, req.Namespace, req.Key); err != nil {
		return idemstore.ForgetResult{}, err
	}
	if err := s.begin(ctx, OpForget); err != nil {
		return idemstore.ForgetResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := id{req.Namespace, req.Key}
	r := s.live(k, req.Now)
	if r == nil {
		delete(s.records, k)
		return idemstore.ForgetResult{}, fmt.Errorf("memstore: forget %s/%s: %w", req.Namespace, req.Key, idemstore.ErrNotFound)
	}
	if err := idemstore.ForgetRefusal(*r, req); err != nil {
		return idemstore.ForgetResult{Record: copyRecord(r)}, fmt.Errorf("memstore: forget %s/%s: %w", req.Namespace, req.Key, err)
	}
	if !idemstore.LeaseLive(*r, req.Now, req.Grace) {
		delete(s.records, k)
		return idemstore.ForgetResult{Record: copyRecord(r), ForgottenAt: req.Now}, nil
	}
	r.LeaseToken = "forgotten-" + newID()
	r.LastError = cmp.Or(req.Note, idemstore.DefaultForgetNote)
	r.ExpiresAt = r.LeaseUntil.Add(req.Grace)
	r.LeaseUntil = r.ExpiresAt
	r.UpdatedAt = req.Now
	return idemstore.ForgetResult{Record: copyRecord(r), Revoked: true, ForgottenAt: r.ExpiresAt}, nil
}

// Count counts the unexpired records of one status; see
// [idemstore.Admin]. The in-memory store keeps every namespace in one map,
// so an empty Namespace counts them all, and it counts COMPLETED records
// only with AllowScan, as a store with a real index would.
func (s *Store) Count(ctx context.Context, req idemstore.CountRequest) (int, error) {
	if req.Status == idemstore.StatusCompleted && !req.AllowScan {
		return 0, fmt.Errorf("memstore: count %s without AllowScan: %w", req.Status, idemstore.ErrNotIndexed)
	}
	if !known(req.Status) {
		return 0, fmt.Errorf("memstore: count %q: %w", req.Status, idemstore.ErrNotIndexed)
	}
	if err := s.begin(ctx, OpCount); err != nil {
		return 0, err
	}
	now := nowOr(req.Now)
	read, recs := s.matching(req.Status, req.Namespace, now)
	n := 0
	for _, r := range recs {
		if req.LeaseEndedBefore.IsZero() || r.LeaseUntil.Before(req.LeaseEndedBefore) {
			n++
		}
	}
	if req.Progress != nil {
		req.Progress(idemstore.PageProgress{Pages: 1, Read: read, Matched: n})
	}
	return n, nil
}

// ListOpen yields the unexpired records of one unfinished status, least
// recently updated first (then by namespace and key); see
// [idemstore.Admin]. It reads the records as they are when the sequence
// starts.
func (s *Store) ListOpen(ctx context.Context, req idemstore.ListOpenRequest) iter.Seq2[idemstore.Record, error] {
	return func(yield func(idemstore.Record, error) bool) {
		if req.Status == idemstore.StatusCompleted || !known(req.Status) {
			yield(idemstore.Record{}, fmt.Errorf("memstore: list %q: %w", req.Status, idemstore.ErrNotIndexed))
			return
		}
		if err := s.begin(ctx, OpList); err != nil {
			yield(idemstore.Record{}, err)
			return
		}
		_, recs := s.matching(req.Status, req.Namespace, nowOr(req.Now))
		recs = slices.DeleteFunc(recs, func(r idemstore.Record) bool {
			return !req.UpdatedBefore.IsZero() && !r.UpdatedAt.Before(req.UpdatedBefore)
		})
		size := req.PageSize
		if size <= 0 {
			size = 100
		}
		var p idemstore.PageProgress
		for page := range slices.Chunk(recs, size) {
			p.Pages++
			p.Read += len(page)
			p.Matched += len(page)
			if req.Progress != nil {
				req.Progress(p)
			}
			for _, r := range page {
				if !yield(r, nil) {
					return
				}
			}
		}
	}
}

// matching returns how many records the store holds and copies of the
// unexpired ones of status in namespace (every namespace when empty), in
// listing order.
func (s *Store) matching(status idemstore.Status, namespace string, now time.Time) (int, []idemstore.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []idemstore.Record
	for k, r := range s.records {
		if r.Status == status && (namespace == "" || k.namespace == namespace) && !r.Expired(now) {
			out = append(out, copyRecord(r))
		}
	}
	slices.SortFunc(out, func(a, b idemstore.Record) int {
		return cmp.Or(a.UpdatedAt.Compare(b.UpdatedAt), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Key, b.Key))
	})
	return len(s.records), out
}

func known(st idemstore.Status) bool {
	switch st {
	case idemstore.StatusInProgress, idemstore.StatusFailed, idemstore.StatusDeadLettered, idemstore.StatusCompleted:
		return true
	}
	return false
}

func nowOr(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now()
	}
	return t
}

// Resolve records an operator's decision on a record whose outcome is
// unknown; see [idemstore.Admin].
func (s *Store) Resolve(ctx context.Context, req idemstore.ResolveRequest) (idemstore.Record, error) {
	if err := validate(OpResolve, req.Namespace, req.Key); err != nil {
		return idemstore.Record{}, err
	}
	if err := idemstore.CheckResolve(req); err != nil {
		return idemstore.Record{}, fmt.Errorf("memstore: %s/%s: %w", req.Namespace, req.Key, err)
	}
	if err := s.begin(ctx, OpResolve); err != nil {
		return idemstore.Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.live(id{req.Namespace, req.Key}, req.Now)
	if r == nil {
		return idemstore.Record{}, fmt.Errorf("memstore: resolve %s/%s: %w", req.Namespace, req.Key, idemstore.ErrNotFound)
	}
	if err := idemstore.ResolveRefusal(*r, req); err != nil {
		return copyRecord(r), fmt.Errorf("memstore: resolve %s/%s: %w", req.Namespace, req.Key, err)
	}
	note := req.StoredNote()
	switch req.Decision {
	case idemstore.ResolutionApplied:
		if mutant.On("resolve-applied-left-claimable") {
			r.Status = idemstore.StatusFailed // the bug: the key runs again
		} else {
			r.Status = idemstore.StatusCompleted
		}
		r.Result = cloneBytes(req.Result)
		r.ResultUntil = time.Time{}
		r.DeadLetterReason, r.DeadLetteredMessageID, r.DeadLetterMessageID = "", "", ""
	case idemstore.ResolutionNotApplied:
		r.Status = idemstore.StatusFailed
		r.Attempts = 0
		r.Redrives++
		r.RedrivenFrom = req.DeadLetterMessageID
		r.LastError = note
		r.DeadLetterReason, r.DeadLetteredMessageID, r.DeadLetterMessageID = "", "", ""
	}
	r.LeaseToken = "resolved-" + newID()
	r.Resolution, r.ResolutionNote = req.Decision, note
	r.UpdatedAt = req.Now
	return copyRecord(r), nil
}
