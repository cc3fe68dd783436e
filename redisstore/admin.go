package redisstore

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"iter"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

var _ idemstore.Admin = (*Store)(nil)

// Release ends the lease of an IN_PROGRESS record, in one script call
// fenced on the token the operator read; see [idemstore.Admin].
func (s *Store) Release(ctx context.Context, req idemstore.ReleaseRequest) (idemstore.Record, error) {
	k, err := s.keysOf("release", req.Namespace, req.Key)
	if err != nil {
		return idemstore.Record{}, err
	}
	if req.Token == "" {
		return idemstore.Record{}, fmt.Errorf("%w: release %q: no lease token (read the record first)", ErrInvalidKey, k.record)
	}
	force := "0"
	if req.Force {
		force = "1"
	}
	note := truncate(cmp.Or(req.Note, idemstore.DefaultReleaseNote), s.errLimit)
	outcome, rec, err := s.runAdmin(ctx, releaseScript, "release", req.Namespace, req.Key, k,
		msNum(req.Now), req.Token, "released-"+rand.Text(), force, note, k.member, msNum(req.Now.Add(-req.Grace)))
	switch {
	case err != nil:
		return idemstore.Record{}, err
	case outcome != "refused":
		return rec, nil
	}
	return rec, refused("release", k, idemstore.ReleaseRefusal(rec, req))
}

// Forget removes a record, or revokes its live lease and lets it expire
// when that lease has run out, in one script call; see
// [idemstore.Admin].
func (s *Store) Forget(ctx context.Context, req idemstore.ForgetRequest) (idemstore.ForgetResult, error) {
	k, err := s.keysOf("forget", req.Namespace, req.Key)
	if err != nil {
		return idemstore.ForgetResult{}, err
	}
	flag := func(b bool) string {
		if b {
			return "1"
		}
		return "0"
	}
	graceMs := (req.Grace + time.Millisecond - 1) / time.Millisecond
	note := truncate(cmp.Or(req.Note, idemstore.DefaultForgetNote), s.errLimit)
	outcome, rec, err := s.runAdmin(ctx, forgetScript, "forget", req.Namespace, req.Key, k,
		msNum(req.Now), flag(req.Force), k.member, flag(req.AbandonCopy), msNum(req.Now.Add(-req.Grace)),
		strconv.FormatInt(int64(graceMs), 10), "forgotten-"+rand.Text(), note, strconv.FormatInt(s.slack.Milliseconds(), 10))
	switch {
	case err != nil:
		return idemstore.ForgetResult{}, err
	case outcome == "deleted":
		return idemstore.ForgetResult{Record: rec, ForgottenAt: req.Now}, nil
	case outcome != "refused":
		return idemstore.ForgetResult{Record: rec, Revoked: true, ForgottenAt: rec.ExpiresAt}, nil
	}
	return idemstore.ForgetResult{Record: rec}, refused("forget", k, idemstore.ForgetRefusal(rec, req))
}

// msNum is a time as a script's number argument: Unix ms, rounded up.
func msNum(t time.Time) string { return strconv.FormatInt(ceilMillis(t), 10) }

// runAdmin runs a script that answers {outcome, record as HGETALL}; an
// outcome "gone" (no record) is idemstore.ErrNotFound.
func (s *Store) runAdmin(ctx context.Context, sc *redis.Script, op, namespace, key string, k keys, args ...any) (string, idemstore.Record, error) {
	v, err := sc.Run(ctx, s.client, k.all(), args...).Slice()
	if err != nil {
		return "", idemstore.Record{}, unavailable(op, k.record, err)
	}
	if len(v) != 2 {
		return "", idemstore.Record{}, unavailable(op, k.record, fmt.Errorf("unexpected reply %v", v))
	}
	h, err := fromFlat(v[1])
	if err != nil {
		return "", idemstore.Record{}, unavailable(op, k.record, err)
	}
	outcome, _ := v[0].(string)
	if outcome == "gone" {
		return "", idemstore.Record{}, fmt.Errorf("%w: %q", idemstore.ErrNotFound, k.record)
	}
	return outcome, decode(namespace, key, h), nil
}

// refused is an admin script's refusal as the operation's error: why, the
// reason the record the script answered with gives for it, or
// ErrRecordChanged when that record gives none.
func refused(op string, k keys, why error) error {
	if why == nil {
		why = fmt.Errorf("%w: the script refused it", idemstore.ErrRecordChanged)
	}
	return fmt.Errorf("redisstore: %s %q: %w", op, k.record, why)
}

// ListOpen yields the unfinished records of one status in one namespace
// (an empty Namespace is idemstore.ErrNamespaceRequired: each namespace
// has open sets of its own), soonest to expire first (with a fixed
// retention: least recently updated first), reading the namespace's open
// set page by page (ZRANGE BYSCORE, then one pipelined HGETALL per page):
// no keyspace scan. A record that changed between the two reads shows as
// it is now, or not at all when it left the status; read it with Get
// before acting on it. The sequence stops at the first error, which it
// yields. See [idemstore.Admin].
func (s *Store) ListOpen(ctx context.Context, req idemstore.ListOpenRequest) iter.Seq2[idemstore.Record, error] {
	return func(yield func(idemstore.Record, error) bool) {
		set, err := s.openSet("list", req.Namespace, req.Status)
		if err != nil {
			yield(idemstore.Record{}, err)
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
		var p idemstore.PageProgress
		for offset := 0; ; offset += size {
			members, err := s.client.ZRangeByScore(ctx, set, &redis.ZRangeBy{
				Min: strconv.FormatInt(ceilMillis(now), 10), Max: "+inf", Offset: int64(offset), Count: int64(size),
			}).Result()
			if err != nil {
				yield(idemstore.Record{}, unavailable("list", set, err))
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
				yield(idemstore.Record{}, unavailable("list", set, err))
				return
			}
			var page []idemstore.Record
			for i, c := range cmds {
				h := c.Val()
				if len(h) == 0 || expiredAt(h, now) || idemstore.Status(h[fStatus]) != req.Status {
					continue
				}
				r := decode(req.Namespace, members[i], h)
				if req.UpdatedBefore.IsZero() || r.UpdatedAt.Before(req.UpdatedBefore) {
					page = append(page, r)
				}
			}
			p.Pages++
			p.Read += len(members)
			p.Matched += len(page)
			if req.Progress != nil {
				req.Progress(p)
			}
			for _, r := range page {
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

// Count counts the unexpired records of one status in one namespace: one
// ZCOUNT, or with LeaseEndedBefore a listing. COMPLETED records are in no
// open set and the store never scans the keyspace, so counting them is
// idemstore.ErrNotIndexed even with AllowScan; an empty Namespace is
// idemstore.ErrNamespaceRequired. See [idemstore.Admin].
func (s *Store) Count(ctx context.Context, req idemstore.CountRequest) (int, error) {
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
		if req.Progress != nil {
			req.Progress(idemstore.PageProgress{Pages: 1, Read: int(n), Matched: int(n)})
		}
		return int(n), nil
	}
	n := 0
	list := idemstore.ListOpenRequest{Status: req.Status, Namespace: req.Namespace, Now: now}
	// The listing reports a page before yielding its records: report it
	// once they are counted, when the next page is read or at the end.
	var page *idemstore.PageProgress
	report := func() {
		if page != nil && req.Progress != nil {
			req.Progress(idemstore.PageProgress{Pages: page.Pages, Read: page.Read, Matched: n})
		}
	}
	list.Progress = func(p idemstore.PageProgress) { report(); page = &p }
	defer report()
	for r, err := range s.ListOpen(ctx, list) {
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
func (s *Store) openSet(op, namespace string, status idemstore.Status) (string, error) {
	if namespace == "" {
		return "", fmt.Errorf("%w: redisstore %s", idemstore.ErrNamespaceRequired, op)
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
	return "", fmt.Errorf("%w: redisstore %s %q: only IN_PROGRESS, FAILED and DEAD_LETTERED records are in open sets, and the store never scans its keyspace", idemstore.ErrNotIndexed, op, status)
}

// Resolve records an operator's decision on a record whose outcome is
// unknown, in one script call fenced on the token and dead-letter copy
// the operator read; see [idemstore.Admin].
func (s *Store) Resolve(ctx context.Context, req idemstore.ResolveRequest) (idemstore.Record, error) {
	k, err := s.keysOf("resolve", req.Namespace, req.Key)
	if err != nil {
		return idemstore.Record{}, err
	}
	if err := idemstore.CheckResolve(req); err != nil {
		return idemstore.Record{}, fmt.Errorf("redisstore: %q: %w", k.record, err)
	}
	note := req.StoredNote()
	outcome, rec, err := s.runAdmin(ctx, resolveScript, "resolve", req.Namespace, req.Key, k,
		msNum(req.Now), req.Token, req.DeadLetterMessageID, "resolved-"+rand.Text(), string(req.Decision),
		note, string(req.Result), k.member, truncate(note, s.errLimit))
	switch {
	case err != nil:
		return idemstore.Record{}, err
	case outcome != "refused":
		return rec, nil
	}
	return rec, refused("resolve", k, idemstore.ResolveRefusal(rec, req))
}
