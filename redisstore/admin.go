package redisstore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// Named errors of the operator operations.
var (
	// ErrLeaseValid: the record is IN_PROGRESS and its lease has not run
	// out; Release and Forget refuse it unless forced.
	ErrLeaseValid = errors.New("redisstore: lease is still valid")
	// ErrRecordChanged: the record no longer carries the token the
	// operator read, so a release based on the old view was not applied.
	ErrRecordChanged = errors.New("redisstore: record changed since it was read")
	// ErrNotInProgress: only an IN_PROGRESS record has a lease to release.
	ErrNotInProgress = errors.New("redisstore: record is not IN_PROGRESS")
	// ErrNotIndexed: COMPLETED records are in no open set; counting or
	// listing them would scan the keyspace, which the store never does.
	ErrNotIndexed = errors.New("redisstore: COMPLETED records are not indexed")
	// ErrNoNamespace: listing and counting read one namespace's open sets
	// and need its name.
	ErrNoNamespace = errors.New("redisstore: a namespace is required")
)

// ReleaseRequest asks to clear the lease of an IN_PROGRESS record.
type ReleaseRequest struct {
	Namespace string
	Key       string
	// Token is the lease token the operator read (Record.LeaseToken); the
	// release applies only while the record still carries it. Required.
	Token string
	// Now is the clock the lease is judged by.
	Now time.Time
	// Force releases a lease that is still valid; its holder's outcome is
	// then refused and the message runs again.
	Force bool
	// Note is stored as the record's last error (default "lease released
	// by operator").
	Note string
}

// Release moves an IN_PROGRESS record whose lease has run out (or any
// IN_PROGRESS record, with Force) to FAILED under a new lease token, in one
// script call fenced on the token the operator read. It returns the record
// as written; a refusal returns the current record with ErrLeaseValid,
// ErrRecordChanged, ErrNotInProgress or lambdaidem.ErrNotFound.
func (s *Store) Release(ctx context.Context, req ReleaseRequest) (lambdaidem.Record, error) {
	k, err := s.keysOf("release", req.Namespace, req.Key)
	if err != nil {
		return lambdaidem.Record{}, err
	}
	if req.Token == "" {
		return lambdaidem.Record{}, fmt.Errorf("%w: release %q: no lease token (read the record first)", ErrInvalidKey, k.record)
	}
	note := req.Note
	if note == "" {
		note = "lease released by operator"
	}
	force := "0"
	if req.Force {
		force = "1"
	}
	outcome, rec, err := s.runAdmin(ctx, releaseScript, "release", req.Namespace, req.Key, k,
		strconv.FormatInt(ceilMillis(req.Now), 10), req.Token, "released-"+rand.Text(), force, truncate(note, s.errLimit), k.member)
	if err != nil {
		return lambdaidem.Record{}, err
	}
	switch outcome {
	case "released", "own":
		return rec, nil
	case "gone":
		return lambdaidem.Record{}, fmt.Errorf("%w: %q", lambdaidem.ErrNotFound, k.record)
	case "changed":
		return rec, fmt.Errorf("%w: release %q: it is now %s with another lease token (claim %d)", ErrRecordChanged, k.record, rec.Status, rec.Fence.Claim)
	case "status":
		return rec, fmt.Errorf("%w: release %q: it is %s", ErrNotInProgress, k.record, rec.Status)
	default:
		return rec, fmt.Errorf("%w: release %q: lease runs until %s", ErrLeaseValid, k.record, rec.LeaseUntil.Format(time.RFC3339Nano))
	}
}

// ForgetRequest asks to delete a record.
type ForgetRequest struct {
	Namespace string
	Key       string
	// Now is the clock the lease and the expiry are judged by.
	Now time.Time
	// Force deletes an IN_PROGRESS record whose lease is still valid.
	Force bool
}

// Forget deletes a record so that its key is processed again, in one script
// call that refuses (unless forced) an IN_PROGRESS record with a valid
// lease. It returns the deleted record; an absent or expired record yields
// lambdaidem.ErrNotFound (an expired one is deleted all the same); a valid
// lease yields ErrLeaseValid with the record, which stays.
func (s *Store) Forget(ctx context.Context, req ForgetRequest) (lambdaidem.Record, error) {
	k, err := s.keysOf("forget", req.Namespace, req.Key)
	if err != nil {
		return lambdaidem.Record{}, err
	}
	force := "0"
	if req.Force {
		force = "1"
	}
	outcome, rec, err := s.runAdmin(ctx, forgetScript, "forget", req.Namespace, req.Key, k,
		strconv.FormatInt(ceilMillis(req.Now), 10), force, k.member)
	if err != nil {
		return lambdaidem.Record{}, err
	}
	switch outcome {
	case "deleted":
		return rec, nil
	case "gone":
		return lambdaidem.Record{}, fmt.Errorf("%w: %q", lambdaidem.ErrNotFound, k.record)
	default:
		return rec, fmt.Errorf("%w: forget %q: lease runs until %s", ErrLeaseValid, k.record, rec.LeaseUntil.Format(time.RFC3339Nano))
	}
}

// runAdmin runs a script that answers {outcome, record as HGETALL}.
func (s *Store) runAdmin(ctx context.Context, sc *redis.Script, op, namespace, key string, k keys, args ...any) (string, lambdaidem.Record, error) {
	v, err := sc.Run(ctx, s.client, k.all(), args...).Slice()
	if err != nil {
		return "", lambdaidem.Record{}, unavailable(op, k.record, err)
	}
	if len(v) != 2 {
		return "", lambdaidem.Record{}, unavailable(op, k.record, fmt.Errorf("unexpected reply %v", v))
	}
	h, err := fromFlat(v[1])
	if err != nil {
		return "", lambdaidem.Record{}, unavailable(op, k.record, err)
	}
	outcome, _ := v[0].(string)
	return outcome, decode(namespace, key, h), nil
}

// ListOpenRequest selects unfinished records of one namespace.
type ListOpenRequest struct {
	// Status is IN_PROGRESS, FAILED or DEAD_LETTERED.
	Status lambdaidem.Status
	// Namespace is required: each namespace has open sets of its own.
	Namespace string
	// UpdatedBefore, when set, keeps only records last written before it.
	UpdatedBefore time.Time
	// Now hides records expired at Now. Zero means time.Now().
	Now time.Time
	// PageSize is how many members one page reads. Default 100.
	PageSize int
}

// ListOpen returns the unfinished records of one status in one namespace,
// soonest to expire first (with a fixed retention: least recently updated
// first), reading the namespace's open set page by page (ZRANGE BYSCORE,
// then one pipelined HGETALL per page): no keyspace scan. A record that
// changed between the two reads shows as it is now, or not at all when it
// left the status; read it with Get before acting on it. The sequence stops
// at the first error, which it yields.
func (s *Store) ListOpen(ctx context.Context, req ListOpenRequest) iter.Seq2[lambdaidem.Record, error] {
	return func(yield func(lambdaidem.Record, error) bool) {
		set, err := s.openSet("list", req.Namespace, req.Status)
		if err != nil {
			yield(lambdaidem.Record{}, err)
			return
		}
		now := req.Now
		if now.IsZero() {
			now = time.Now()
		}
		size := req.PageSize
		if size <= 0 {
			size = 100
		}
		tag := s.tag(req.Namespace)
		for offset := 0; ; offset += size {
			members, err := s.client.ZRangeByScore(ctx, set, &redis.ZRangeBy{
				Min: strconv.FormatInt(ceilMillis(now), 10), Max: "+inf", Offset: int64(offset), Count: int64(size),
			}).Result()
			if err != nil {
				yield(lambdaidem.Record{}, unavailable("list", set, err))
				return
			}
			if len(members) == 0 {
				return
			}
			cmds := make([]*redis.MapStringStringCmd, len(members))
			_, err = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
				for i, m := range members {
					cmds[i] = p.HGetAll(ctx, tag+"r:"+m)
				}
				return nil
			})
			if err != nil {
				yield(lambdaidem.Record{}, unavailable("list", set, err))
				return
			}
			for i, c := range cmds {
				h := c.Val()
				if len(h) == 0 || expiredAt(h, now) || lambdaidem.Status(h[fStatus]) != req.Status {
					continue
				}
				r := decode(req.Namespace, members[i], h)
				if !req.UpdatedBefore.IsZero() && !r.UpdatedAt.Before(req.UpdatedBefore) {
					continue
				}
				if !yield(r, nil) {
					return
				}
			}
			if len(members) < size {
				return
			}
		}
	}
}

// CountRequest selects the records Count counts.
type CountRequest struct {
	// Status is IN_PROGRESS, FAILED or DEAD_LETTERED (COMPLETED records
	// are not indexed: ErrNotIndexed).
	Status lambdaidem.Status
	// Namespace is required.
	Namespace string
	// LeaseEndedBefore, when set, counts only records whose lease ended
	// before it (stuck records); the records are then read page by page.
	LeaseEndedBefore time.Time
	// Now leaves out records expired at Now. Zero means time.Now().
	Now time.Time
}

// Count counts the unexpired records of one status in one namespace: one
// ZCOUNT, or with LeaseEndedBefore a listing.
func (s *Store) Count(ctx context.Context, req CountRequest) (int, error) {
	set, err := s.openSet("count", req.Namespace, req.Status)
	if err != nil {
		return 0, err
	}
	now := req.Now
	if now.IsZero() {
		now = time.Now()
	}
	if req.LeaseEndedBefore.IsZero() {
		n, err := s.client.ZCount(ctx, set, strconv.FormatInt(ceilMillis(now), 10), "+inf").Result()
		if err != nil {
			return 0, unavailable("count", set, err)
		}
		return int(n), nil
	}
	n := 0
	for r, err := range s.ListOpen(ctx, ListOpenRequest{Status: req.Status, Namespace: req.Namespace, Now: now}) {
		if err != nil {
			return n, err
		}
		if r.LeaseUntil.Before(req.LeaseEndedBefore) {
			n++
		}
	}
	return n, nil
}

// openSet names the open set of a status in a namespace.
func (s *Store) openSet(op, namespace string, status lambdaidem.Status) (string, error) {
	if namespace == "" {
		return "", fmt.Errorf("%w: redisstore %s", ErrNoNamespace, op)
	}
	k, err := s.keysOf(op, namespace, "-")
	if err != nil {
		return "", err
	}
	for i, st := range openStatuses {
		if st == status {
			return k.open[i], nil
		}
	}
	if status == lambdaidem.StatusCompleted {
		return "", fmt.Errorf("%w: redisstore %s", ErrNotIndexed, op)
	}
	return "", fmt.Errorf("redisstore %s: unknown status %q", op, status)
}
