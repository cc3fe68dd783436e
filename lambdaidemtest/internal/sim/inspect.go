package sim

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// inspect is an operator reading the table while the function runs, as
// the CLI's list and stats do (Config.Inspect times): the unfinished
// records of each status, page by page (idemstore.Admin.ListOpen, a few
// records a page), and the count of each status (Count; COMPLETED ones
// with AllowScan, the others also only those whose lease ended). What an
// operator reads must be what the store holds (InvFinal): each record
// listed has the status it is listed under, as Get reads it at the same
// moment (nothing runs between the two in the world); each count is the
// number of records listed; a store counts no COMPLETED records without
// a scan, and says so (ErrNotIndexed), as a store that never scans does
// with one.
func (s *Scenario) inspect() {
	if a := s.admin(); a != nil {
		s.inspectNamespace(a, s.ns)
		s.inspectNamespace(a, s.ns+"-wrap")
	}
}

// inspectNamespace reads one namespace's records as inspect says. Only
// the in-memory store's index is held to agree with Get: another store's
// may lag its records by a moment, as the contract allows.
func (s *Scenario) inspectNamespace(a idemstore.Admin, ns string) {
	ctx, now := context.Background(), s.w.now
	exact := s.Store == nil
	for _, st := range []idemstore.Status{idemstore.StatusInProgress, idemstore.StatusFailed, idemstore.StatusDeadLettered} {
		var pages int
		listed, stuck := 0, 0
		for rec, err := range a.ListOpen(ctx, idemstore.ListOpenRequest{Status: st, Namespace: ns, Now: now, PageSize: 1 + s.w.rng.IntN(3),
			Progress: func(p idemstore.PageProgress) { pages = p.Pages }}) {
			if err != nil {
				s.violate(InvFinal, "operator: listing %s records failed: %v", st, err)
				break
			}
			listed++
			if rec.Status == idemstore.StatusInProgress && rec.LeaseUntil.Before(now) {
				stuck++
			}
			if !exact {
				continue
			}
			got, gerr := a.Get(ctx, idemstore.GetRequest{Namespace: ns, Key: rec.Key, Now: now})
			if gerr != nil || got.Status != st {
				s.violate(InvFinal, "operator: key %s listed as %s, but the store holds it as %s (%v)", rec.Key, st, got.Status, gerr)
			}
		}
		n, err := a.Count(ctx, idemstore.CountRequest{Status: st, Namespace: ns, Now: now})
		if err != nil || n != listed {
			s.violate(InvFinal, "operator: %d %s records counted (%v), %d listed in %d pages", n, st, err, listed, pages)
		}
		if st == idemstore.StatusInProgress {
			n, err := a.Count(ctx, idemstore.CountRequest{Status: st, Namespace: ns, Now: now, LeaseEndedBefore: now})
			if err != nil || n != stuck {
				s.violate(InvFinal, "operator: %d IN_PROGRESS records counted whose lease ended (%v), %d listed", n, err, stuck)
			}
		}
	}
	if _, err := a.Count(ctx, idemstore.CountRequest{Status: idemstore.StatusCompleted, Namespace: ns, Now: now}); !errors.Is(err, idemstore.ErrNotIndexed) {
		s.violate(InvFinal, "operator: COMPLETED records counted without a scan: %v, want ErrNotIndexed", err)
	}
	done, err := a.Count(ctx, idemstore.CountRequest{Status: idemstore.StatusCompleted, Namespace: ns, Now: now, AllowScan: true})
	if err != nil && !errors.Is(err, idemstore.ErrNotIndexed) {
		// (A store that never scans says so: the Redis store.)
		s.violate(InvFinal, "operator: counting COMPLETED records with a scan failed: %v", err)
	}
	s.w.Logf("operator: inspected namespace %s: %d COMPLETED", strings.Replace(ns, s.ns, Namespace, 1), done)
}

// inspections schedules the operators' reads (Config.Inspect).
func (s *Scenario) inspections() {
	c, w := s.Cfg, s.w
	span := c.SendOver + Horizon/2
	for range c.Inspect {
		at := time.Duration(w.rng.Int64N(int64(span)))
		w.At(at, nil, func() { w.Spawn("inspect", nil, s.inspect) })
	}
}
