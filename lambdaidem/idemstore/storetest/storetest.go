package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// Times the suite builds its requests from, in whole seconds so that stores
// keeping seconds lose nothing.
const (
	leaseSecs     = 30
	graceSecs     = 5
	retentionSecs = 24 * 60 * 60
	hashA         = "hash-a"
	hashB         = "hash-b"
)

// Run runs the conformance suite against the stores newStore returns. Each
// subtest is parallel and asks newStore for a store of its own; newStore may
// register cleanups on the t it is given.
func Run(t *testing.T, newStore func(t *testing.T) idemstore.Store) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, setup(t, newStore))
		})
	}
}

// RecordDiff reports how got differs from want, "" when they are the same
// record: times compare with Equal (so the location and monotonic reading
// do not matter) and a nil result equals an empty one.
func RecordDiff(want, got idemstore.Record) string {
	return cmp.Diff(want, got, cmpOpts)
}

var cmpOpts = cmp.Options{
	cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }),
	cmp.Comparer(func(a, b []byte) bool { return bytes.Equal(a, b) }),
}

// fixture is what every case needs: its own store, its own namespace and a
// second-aligned origin of time.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	store idemstore.Store
	ns    string
	t0    time.Time
}

func setup(t *testing.T, newStore func(t *testing.T) idemstore.Store) *fixture {
	t.Helper()
	return &fixture{
		t:     t,
		ctx:   t.Context(),
		store: newStore(t),
		ns:    "storetest-" + rand.Text()[:12],
		t0:    time.Now().UTC().Truncate(time.Second),
	}
}

// at is the time sec seconds after the fixture's origin.
func (f *fixture) at(sec int) time.Time {
	return f.t0.Add(time.Duration(sec) * time.Second)
}

// claimReq is a claim of key at second now with the suite's lease, grace and
// retention, payload hashA and message "m1".
func (f *fixture) claimReq(key string, now int) idemstore.ClaimRequest {
	return idemstore.ClaimRequest{
		Namespace:   f.ns,
		Key:         key,
		PayloadHash: hashA,
		MessageID:   "m1",
		Now:         f.at(now),
		LeaseUntil:  f.at(now + leaseSecs),
		Grace:       graceSecs * time.Second,
		ExpiresAt:   f.at(now + retentionSecs),
	}
}

func (f *fixture) claim(req idemstore.ClaimRequest) idemstore.ClaimResult {
	f.t.Helper()
	res, err := f.store.Claim(f.ctx, req)
	if err != nil {
		f.t.Fatalf("Claim(%s at %v): %v", req.Key, req.Now, err)
	}
	return res
}

// mustClaim claims and fails the test unless the claim succeeded.
func (f *fixture) mustClaim(req idemstore.ClaimRequest) idemstore.ClaimResult {
	f.t.Helper()
	res := f.claim(req)
	if !res.Claimed {
		f.t.Fatalf("Claim(%s at %v) refused; record: %+v", req.Key, req.Now, res.Record)
	}
	return res
}

// mustRefuse claims, fails the test unless the claim was refused, and checks
// that the refusal returned the stored record and changed nothing.
func (f *fixture) mustRefuse(req idemstore.ClaimRequest) idemstore.ClaimResult {
	f.t.Helper()
	before := f.get(req.Key, req.Now)
	res := f.claim(req)
	if res.Claimed {
		f.t.Fatalf("Claim(%s at %v) succeeded (previous %q), want refused; was: %+v", req.Key, req.Now, res.Previous, before)
	}
	if d := RecordDiff(before, res.Record); d != "" {
		f.t.Errorf("refused Claim(%s) returned a record unlike the stored one (-stored +returned):\n%s", req.Key, d)
	}
	if d := RecordDiff(before, f.get(req.Key, req.Now)); d != "" {
		f.t.Errorf("refused Claim(%s) changed the record (-before +after):\n%s", req.Key, d)
	}
	return res
}

func (f *fixture) get(key string, now time.Time) idemstore.Record {
	f.t.Helper()
	r, err := f.store.Get(f.ctx, idemstore.GetRequest{Namespace: f.ns, Key: key, Now: now})
	if err != nil {
		f.t.Fatalf("Get(%s at %v): %v", key, now, err)
	}
	return r
}

func (f *fixture) mustBeAbsent(key string, now time.Time) {
	f.t.Helper()
	r, err := f.store.Get(f.ctx, idemstore.GetRequest{Namespace: f.ns, Key: key, Now: now})
	if !errors.Is(err, idemstore.ErrNotFound) {
		f.t.Fatalf("Get(%s at %v) = %+v, %v; want ErrNotFound", key, now, r, err)
	}
}

func (f *fixture) complete(l idemstore.Lease, now int, result []byte) error {
	return f.store.Complete(f.ctx, idemstore.CompleteRequest{
		Lease:     l,
		Now:       f.at(now),
		Result:    result,
		ExpiresAt: f.at(now + retentionSecs),
	})
}

func (f *fixture) fail(l idemstore.Lease, now int, msg string) error {
	return f.store.Fail(f.ctx, idemstore.FailRequest{
		Lease:     l,
		Now:       f.at(now),
		Error:     msg,
		ExpiresAt: f.at(now + retentionSecs),
	})
}

func (f *fixture) deadLetter(l idemstore.Lease, now int, reason idemstore.Reason) error {
	return f.store.DeadLetter(f.ctx, idemstore.DeadLetterRequest{
		Lease:               l,
		Now:                 f.at(now),
		Reason:              reason,
		Error:               "boom",
		MessageID:           "m1",
		DeadLetterMessageID: "dlq-1",
		ExpiresAt:           f.at(now + retentionSecs),
	})
}

func (f *fixture) extend(l idemstore.Lease, now, until int) error {
	return f.store.Extend(f.ctx, idemstore.ExtendRequest{
		Lease:      l,
		Now:        f.at(now),
		LeaseUntil: f.at(until),
	})
}

// ok fails the test when a write that should apply did not.
func (f *fixture) ok(op string, err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatalf("%s: %v", op, err)
	}
}

// leaseLost fails the test unless err is ErrLeaseLost.
func (f *fixture) leaseLost(op string, err error) {
	f.t.Helper()
	if !errors.Is(err, idemstore.ErrLeaseLost) {
		f.t.Errorf("%s = %v, want ErrLeaseLost", op, err)
	}
}

// unchanged fails the test if the record of key differs from want.
func (f *fixture) unchanged(what string, want idemstore.Record, now time.Time) {
	f.t.Helper()
	if d := RecordDiff(want, f.get(want.Key, now)); d != "" {
		f.t.Errorf("%s changed the record (-before +after):\n%s", what, d)
	}
}
