package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// The operator cases run for stores that implement idemstore.Admin and
// are skipped, with a note, for the others.
func init() {
	cases = append(cases,
		testCase{"AdminReleaseEndedLease", testReleaseEndedLease},
		testCase{"AdminReleaseRefusesLiveLease", testReleaseRefusesLiveLease},
		testCase{"AdminReleaseForceRevokesLiveLease", testReleaseForceRevokes},
		testCase{"AdminReleaseRefusals", testReleaseRefusals},
		testCase{"AdminForget", testForget},
		testCase{"AdminForgetRefusesLiveLease", testForgetRefusesLiveLease},
		testCase{"AdminForgetForceRevokesLiveLease", testForgetForceRevokes},
		testCase{"AdminForgetDeadLettered", testForgetDeadLettered},
		testCase{"AdminCount", testCount},
		testCase{"AdminListOpen", testListOpen},
	)
}

func (f *fixture) admin() idemstore.Admin {
	f.t.Helper()
	a, ok := f.store.(idemstore.Admin)
	if !ok {
		f.t.Skipf("%T does not implement idemstore.Admin: the operator CLI cannot use it", f.store)
	}
	return a
}

func (f *fixture) releaseReq(key, token string, now int) idemstore.ReleaseRequest {
	return idemstore.ReleaseRequest{Namespace: f.ns, Key: key, Token: token, Now: f.at(now), Grace: graceSecs * time.Second}
}

func (f *fixture) forgetReq(key string, now int) idemstore.ForgetRequest {
	return idemstore.ForgetRequest{Namespace: f.ns, Key: key, Now: f.at(now), Grace: graceSecs * time.Second}
}

// mustRefuseRelease checks that a release is refused with want, returns
// the stored record and changes nothing.
func (f *fixture) mustRefuseRelease(req idemstore.ReleaseRequest, want error) {
	f.t.Helper()
	before := f.get(req.Key, req.Now)
	got, err := f.admin().Release(f.ctx, req)
	if !errors.Is(err, want) {
		f.t.Fatalf("Release(%s at %v) = %+v, %v; want %v", req.Key, req.Now, got, err, want)
	}
	if d := RecordDiff(before, got); d != "" {
		f.t.Errorf("refused release returned a record unlike the stored one (-stored +returned):\n%s", d)
	}
	f.unchanged("refused release", before, req.Now)
}

// mustRefuseForget checks that a forget is refused with want, returns the
// stored record and changes nothing.
func (f *fixture) mustRefuseForget(req idemstore.ForgetRequest, want error) {
	f.t.Helper()
	before := f.get(req.Key, req.Now)
	got, err := f.admin().Forget(f.ctx, req)
	if !errors.Is(err, want) {
		f.t.Fatalf("Forget(%s at %v) = %+v, %v; want %v", req.Key, req.Now, got, err, want)
	}
	if d := RecordDiff(before, got.Record); d != "" {
		f.t.Errorf("refused forget returned a record unlike the stored one (-stored +returned):\n%s", d)
	}
	if got.Revoked {
		f.t.Errorf("refused forget reports a revoked lease")
	}
	f.unchanged("refused forget", before, req.Now)
}

// fenced checks that every write of the lease l is refused at second now
// and changes nothing.
func (f *fixture) fenced(what string, l idemstore.Lease, now int) {
	f.t.Helper()
	before := f.get(l.Key, f.at(now))
	for _, op := range writeOps {
		f.leaseLost(op.name+" of the holder after "+what, op.do(f, l, now))
	}
	f.unchanged("the old holder's writes after "+what, before, f.at(now))
}

func testReleaseEndedLease(t *testing.T, f *fixture) {
	a := f.admin()
	c := f.mustClaim(f.claimReq("k", 0)) // lease until 30, live until 35
	before := f.get("k", f.at(0))
	req := f.releaseReq("k", c.Lease.Token, leaseSecs+graceSecs+1)
	req.Note = "stuck since the deploy"
	got, err := a.Release(f.ctx, req)
	f.ok("Release", err)
	want := before
	want.Status = idemstore.StatusFailed
	want.LeaseToken = got.LeaseToken
	want.LastError = "stuck since the deploy"
	want.UpdatedAt = req.Now
	if d := RecordDiff(want, got); d != "" {
		t.Errorf("record after release (-want +got):\n%s", d)
	}
	if got.LeaseToken == "" || got.LeaseToken == c.Lease.Token {
		t.Errorf("release kept lease token %q; want a new one", got.LeaseToken)
	}
	f.unchanged("reading back the release", got, req.Now)
	f.fenced("a release", c.Lease, leaseSecs+graceSecs+2)
	// The next delivery claims it as after any failure, attempts counting on.
	again := f.mustClaim(f.claimReq("k", leaseSecs+graceSecs+3))
	if again.Previous != idemstore.StatusFailed || again.Lease.Attempt != 2 || again.Lease.Fence.Generation != c.Lease.Fence.Generation {
		t.Errorf("claim after release: previous %q, attempt %d, same generation %t; want FAILED, 2, true",
			again.Previous, again.Lease.Attempt, again.Lease.Fence.Generation == c.Lease.Fence.Generation)
	}

	// Without a note, the record says an operator released it.
	f.mustClaim(f.claimReq("k2", 0))
	r, err := a.Release(f.ctx, f.releaseReq("k2", f.get("k2", f.at(0)).LeaseToken, 100))
	f.ok("Release without a note", err)
	if r.LastError != idemstore.DefaultReleaseNote {
		t.Errorf("last error %q, want %q", r.LastError, idemstore.DefaultReleaseNote)
	}
}

func testReleaseRefusesLiveLease(t *testing.T, f *fixture) {
	c := f.mustClaim(f.claimReq("k", 0)) // lease until 30
	for _, now := range []int{1, leaseSecs, leaseSecs + graceSecs} {
		f.mustRefuseRelease(f.releaseReq("k", c.Lease.Token, now), idemstore.ErrInProgress)
	}
	// An extended lease is live for longer.
	f.ok("Extend", f.extend(c.Lease, 10, 100))
	f.mustRefuseRelease(f.releaseReq("k", c.Lease.Token, 50), idemstore.ErrInProgress)
	_, err := f.admin().Release(f.ctx, f.releaseReq("k", c.Lease.Token, 100+graceSecs+1))
	f.ok("Release once the extended lease ended", err)
}

func testReleaseForceRevokes(t *testing.T, f *fixture) {
	a := f.admin()
	c := f.mustClaim(f.claimReq("k", 0)) // lease until 30
	before := f.get("k", f.at(0))
	req := f.releaseReq("k", c.Lease.Token, 10)
	req.Force = true
	got, err := a.Release(f.ctx, req)
	f.ok("forced Release", err)
	want := before
	want.LeaseToken = got.LeaseToken
	want.LastError = idemstore.DefaultReleaseNote
	want.UpdatedAt = req.Now
	if d := RecordDiff(want, got); d != "" {
		t.Errorf("record after a forced release of a live lease (-want +got): the lease is revoked, its end kept:\n%s", d)
	}
	if got.LeaseToken == "" || got.LeaseToken == c.Lease.Token {
		t.Errorf("revocation kept lease token %q; want a new one", got.LeaseToken)
	}
	f.unchanged("reading back the revocation", got, req.Now)
	f.fenced("a revocation", c.Lease, 11)
	// Nobody claims the key while the revoked lease may still have a
	// running holder: only a takeover once it has run out.
	f.mustRefuse(f.claimReq("k", 20))
	f.mustRefuse(f.claimReq("k", leaseSecs+graceSecs))
	tk := f.mustClaim(f.claimReq("k", leaseSecs+graceSecs+1))
	if tk.Previous != idemstore.StatusInProgress || tk.Lease.Attempt != 2 || tk.Record.Takeovers != 1 {
		t.Errorf("claim after the revoked lease ran out: previous %q, attempt %d, takeovers %d; want IN_PROGRESS, 2, 1",
			tk.Previous, tk.Lease.Attempt, tk.Record.Takeovers)
	}
}

func testReleaseRefusals(t *testing.T, f *fixture) {
	a := f.admin()
	// Claimed again in between: the release is based on an old view.
	stale := f.mustClaim(f.claimReq("taken", 0))
	f.mustClaim(f.claimReq("taken", leaseSecs+graceSecs+1))
	for _, force := range []bool{false, true} {
		req := f.releaseReq("taken", stale.Lease.Token, 100)
		req.Force = force
		f.mustRefuseRelease(req, idemstore.ErrRecordChanged)
	}
	// Finished records have no lease to release.
	done := f.mustClaim(f.claimReq("done", 0))
	f.ok("Complete", f.complete(done.Lease, 1, nil))
	failed := f.mustClaim(f.claimReq("failed", 0))
	f.ok("Fail", f.fail(failed.Lease, 1, "boom"))
	dead := f.mustClaim(f.claimReq("dead", 0))
	f.ok("DeadLetter", f.deadLetter(dead.Lease, 1, idemstore.ReasonPoison))
	for key, l := range map[string]idemstore.Lease{"done": done.Lease, "failed": failed.Lease, "dead": dead.Lease} {
		req := f.releaseReq(key, l.Token, 100)
		req.Force = true
		f.mustRefuseRelease(req, idemstore.ErrNotInProgress)
	}
	// Absent or expired.
	if _, err := a.Release(f.ctx, f.releaseReq("never", "tok", 100)); !errors.Is(err, idemstore.ErrNotFound) {
		t.Errorf("Release of an absent record = %v, want ErrNotFound", err)
	}
	exp := f.mustClaim(f.claimReq("gone", 0))
	if _, err := a.Release(f.ctx, f.releaseReq("gone", exp.Lease.Token, retentionSecs+10)); !errors.Is(err, idemstore.ErrNotFound) {
		t.Errorf("Release of an expired record = %v, want ErrNotFound", err)
	}
	// No token: the operator did not read the record.
	_, err := a.Release(f.ctx, f.releaseReq("taken", "", 100))
	if err == nil || errors.Is(err, idemstore.ErrStoreUnavailable) {
		t.Errorf("Release without a token = %v, want an invalid-request error", err)
	}
}

func testForget(t *testing.T, f *fixture) {
	a := f.admin()
	done := f.mustClaim(f.claimReq("done", 0))
	f.ok("Complete", f.complete(done.Lease, 1, []byte(`"r"`)))
	failed := f.mustClaim(f.claimReq("failed", 0))
	f.ok("Fail", f.fail(failed.Lease, 1, "boom"))
	f.mustClaim(f.claimReq("stuck", 0)) // lease until 30, live until 35
	now := leaseSecs + graceSecs + 1
	for _, key := range []string{"done", "failed", "stuck"} {
		before := f.get(key, f.at(now))
		res, err := a.Forget(f.ctx, f.forgetReq(key, now))
		f.ok("Forget("+key+")", err)
		if d := RecordDiff(before, res.Record); d != "" {
			t.Errorf("Forget(%s) returned a record unlike the one it removed (-stored +returned):\n%s", key, d)
		}
		if res.Revoked || !res.ForgottenAt.Equal(f.at(now)) {
			t.Errorf("Forget(%s): revoked %t, forgotten at %v; want removed at once", key, res.Revoked, res.ForgottenAt)
		}
		f.mustBeAbsent(key, f.at(now))
		// The key is claimed afresh: a new generation.
		c := f.mustClaim(f.claimReq(key, now+1))
		if c.Previous != "" || c.Lease.Attempt != 1 || c.Lease.Fence.Generation == before.Fence.Generation {
			t.Errorf("claim after Forget(%s): previous %q, attempt %d, same generation %t; want a fresh generation",
				key, c.Previous, c.Lease.Attempt, c.Lease.Fence.Generation == before.Fence.Generation)
		}
	}
	if _, err := a.Forget(f.ctx, f.forgetReq("never", 0)); !errors.Is(err, idemstore.ErrNotFound) {
		t.Errorf("Forget of an absent record = %v, want ErrNotFound", err)
	}
	if _, err := a.Forget(f.ctx, f.forgetReq("done", retentionSecs+100)); !errors.Is(err, idemstore.ErrNotFound) {
		t.Errorf("Forget of an expired record = %v, want ErrNotFound", err)
	}
}

func testForgetRefusesLiveLease(t *testing.T, f *fixture) {
	f.mustClaim(f.claimReq("k", 0)) // lease until 30
	for _, now := range []int{1, leaseSecs, leaseSecs + graceSecs} {
		f.mustRefuseForget(f.forgetReq("k", now), idemstore.ErrInProgress)
	}
}

func testForgetForceRevokes(t *testing.T, f *fixture) {
	a := f.admin()
	c := f.mustClaim(f.claimReq("k", 0)) // lease until 30
	before := f.get("k", f.at(0))
	req := f.forgetReq("k", 10)
	req.Force = true
	res, err := a.Forget(f.ctx, req)
	f.ok("forced Forget", err)
	end := f.at(leaseSecs + graceSecs)
	if !res.Revoked || !res.ForgottenAt.Equal(end) {
		t.Errorf("forced Forget of a live lease: revoked %t, forgotten at %v; want revoked, forgotten at %v", res.Revoked, res.ForgottenAt, end)
	}
	want := before
	want.LeaseToken = res.Record.LeaseToken
	want.LastError = idemstore.DefaultForgetNote
	want.ExpiresAt = end
	want.LeaseUntil = end // so no takeover comes before the expiry
	want.UpdatedAt = req.Now
	if d := RecordDiff(want, res.Record); d != "" {
		t.Errorf("record after a forced forget of a live lease (-want +got):\n%s", d)
	}
	if res.Record.LeaseToken == "" || res.Record.LeaseToken == c.Lease.Token {
		t.Errorf("revocation kept lease token %q; want a new one", res.Record.LeaseToken)
	}
	f.unchanged("reading back the revocation", res.Record, req.Now)
	f.fenced("a forced forget", c.Lease, 11)
	// The key stays taken while the holder may still run, then is
	// forgotten: the next claim, even one with no grace, starts a new
	// generation.
	f.mustRefuse(f.claimReq("k", 20))
	noGrace := f.claimReq("k", leaseSecs+graceSecs)
	noGrace.Grace = 0
	f.mustRefuse(noGrace)
	f.get("k", end)
	f.mustBeAbsent("k", end.Add(time.Second))
	fresh := f.mustClaim(f.claimReq("k", leaseSecs+graceSecs+1))
	if fresh.Previous != "" || fresh.Lease.Attempt != 1 || fresh.Lease.Fence.Generation == c.Lease.Fence.Generation {
		t.Errorf("claim after the forgotten lease ran out: previous %q, attempt %d, same generation %t; want a fresh generation",
			fresh.Previous, fresh.Lease.Attempt, fresh.Lease.Fence.Generation == c.Lease.Fence.Generation)
	}
}

func testForgetDeadLettered(t *testing.T, f *fixture) {
	a := f.admin()
	f.deadLettered("k", "dlq-1", 0)
	for _, force := range []bool{false, true} {
		req := f.forgetReq("k", 2)
		req.Force = force
		f.mustRefuseForget(req, idemstore.ErrWouldAbandonCopy)
	}
	req := f.forgetReq("k", 2)
	req.AbandonCopy = true
	res, err := a.Forget(f.ctx, req)
	f.ok("Forget with AbandonCopy", err)
	if res.Record.Status != idemstore.StatusDeadLettered || res.Revoked {
		t.Errorf("Forget with AbandonCopy returned %s (revoked %t), want the DEAD_LETTERED record it removed", res.Record.Status, res.Revoked)
	}
	f.mustBeAbsent("k", f.at(2))
	// Nothing vouches for the copy any more: its reset finds no record.
	if rs, ok := f.store.(idemstore.DeadLetterResetter); ok {
		if _, err := rs.ResetDeadLetter(f.ctx, f.resetReq("k", "dlq-1", 3)); !errors.Is(err, idemstore.ErrNotFound) {
			t.Errorf("reset after the record was forgotten = %v, want ErrNotFound", err)
		}
	}
}

// openRecords writes, in the fixture's namespace: IN_PROGRESS "run"
// (lease until 130) and "stuck" (lease until 30), FAILED "fail" and
// "gone" (which expires at 60), DEAD_LETTERED "dead", COMPLETED "c1" and
// "c2"; all updated at second 1 except "run" (100).
func (f *fixture) openRecords() {
	f.t.Helper()
	f.mustClaim(f.claimReq("run", 100))
	f.mustClaim(f.claimReq("stuck", 0))
	fl := f.mustClaim(f.claimReq("fail", 0))
	f.ok("Fail", f.fail(fl.Lease, 1, "boom"))
	gone := f.claimReq("gone", 0)
	gone.ExpiresAt = f.at(60)
	g := f.mustClaim(gone)
	f.ok("Fail", f.store.Fail(f.ctx, idemstore.FailRequest{Lease: g.Lease, Now: f.at(1), Error: "boom", ExpiresAt: f.at(60)}))
	d := f.mustClaim(f.claimReq("dead", 0))
	f.ok("DeadLetter", f.deadLetter(d.Lease, 1, idemstore.ReasonPoison))
	for _, k := range []string{"c1", "c2"} {
		c := f.mustClaim(f.claimReq(k, 0))
		f.ok("Complete", f.complete(c.Lease, 1, nil))
	}
}

func testCount(t *testing.T, f *fixture) {
	a := f.admin()
	f.openRecords()
	const now = 110
	for _, tc := range []struct {
		status idemstore.Status
		ended  time.Time
		want   int
	}{
		{idemstore.StatusInProgress, time.Time{}, 2},
		{idemstore.StatusInProgress, f.at(now), 1},
		{idemstore.StatusFailed, time.Time{}, 1},
		{idemstore.StatusDeadLettered, time.Time{}, 1},
	} {
		var last idemstore.PageProgress
		req := idemstore.CountRequest{Status: tc.status, Namespace: f.ns, Now: f.at(now), LeaseEndedBefore: tc.ended,
			Progress: func(p idemstore.PageProgress) { last = p }}
		got, err := a.Count(f.ctx, req)
		f.ok("Count("+string(tc.status)+")", err)
		if got != tc.want {
			t.Errorf("Count(%s, lease ended before %v) = %d, want %d", tc.status, tc.ended, got, tc.want)
		}
		if last.Pages < 1 || last.Matched != got {
			t.Errorf("Count(%s, lease ended before %v): last progress %+v for a count of %d", tc.status, tc.ended, last, got)
		}
		// Every namespace: at least this one's records, or refused.
		req.Namespace, req.Progress = "", nil
		all, err := a.Count(f.ctx, req)
		if !errors.Is(err, idemstore.ErrNamespaceRequired) && (err != nil || all < tc.want) {
			t.Errorf("Count(%s) over every namespace = %d, %v; want at least %d, or ErrNamespaceRequired", tc.status, all, err, tc.want)
		}
	}
	// The expired FAILED record counted while it was kept.
	if got, err := a.Count(f.ctx, idemstore.CountRequest{Status: idemstore.StatusFailed, Namespace: f.ns, Now: f.at(59)}); err != nil || got != 2 {
		t.Errorf("Count(FAILED) before the expiry = %d, %v; want 2", got, err)
	}
	// COMPLETED records are in no index: only with AllowScan, where the
	// store can scan.
	req := idemstore.CountRequest{Status: idemstore.StatusCompleted, Namespace: f.ns, Now: f.at(now)}
	if _, err := a.Count(f.ctx, req); !errors.Is(err, idemstore.ErrNotIndexed) {
		t.Errorf("Count(COMPLETED) without AllowScan = %v, want ErrNotIndexed", err)
	}
	req.AllowScan = true
	if got, err := a.Count(f.ctx, req); !errors.Is(err, idemstore.ErrNotIndexed) && (err != nil || got != 2) {
		t.Errorf("Count(COMPLETED) with AllowScan = %d, %v; want 2, or ErrNotIndexed", got, err)
	}
	if _, err := a.Count(f.ctx, idemstore.CountRequest{Status: "NOPE", Namespace: f.ns}); !errors.Is(err, idemstore.ErrNotIndexed) {
		t.Errorf("Count of an unknown status = %v, want ErrNotIndexed", err)
	}
}

func testListOpen(t *testing.T, f *fixture) {
	a := f.admin()
	f.openRecords()
	const now = 110
	list := func(req idemstore.ListOpenRequest) ([]string, idemstore.PageProgress) {
		t.Helper()
		var keys []string
		var last idemstore.PageProgress
		req.Progress = func(p idemstore.PageProgress) { last = p }
		for r, err := range a.ListOpen(f.ctx, req) {
			if err != nil {
				t.Fatalf("ListOpen(%+v): %v", req, err)
			}
			if r.Namespace != f.ns || r.Status != req.Status {
				t.Errorf("ListOpen(%s) yielded %s/%s (%s)", req.Status, r.Namespace, r.Key, r.Status)
			}
			keys = append(keys, r.Key)
		}
		slices.Sort(keys)
		return keys, last
	}
	for _, tc := range []struct {
		status idemstore.Status
		before time.Time
		now    int
		want   []string
	}{
		{idemstore.StatusInProgress, time.Time{}, now, []string{"run", "stuck"}},
		{idemstore.StatusInProgress, f.at(50), now, []string{"stuck"}},
		{idemstore.StatusFailed, time.Time{}, now, []string{"fail"}},
		{idemstore.StatusFailed, time.Time{}, 59, []string{"fail", "gone"}},
		{idemstore.StatusFailed, f.at(1), now, nil},
		{idemstore.StatusDeadLettered, time.Time{}, now, []string{"dead"}},
	} {
		req := idemstore.ListOpenRequest{Status: tc.status, Namespace: f.ns, UpdatedBefore: tc.before, Now: f.at(tc.now), PageSize: 1}
		got, last := list(req)
		if !slices.Equal(got, tc.want) {
			t.Errorf("ListOpen(%s, updated before %v, at %d) = %v, want %v", tc.status, tc.before, tc.now, got, tc.want)
		}
		if len(got) > 0 && (last.Pages < len(got) || last.Matched != len(got)) {
			t.Errorf("ListOpen(%s) with pages of 1: last progress %+v for %d records", tc.status, last, len(got))
		}
	}
	// A caller may stop early.
	n := 0
	for _, err := range a.ListOpen(f.ctx, idemstore.ListOpenRequest{Status: idemstore.StatusInProgress, Namespace: f.ns, Now: f.at(now), PageSize: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		break
	}
	if n != 1 {
		t.Errorf("ListOpen stopped after %d records, want 1", n)
	}
	// Every namespace: this one's records among them, or refused.
	var all []string
	for r, err := range a.ListOpen(f.ctx, idemstore.ListOpenRequest{Status: idemstore.StatusDeadLettered, Now: f.at(now)}) {
		if errors.Is(err, idemstore.ErrNamespaceRequired) {
			break
		}
		if err != nil {
			t.Fatalf("ListOpen over every namespace: %v", err)
		}
		if r.Namespace == f.ns {
			all = append(all, r.Key)
		}
	}
	if all != nil && !slices.Equal(all, []string{"dead"}) {
		t.Errorf("ListOpen(DEAD_LETTERED) over every namespace found %v of this namespace, want [dead]", all)
	}
	for _, st := range []idemstore.Status{idemstore.StatusCompleted, "NOPE"} {
		for _, err := range a.ListOpen(f.ctx, idemstore.ListOpenRequest{Status: st, Namespace: f.ns, Now: f.at(now)}) {
			if !errors.Is(err, idemstore.ErrNotIndexed) {
				t.Errorf("ListOpen(%s) yielded %v, want ErrNotIndexed", st, err)
			}
		}
	}
}
