package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// The optimistic mode's cases run for stores that implement
// idemstore.Committer and are skipped, with a note, for the others.
func init() {
	cases = append(cases,
		testCase{"CommitAbsent", testCommitAbsent},
		testCase{"CommitFailedThenCompleted", testCommitFailedThenCompleted},
		testCase{"CommitRefusals", testCommitRefusals},
		testCase{"CommitTakesOverAbandonedLease", testCommitTakesOverAbandonedLease},
		testCase{"CommitExpiredIsFresh", testCommitExpiredIsFresh},
		testCase{"CommitRetryIsOwn", testCommitRetryIsOwn},
		testCase{"CommitAtLimit", testCommitAtLimit},
		testCase{"CommitAndLeaseModeMeet", testCommitAndLeaseModeMeet},
		testCase{"CommitConcurrent", testCommitConcurrent},
		testCase{"CommitConcurrentWithClaims", testCommitConcurrentWithClaims},
		testCase{"CommitLargeResult", testCommitLargeResult},
		testCase{"CommitUnsupportedWrite", testCommitUnsupportedWrite},
		testCase{"CommitInvalidRequests", testCommitInvalidRequests},
	)
}

func (f *fixture) committer() idemstore.Committer {
	f.t.Helper()
	c, ok := f.store.(idemstore.Committer)
	if !ok {
		f.t.Skipf("%T does not implement idemstore.Committer: the optimistic mode cannot use it", f.store)
	}
	return c
}

// tokens hands out commit tokens unique within a test.
var tokens struct {
	sync.Mutex
	n int
}

func newToken() string {
	tokens.Lock()
	defer tokens.Unlock()
	tokens.n++
	return fmt.Sprintf("commit-%d-%d", time.Now().UnixNano()%1e9, tokens.n)
}

// commitReq is a commit of key at second now with status st, payload
// hashA, message "m1", a fresh token and the suite's grace and retention.
func (f *fixture) commitReq(key string, now int, st idemstore.Status) idemstore.CommitRequest {
	req := idemstore.CommitRequest{
		Namespace:   f.ns,
		Key:         key,
		PayloadHash: hashA,
		MessageID:   "m1",
		Token:       newToken(),
		Now:         f.at(now),
		Grace:       graceSecs * time.Second,
		Status:      st,
		ExpiresAt:   f.at(now + retentionSecs),
	}
	if st == idemstore.StatusFailed {
		req.Error = "handler failed"
	}
	return req
}

func (f *fixture) commit(req idemstore.CommitRequest) idemstore.CommitResult {
	f.t.Helper()
	res, err := f.committer().Commit(f.ctx, req)
	if err != nil {
		f.t.Fatalf("Commit(%s %s at %v): %v", req.Key, req.Status, req.Now, err)
	}
	return res
}

// mustCommit commits and fails the test unless the commit applied and
// returned the record Get reads.
func (f *fixture) mustCommit(req idemstore.CommitRequest) idemstore.CommitResult {
	f.t.Helper()
	res := f.commit(req)
	if !res.Committed || res.AtLimit {
		f.t.Fatalf("Commit(%s %s at %v) = committed %v, at limit %v, want committed; record: %+v",
			req.Key, req.Status, req.Now, res.Committed, res.AtLimit, res.Record)
	}
	got := f.get(req.Key, req.Now)
	res.Record.Result, got.Result = nil, nil // a commit may leave its result out
	if d := RecordDiff(got, res.Record); d != "" {
		f.t.Errorf("Commit(%s) returned a record unlike the stored one (-stored +returned):\n%s", req.Key, d)
	}
	return res
}

// mustRefuseCommit commits, fails the test unless the commit was refused,
// and checks that it returned the stored record and changed nothing.
func (f *fixture) mustRefuseCommit(req idemstore.CommitRequest) idemstore.CommitResult {
	f.t.Helper()
	before := f.get(req.Key, req.Now)
	res := f.commit(req)
	if res.Committed || res.AtLimit {
		f.t.Fatalf("Commit(%s %s at %v) = committed %v, at limit %v; want refused; was: %+v",
			req.Key, req.Status, req.Now, res.Committed, res.AtLimit, before)
	}
	returned := res.Record
	returned.Result = before.Result // a refusal may leave the result out
	if d := RecordDiff(before, returned); d != "" {
		f.t.Errorf("refused Commit(%s) returned a record unlike the stored one (-stored +returned):\n%s", req.Key, d)
	}
	f.unchanged("refused Commit("+req.Key+")", before, req.Now)
	return res
}

func testCommitAbsent(t *testing.T, f *fixture) {
	req := f.commitReq("k", 0, idemstore.StatusCompleted)
	req.Result = []byte(`{"ok":true}`)
	req.ResultUntil = f.at(60)
	res := f.mustCommit(req)
	if res.Record.Fence.Generation == "" {
		t.Error("Fence.Generation is empty")
	}
	want := idemstore.Record{
		Namespace:      f.ns,
		Key:            "k",
		SchemaVersion:  idemstore.SchemaVersion,
		Status:         idemstore.StatusCompleted,
		LeaseToken:     req.Token,
		LeaseUntil:     req.Now,
		Attempts:       1,
		Fence:          idemstore.Fence{Generation: res.Record.Fence.Generation, Claim: 1},
		PayloadHash:    hashA,
		MessageID:      "m1",
		Result:         req.Result,
		ResultUntil:    req.ResultUntil,
		ExpiresAt:      req.ExpiresAt,
		FirstAttemptAt: req.Now,
		UpdatedAt:      req.Now,
	}
	if d := RecordDiff(want, f.get("k", req.Now)); d != "" {
		t.Errorf("Get after commit (-want +got):\n%s", d)
	}
	// A lease-mode claim of the same payload is a duplicate and replays
	// the result; another payload is a conflict.
	if dup := f.mustRefuse(f.claimReq("k", 1)); !bytes.Equal(dup.Record.Result, req.Result) {
		t.Errorf("the duplicate's claim returned result %q, want %q", dup.Record.Result, req.Result)
	}
	other := f.claimReq("k", 1)
	other.PayloadHash = hashB
	f.mustRefuse(other)
}

func testCommitFailedThenCompleted(t *testing.T, f *fixture) {
	failed := f.mustCommit(f.commitReq("k", 0, idemstore.StatusFailed)).Record
	if failed.Status != idemstore.StatusFailed || failed.LastError != "handler failed" || failed.Attempts != 1 || failed.Fence.Claim != 1 {
		t.Errorf("failed commit wrote %s, last error %q, attempts %d, claim %d; want FAILED, handler failed, 1, 1",
			failed.Status, failed.LastError, failed.Attempts, failed.Fence.Claim)
	}
	req := f.commitReq("k", 5, idemstore.StatusCompleted)
	req.MessageID = "m2"
	done := f.mustCommit(req).Record
	want := failed
	want.Status = idemstore.StatusCompleted
	want.LeaseToken = req.Token
	want.LeaseUntil = req.Now
	want.Attempts = 2
	want.Fence.Claim = 2
	want.MessageID = "m2"
	want.ExpiresAt = req.ExpiresAt
	want.UpdatedAt = req.Now
	if d := RecordDiff(want, done); d != "" {
		t.Errorf("completed after a failed commit (-want +got):\n%s", d)
	}
}

func testCommitRefusals(t *testing.T, f *fixture) {
	// A lease-mode holder's live lease, up to its end plus the grace,
	// whatever the commit's status or payload.
	held := f.mustClaim(f.claimReq("held", 0))
	for _, now := range []int{0, leaseSecs, leaseSecs + graceSecs} {
		for _, st := range []idemstore.Status{idemstore.StatusCompleted, idemstore.StatusFailed} {
			for _, hash := range []string{hashA, hashB} {
				req := f.commitReq("held", now, st)
				req.PayloadHash = hash
				f.mustRefuseCommit(req)
			}
		}
	}
	f.ok("the holder's Complete after refused commits", f.complete(held.Lease, 1, nil))

	// Finished records: a duplicate, a conflict, a dead letter.
	done := f.mustClaim(f.claimReq("done", 0))
	f.ok("Complete", f.complete(done.Lease, 1, []byte(`"r"`)))
	dead := f.mustClaim(f.claimReq("dead", 0))
	f.ok("DeadLetter", f.deadLetter(dead.Lease, 1, idemstore.ReasonPoison))
	for _, key := range []string{"done", "dead"} {
		for _, st := range []idemstore.Status{idemstore.StatusCompleted, idemstore.StatusFailed} {
			for _, hash := range []string{hashA, hashB} {
				req := f.commitReq(key, 2, st)
				req.PayloadHash = hash
				f.mustRefuseCommit(req)
			}
		}
	}
	// An abandoned lease whose holder was dead-lettering the message (a
	// pending mark): only a claim, which finishes the dead-lettering,
	// takes it over; a commit comes after a run that must not happen.
	pending := f.mustClaim(f.claimReq("pending", 0))
	f.ok("DeadLetter (pending)", f.store.DeadLetter(f.ctx, idemstore.DeadLetterRequest{
		Lease: pending.Lease, Now: f.at(1), Reason: idemstore.ReasonOutcomeUnknown, Error: "unknown",
		MessageID: "m1", ExpiresAt: f.at(retentionSecs), Pending: true,
	}))
	for _, st := range []idemstore.Status{idemstore.StatusCompleted, idemstore.StatusFailed} {
		f.mustRefuseCommit(f.commitReq("pending", leaseSecs+graceSecs+1, st))
	}
	// Another payload's FAILED record, and its abandoned lease: a key
	// conflict is never a retry and never a takeover.
	failed := f.mustClaim(f.claimReq("failed", 0))
	f.ok("Fail", f.fail(failed.Lease, 1, "boom"))
	f.mustClaim(f.claimReq("abandoned", 0))
	for _, key := range []string{"failed", "abandoned"} {
		req := f.commitReq(key, leaseSecs+graceSecs+1, idemstore.StatusCompleted)
		req.PayloadHash = hashB
		f.mustRefuseCommit(req)
	}
}

func testCommitTakesOverAbandonedLease(t *testing.T, f *fixture) {
	old := f.mustClaim(f.claimReq("k", 0))
	now := leaseSecs + graceSecs + 1
	req := f.commitReq("k", now, idemstore.StatusCompleted)
	rec := f.mustCommit(req).Record
	if rec.Takeovers != 1 || rec.Attempts != 2 || rec.Fence.Claim != 2 || rec.Fence.Generation != old.Lease.Fence.Generation {
		t.Errorf("commit over an abandoned lease: takeovers %d, attempts %d, fence %+v; want 1, 2, claim 2 of generation %q",
			rec.Takeovers, rec.Attempts, rec.Fence, old.Lease.Fence.Generation)
	}
	// The abandoned holder, should it come back, is fenced off.
	f.fenced("a commit over its abandoned lease", old.Lease, now+1)

	// A failure over an abandoned lease counts it too.
	old = f.mustClaim(f.claimReq("k2", 0))
	rec = f.mustCommit(f.commitReq("k2", now, idemstore.StatusFailed)).Record
	if rec.Status != idemstore.StatusFailed || rec.Takeovers != 1 || rec.Attempts != 2 {
		t.Errorf("failed commit over an abandoned lease: %s, takeovers %d, attempts %d; want FAILED, 1, 2", rec.Status, rec.Takeovers, rec.Attempts)
	}
	f.fenced("a commit over its abandoned lease", old.Lease, now+1)
}

func testCommitExpiredIsFresh(t *testing.T, f *fixture) {
	for st, old := range expiringRecords(f) {
		// Whatever it was, with whatever payload, the key starts afresh;
		// half the statuses meet a success, half a failure.
		cst := idemstore.StatusCompleted
		if st == idemstore.StatusFailed || st == idemstore.StatusDeadLettered {
			cst = idemstore.StatusFailed
		}
		req := f.commitReq(old.Key, 11, cst)
		req.PayloadHash = hashB
		req.MessageID = "m2"
		r := f.mustCommit(req).Record
		if r.Attempts != 1 || r.Fence.Claim != 1 || r.Takeovers != 0 || r.Fence.Generation == old.Fence.Generation ||
			r.Fence.Generation == "" || !r.FirstAttemptAt.Equal(req.Now) {
			t.Errorf("%s expired, commit %s: attempts %d, fence %+v, takeovers %d, first attempt %v; want a fresh generation at %v",
				st, cst, r.Attempts, r.Fence, r.Takeovers, r.FirstAttemptAt, req.Now)
		}
		if r.DeadLetterReason != "" || r.DeadLetterMessageID != "" || r.DeadLetteredMessageID != "" || r.Redrives != 0 ||
			(cst == idemstore.StatusCompleted && r.LastError != "") || len(f.get(old.Key, req.Now).Result) != 0 {
			t.Errorf("%s expired, commit %s: the fresh record carries the old one's fields: %+v", st, cst, r)
		}
		f.leaseLost(string(st)+" expired: old owner's Complete", f.complete(old, 12, nil))
	}
}

func testCommitRetryIsOwn(t *testing.T, f *fixture) {
	for _, st := range []idemstore.Status{idemstore.StatusCompleted, idemstore.StatusFailed} {
		key := "k-" + string(st)
		req := f.commitReq(key, 0, st)
		first := f.mustCommit(req).Record
		// The same request again, as a client whose answer was lost sends it.
		again := f.commit(req)
		if !again.Committed {
			t.Errorf("%s: retried commit refused, want its own success; record %+v", st, again.Record)
		}
		f.unchanged("retried commit", first, req.Now)
		// Later, too.
		late := req
		late.Now = f.at(3)
		if !f.commit(late).Committed {
			t.Errorf("%s: a retry at a later time was refused", st)
		}
		f.unchanged("late retry", first, req.Now)
	}
}

func testCommitAtLimit(t *testing.T, f *fixture) {
	// Absent, with MaxAttempts 1: the first failure is already the last.
	req := f.commitReq("fresh", 0, idemstore.StatusFailed)
	req.MaxAttempts = 1
	if res := f.commit(req); res.Committed || !res.AtLimit {
		t.Errorf("failed commit at the limit of an absent key = committed %v, at limit %v; want at limit", res.Committed, res.AtLimit)
	}
	f.mustBeAbsent("fresh", req.Now)
	// A success is never held back by the limit.
	ok := f.commitReq("fresh", 0, idemstore.StatusCompleted)
	ok.MaxAttempts = 1
	f.mustCommit(ok)

	// FAILED with one attempt: MaxAttempts 2 is at the limit, 3 is not.
	f.mustCommit(f.commitReq("k", 0, idemstore.StatusFailed))
	before := f.get("k", f.at(1))
	req = f.commitReq("k", 1, idemstore.StatusFailed)
	req.MaxAttempts = 2
	res := f.commit(req)
	if res.Committed || !res.AtLimit {
		t.Errorf("failed commit at the limit = committed %v, at limit %v; want at limit", res.Committed, res.AtLimit)
	}
	f.unchanged("a failed commit at the limit", before, req.Now)
	if res.Record.Attempts != 1 || res.Record.Status != idemstore.StatusFailed {
		t.Errorf("at the limit: returned %s with %d attempts, want the FAILED record with 1", res.Record.Status, res.Record.Attempts)
	}
	req = f.commitReq("k", 2, idemstore.StatusFailed)
	req.MaxAttempts = 3
	if r := f.mustCommit(req).Record; r.Attempts != 2 {
		t.Errorf("below the limit: %d attempts, want 2", r.Attempts)
	}
	// The caller claims the key at the limit, in lease mode, to dead-letter it.
	c := f.mustClaim(f.claimReq("k", 3))
	if c.Previous != idemstore.StatusFailed || c.Lease.Attempt != 3 {
		t.Errorf("claim after failed commits: previous %q, attempt %d; want FAILED, 3", c.Previous, c.Lease.Attempt)
	}
}

func testCommitAndLeaseModeMeet(t *testing.T, f *fixture) {
	// A failed commit leaves a record a lease-mode consumer claims.
	f.mustCommit(f.commitReq("k", 0, idemstore.StatusFailed))
	c := f.mustClaim(f.claimReq("k", 1))
	if c.Previous != idemstore.StatusFailed || c.Lease.Attempt != 2 || c.Lease.Fence.Claim != 2 {
		t.Errorf("claim after a failed commit: previous %q, attempt %d, claim %d; want FAILED, 2, 2", c.Previous, c.Lease.Attempt, c.Lease.Fence.Claim)
	}
	// ... and a lease-mode failure leaves one a commit completes.
	f.ok("Fail", f.fail(c.Lease, 2, "boom"))
	r := f.mustCommit(f.commitReq("k", 3, idemstore.StatusCompleted)).Record
	if r.Attempts != 3 || r.Fence.Claim != 3 {
		t.Errorf("commit after a lease-mode failure: attempts %d, claim %d; want 3, 3", r.Attempts, r.Fence.Claim)
	}
	// The lease-mode holder that failed is fenced off by the commit.
	f.fenced("a commit over its failure", c.Lease, 4)
}

func testCommitConcurrent(t *testing.T, f *fixture) {
	const n = 12
	results := make([]idemstore.CommitResult, n)
	errs := make([]error, n)
	reqs := make([]idemstore.CommitRequest, n)
	for i := range n {
		reqs[i] = f.commitReq("k", 0, idemstore.StatusCompleted)
		reqs[i].MessageID = fmt.Sprintf("m%d", i)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], errs[i] = f.committer().Commit(f.ctx, reqs[i])
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent commits failed: %v", err)
	}
	winner := -1
	for i, r := range results {
		if r.Committed {
			if winner >= 0 {
				t.Fatalf("commits %d and %d both applied", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("no concurrent commit applied")
	}
	for i, r := range results {
		if i != winner && (r.Record.LeaseToken != reqs[winner].Token || r.Record.Status != idemstore.StatusCompleted) {
			t.Errorf("a refused commit saw %s with token %q, want COMPLETED with the winner's %q", r.Record.Status, r.Record.LeaseToken, reqs[winner].Token)
		}
	}
}

func testCommitConcurrentWithClaims(t *testing.T, f *fixture) {
	// Claims and commits of one key at once: either one claim wins and
	// every commit is refused, or one commit wins and every claim is
	// refused. Never both.
	const n = 8
	var (
		wg      sync.WaitGroup
		claims  = make([]idemstore.ClaimResult, n)
		commits = make([]idemstore.CommitResult, n)
		errs    = make([]error, 2*n)
		start   = make(chan struct{})
	)
	for i := range n {
		wg.Go(func() {
			req := f.claimReq("k", 0)
			<-start
			claims[i], errs[i] = f.store.Claim(f.ctx, req)
		})
		wg.Go(func() {
			req := f.commitReq("k", 0, idemstore.StatusCompleted)
			<-start
			commits[i], errs[n+i] = f.committer().Commit(f.ctx, req)
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent claims and commits failed: %v", err)
	}
	won := 0
	for i := range n {
		if claims[i].Claimed {
			won++
		}
		if commits[i].Committed {
			won++
		}
	}
	if won != 1 {
		t.Fatalf("%d of %d concurrent claims and commits applied, want exactly 1", won, 2*n)
	}
}

func testCommitLargeResult(t *testing.T, f *fixture) {
	large := bytes.Repeat([]byte("0123456789abcdef"), idemstore.MinResultBytes/16)
	for i, result := range [][]byte{large, []byte(`"small"`), nil} {
		key := fmt.Sprintf("k%d", i)
		req := f.commitReq(key, 0, idemstore.StatusCompleted)
		req.Result = result
		f.mustCommit(req)
		if got := f.get(key, f.at(1)).Result; !bytes.Equal(got, result) {
			t.Errorf("result %d: Get returned %d bytes, want %d", i, len(got), len(result))
		}
		if res := f.mustRefuse(f.claimReq(key, 2)); !bytes.Equal(res.Record.Result, result) {
			t.Errorf("result %d: the duplicate's claim returned %d bytes, want %d", i, len(res.Record.Result), len(result))
		}
		// The same commit again: still its own, still one result.
		if !f.commit(req).Committed {
			t.Errorf("result %d: the retried commit was refused", i)
		}
	}
}

func testCommitUnsupportedWrite(t *testing.T, f *fixture) {
	req := f.commitReq("k", 0, idemstore.StatusCompleted)
	req.Writes = []any{unknownWrite{Table: "effects"}}
	_, err := f.committer().Commit(f.ctx, req)
	if !errors.Is(err, idemstore.ErrUnsupportedWrite) {
		t.Fatalf("Commit with an unknown write = %v, want ErrUnsupportedWrite", err)
	}
	f.mustBeAbsent("k", req.Now)
}

func testCommitInvalidRequests(t *testing.T, f *fixture) {
	good := f.commitReq("k", 0, idemstore.StatusCompleted)
	bad := map[string]func(r *idemstore.CommitRequest){
		"no namespace": func(r *idemstore.CommitRequest) { r.Namespace = "" },
		"no key":       func(r *idemstore.CommitRequest) { r.Key = "" },
		"no token":     func(r *idemstore.CommitRequest) { r.Token = "" },
		"a long token": func(r *idemstore.CommitRequest) {
			r.Token = string(bytes.Repeat([]byte("t"), idemstore.MaxCommitTokenBytes+1))
		},
		"a token with a space":  func(r *idemstore.CommitRequest) { r.Token = "a b" },
		"status IN_PROGRESS":    func(r *idemstore.CommitRequest) { r.Status = idemstore.StatusInProgress },
		"status DEAD_LETTERED":  func(r *idemstore.CommitRequest) { r.Status = idemstore.StatusDeadLettered },
		"a failure with writes": func(r *idemstore.CommitRequest) { r.Status, r.Writes = idemstore.StatusFailed, []any{unknownWrite{}} },
	}
	for name, change := range bad {
		req := good
		change(&req)
		res, err := f.committer().Commit(f.ctx, req)
		if err == nil || errors.Is(err, idemstore.ErrStoreUnavailable) || res.Committed {
			t.Errorf("Commit with %s = %+v, %v; want an invalid-request error", name, res, err)
		}
	}
	f.mustBeAbsent("k", good.Now)
}
