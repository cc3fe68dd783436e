package memstore

import (
	"context"
	"fmt"

	"github.com/lambdaidem/go-lambdaidem/internal/mutant"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

var _ idemstore.DeadLetterResetter = (*Store)(nil)

// ResetDeadLetter makes a record dead-lettered by the given dead-letter
// copy claimable again; see [idemstore.DeadLetterResetter].
func (s *Store) ResetDeadLetter(ctx context.Context, req idemstore.ResetRequest) (idemstore.Record, error) {
	if err := validate(OpReset, req.Namespace, req.Key); err != nil {
		return idemstore.Record{}, err
	}
	if req.DeadLetterMessageID == "" {
		return idemstore.Record{}, fmt.Errorf("memstore: reset %s/%s: no dead-letter message ID: %w", req.Namespace, req.Key, idemstore.ErrResetRefused)
	}
	if err := s.begin(ctx, OpReset); err != nil {
		return idemstore.Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.live(id{req.Namespace, req.Key}, req.Now)
	if r == nil {
		return idemstore.Record{}, fmt.Errorf("memstore: reset %s/%s: %w", req.Namespace, req.Key, idemstore.ErrNotFound)
	}
	if why := idemstore.ResetRefusal(*r, req); why != "" {
		return copyRecord(r), fmt.Errorf("memstore: reset %s/%s: %s: %w", req.Namespace, req.Key, why, idemstore.ErrResetRefused)
	}
	note := req.Note
	if note == "" {
		note = idemstore.DefaultResetNote
	}
	r.Status = idemstore.StatusFailed
	r.LeaseToken = "redriven-" + newID()
	r.Attempts = 0
	r.Redrives++
	if mutant.On("redrive-reset-uncounted") {
		r.Redrives-- // the bug: attempts silently start over, and redrive never ends
	}
	r.RedrivenFrom = req.DeadLetterMessageID
	r.LastError = note
	r.DeadLetterReason = ""
	r.DeadLetteredMessageID = ""
	r.DeadLetterMessageID = ""
	r.UpdatedAt = req.Now
	return copyRecord(r), nil
}
