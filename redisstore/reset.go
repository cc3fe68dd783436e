package redisstore

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

var _ idemstore.DeadLetterResetter = (*Store)(nil)

// ResetDeadLetter makes a record dead-lettered by the given dead-letter
// copy claimable again, in one script call that applies only when the
// record is DEAD_LETTERED with that copy's ID, unexpired and (with
// MaxRedrives) redriven fewer times than the limit. It leaves the record
// FAILED with Attempts 0, Redrives one higher, RedrivenFrom the copy's ID,
// the dead-letter fields cleared and a new lease token. A refusal returns
// the record the same script read, with an error wrapping
// idemstore.ErrResetRefused; a re-sent call whose first reply was lost
// finds its own new token and succeeds. See
// [idemstore.DeadLetterResetter].
func (s *Store) ResetDeadLetter(ctx context.Context, req idemstore.ResetRequest) (idemstore.Record, error) {
	k, err := s.keysOf("reset", req.Namespace, req.Key)
	if err != nil {
		return idemstore.Record{}, err
	}
	if req.DeadLetterMessageID == "" {
		return idemstore.Record{}, fmt.Errorf("%w: redisstore reset %q: no dead-letter message ID", idemstore.ErrResetRefused, k.record)
	}
	note := req.Note
	if note == "" {
		note = idemstore.DefaultResetNote
	}
	// A fresh token: it fences out any late write under an older lease, and
	// it is how a re-sent script recognises its own applied write.
	token := "redriven-" + rand.Text()
	outcome, rec, err := s.runAdmin(ctx, resetScript, "reset", req.Namespace, req.Key, k,
		strconv.FormatInt(ceilMillis(req.Now), 10), req.DeadLetterMessageID, token,
		max(req.MaxRedrives, 0), truncate(note, s.errLimit), k.member)
	if err != nil {
		return idemstore.Record{}, err
	}
	switch outcome {
	case "reset", "own":
		return rec, nil
	}
	why := idemstore.ResetRefusal(rec, req)
	if why == "" {
		why = "the record changed during the request"
	}
	return rec, fmt.Errorf("%w: redisstore reset %q: %s", idemstore.ErrResetRefused, k.record, why)
}
