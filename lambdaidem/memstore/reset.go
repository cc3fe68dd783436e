package memstore

import (
	"context"
	"fmt"

	"github.com/lambdaidem/go-lambdaidem/internal/mutant"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

var _ lambdaidem.DeadLetterResetter = (*Store)(nil)

// ResetDeadLetter makes a record dead-lettered by the given dead-letter
// copy claimable again; see [lambdaidem.DeadLetterResetter].
func (s *Store) ResetDeadLetter(ctx context.Context, req lambdaidem.ResetRequest) (lambdaidem.Record, error) {
	if err := validate(OpReset, req.Namespace, req.Key); err != nil {
		return lambdaidem.Record{}, err
	}
	if req.DeadLetterMessageID == "" {
		return lambdaidem.Record{}, fmt.Errorf("memstore: reset %s/%s: no dead-letter message ID: %w", req.Namespace, req.Key, lambdaidem.ErrResetRefused)
	}
	if err := s.begin(ctx, OpReset); err != nil {
		return lambdaidem.Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.live(id{req.Namespace, req.Key}, req.Now)
	if r == nil {
		return lambdaidem.Record{}, fmt.Errorf("memstore: reset %s/%s: %w", req.Namespace, req.Key, lambdaidem.ErrNotFound)
	}
	if why := lambdaidem.ResetRefusal(*r, req); why != "" {
		return copyRecord(r), fmt.Errorf("memstore: reset %s/%s: %s: %w", req.Namespace, req.Key, why, lambdaidem.ErrResetRefused)
	}
	note := req.Note
	if note == "" {
		note = lambdaidem.DefaultResetNote
	}
	r.Status = lambdaidem.StatusFailed
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
