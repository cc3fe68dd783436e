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

type testCase struct {
	name string
	run  func(t *testing.T, f *fixture)
}

// cases is the suite, in the order a reader meets the contract.
var cases = []testCase{
	{"ClaimAbsent", testClaimAbsent},
	{"ClaimRefusedWhileLeaseValid", testClaimRefusedWhileLeaseValid},
	{"CompleteStoresResult", testCompleteStoresResult},
	{"CompleteStoresLargeResult", testCompleteStoresLargeResult},
	{"CompleteResultUntil", testCompleteResultUntil},
	{"ClaimCompletedRefused", testClaimCompletedRefused},
	{"FailRecordsError", testFailRecordsError},
	{"ClaimFailedDifferentHashRefused", testClaimFailedDifferentHashRefused},
	{"ReclaimFailed", testReclaimFailed},
	{"TakeoverAfterGrace", testTakeoverAfterGrace},
	{"TakeoverDifferentHashRefused", testTakeoverDifferentHashRefused},
	{"NoTakeover", testNoTakeover},
	{"StaleOwnerAfterTakeover", testStaleOwnerAfterTakeover},
	{"StaleOwnerAfterReclaim", testStaleOwnerAfterReclaim},
	{"WritesAfterLeaseRanOut", testWritesAfterLeaseRanOut},
	{"WritesWithoutRecord", testWritesWithoutRecord},
	{"RetriedWritesAreSafe", testRetriedWritesAreSafe},
	{"ExpiredRecordIsAbsent", testExpiredRecordIsAbsent},
	{"WritesToExpiredRecord", testWritesToExpiredRecord},
	{"DeadLetterRecordsReason", testDeadLetterRecordsReason},
	{"ExtendMovesLease", testExtendMovesLease},
	{"DeadLetterPendingConfirmsLease", testDeadLetterPendingConfirmsLease},
	{"PendingDeadLetterOutlivesItsLease", testPendingDeadLetterOutlivesItsLease},
	{"FailEndsPendingDeadLetter", testFailEndsPendingDeadLetter},
	{"ExtendMovesExpiry", testExtendMovesExpiry},
	{"LateExtendNeverShortensLease", testLateExtendNeverShortensLease},
	{"Delete", testDelete},
	{"ConcurrentClaims", testConcurrentClaims},
	{"ConcurrentTakeovers", testConcurrentTakeovers},
	{"UnsupportedWrite", testUnsupportedWrite},
	{"InvalidRequests", testInvalidRequests},
	{"NamespacesAreSeparate", testNamespacesAreSeparate},
	{"TokensAreUnique", testTokensAreUnique},
}

// writeOp is one of the fenced writes, run with the suite's defaults.
type writeOp struct {
	name string
	do   func(f *fixture, l idemstore.Lease, now int) error
}

var (
	opComplete = writeOp{"Complete", func(f *fixture, l idemstore.Lease, now int) error {
		return f.complete(l, now, []byte(`"late"`))
	}}
	opFail = writeOp{"Fail", func(f *fixture, l idemstore.Lease, now int) error {
		return f.fail(l, now, "late failure")
	}}
	opDeadLetter = writeOp{"DeadLetter", func(f *fixture, l idemstore.Lease, now int) error {
		return f.deadLetter(l, now, idemstore.ReasonPoison)
	}}
	opExtend = writeOp{"Extend", func(f *fixture, l idemstore.Lease, now int) error {
		return f.extend(l, now, now+leaseSecs)
	}}
	writeOps = []writeOp{opComplete, opFail, opDeadLetter, opExtend}
)

func testClaimAbsent(t *testing.T, f *fixture) {
	req := f.claimReq("k", 0)
	res := f.mustClaim(req)
	if res.Previous != "" {
		t.Errorf("Previous = %q, want \"\"", res.Previous)
	}
	l := res.Lease
	if l.Namespace != f.ns || l.Key != "k" {
		t.Errorf("Lease names %q/%q, want %q/k", l.Namespace, l.Key, f.ns)
	}
	if l.Token == "" {
		t.Error("Lease.Token is empty")
	}
	if l.Fence.Generation == "" {
		t.Error("Fence.Generation is empty")
	}
	if l.Fence.Claim != 1 || l.Attempt != 1 {
		t.Errorf("Fence.Claim = %d, Attempt = %d; want 1, 1", l.Fence.Claim, l.Attempt)
	}
	if !l.Until.Equal(req.LeaseUntil) {
		t.Errorf("Lease.Until = %v, want %v", l.Until, req.LeaseUntil)
	}
	want := idemstore.Record{
		Namespace:      f.ns,
		Key:            "k",
		SchemaVersion:  idemstore.SchemaVersion,
		Status:         idemstore.StatusInProgress,
		LeaseToken:     l.Token,
		LeaseUntil:     req.LeaseUntil,
		Attempts:       1,
		Fence:          l.Fence,
		PayloadHash:    hashA,
		MessageID:      "m1",
		ExpiresAt:      req.ExpiresAt,
		FirstAttemptAt: req.Now,
		UpdatedAt:      req.Now,
	}
	if d := RecordDiff(want, res.Record); d != "" {
		t.Errorf("ClaimResult.Record (-want +got):\n%s", d)
	}
	if d := RecordDiff(want, f.get("k", req.Now)); d != "" {
		t.Errorf("Get after claim (-want +got):\n%s", d)
	}
}

func testClaimRefusedWhileLeaseValid(t *testing.T, f *fixture) {
	c := f.mustClaim(f.claimReq("k", 0))
	// Past LeaseUntil but not past the grace is still refused: another
	// instance's clock may be behind ours by up to Grace.
	for _, now := range []int{0, 1, leaseSecs - 1, leaseSecs, leaseSecs + graceSecs} {
		for _, hash := range []string{hashA, hashB} {
			req := f.claimReq("k", now)
			req.PayloadHash = hash
			req.MessageID = "m2"
			res := f.mustRefuse(req)
			if res.Record.LeaseToken != c.Lease.Token || res.Record.Status != idemstore.StatusInProgress {
				t.Errorf("refusal at +%ds (%s) returned %s with token %q, want IN_PROGRESS with %q",
					now, hash, res.Record.Status, res.Record.LeaseToken, c.Lease.Token)
			}
		}
	}
}

func testCompleteStoresResult(t *testing.T, f *fixture) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 256)
	results := []struct {
		name   string
		result []byte
	}{
		{"nil", nil},
		{"empty", []byte{}},
		{"json", []byte(`{"ok":true,"n":1}`)},
		{"binary", []byte{0x00, 0xff, 0x10, 0x00, 0x80}},
		{"4KiB", big},
	}
	for _, r := range results {
		key := "k-" + r.name
		c := f.mustClaim(f.claimReq(key, 0))
		req := idemstore.CompleteRequest{
			Lease:       c.Lease,
			Now:         f.at(2),
			Result:      r.result,
			ResultUntil: f.at(3600),
			ExpiresAt:   f.at(7200),
		}
		var sent []byte
		if r.result != nil {
			sent = append([]byte{}, r.result...)
		}
		f.ok("Complete("+r.name+")", f.store.Complete(f.ctx, req))
		if r.result != nil {
			// The store must have copied the result, not kept the caller's slice.
			clear(r.result)
		}
		got := f.get(key, f.at(2))
		want := c.Record
		want.Status = idemstore.StatusCompleted
		want.Result = sent
		want.ResultUntil = req.ResultUntil
		want.ExpiresAt = req.ExpiresAt
		want.UpdatedAt = req.Now
		// What a finished record keeps in LeaseUntil is not part of the contract.
		want.LeaseUntil = got.LeaseUntil
		if !bytes.Equal(got.Result, sent) {
			t.Errorf("%s: stored result %.40q, want %.40q", r.name, got.Result, sent)
		}
		read := got.Result
		want.Result, got.Result = nil, nil // compared above, without a 4 KiB diff
		if d := RecordDiff(want, got); d != "" {
			t.Errorf("%s: record after Complete (-want +got):\n%s", r.name, d)
		}
		// Nor may it hand out its own copy: a reader that scribbles on a
		// record it got must not change the stored one.
		clear(read)
		if again := f.get(key, f.at(2)); !bytes.Equal(again.Result, sent) {
			t.Errorf("%s: changing a read result changed the stored one to %.40q", r.name, again.Result)
		}
		// A claim that finds the completed key returns the result to replay.
		res := f.mustRefuse(f.claimReq(key, 3))
		if !bytes.Equal(res.Record.Result, sent) {
			t.Errorf("%s: refused claim returned result %.40q, want %.40q", r.name, res.Record.Result, sent)
		}
	}
}

// A result as large as Wrap stores by default comes back whole, and a new
// generation of the key never sees the result of an earlier one, whatever
// the sizes (a store that keeps large results apart must not mix them up).
func testCompleteStoresLargeResult(t *testing.T, f *fixture) {
	const key = "k-large"
	large := bytes.Repeat([]byte("0123456789abcdef"), idemstore.MinResultBytes/16)
	other := bytes.Repeat([]byte("fedcba9876543210"), idemstore.MinResultBytes/32)
	for i, result := range [][]byte{large, []byte(`"small"`), nil, other} {
		// Each generation starts after the previous one expired.
		base := i * 10000
		c := f.mustClaim(f.claimReq(key, base))
		if c.Previous != "" || c.Lease.Fence.Claim != 1 {
			t.Fatalf("generation %d: claim previous %q, claim %d; want a fresh generation", i, c.Previous, c.Lease.Fence.Claim)
		}
		f.ok(fmt.Sprintf("Complete(generation %d)", i), f.store.Complete(f.ctx, idemstore.CompleteRequest{
			Lease: c.Lease, Now: f.at(base + 1), Result: result, ExpiresAt: f.at(base + 3600),
		}))
		if got := f.get(key, f.at(base+2)).Result; !bytes.Equal(got, result) {
			t.Errorf("generation %d: Get returned %d result bytes (%.20q), want %d", i, len(got), got, len(result))
		}
		res := f.mustRefuse(f.claimReq(key, base+3))
		if !bytes.Equal(res.Record.Result, result) {
			t.Errorf("generation %d: refused claim returned %d result bytes (%.20q), want %d", i, len(res.Record.Result), res.Record.Result, len(result))
		}
	}
}

func testCompleteResultUntil(t *testing.T, f *fixture) {
	for _, until := range []time.Time{{}, f.at(60), f.at(retentionSecs)} {
		key := fmt.Sprintf("k-%d", until.Unix())
		c := f.mustClaim(f.claimReq(key, 0))
		f.ok("Complete", f.store.Complete(f.ctx, idemstore.CompleteRequest{
			Lease:       c.Lease,
			Now:         f.at(1),
			Result:      []byte(`1`),
			ResultUntil: until,
			ExpiresAt:   f.at(retentionSecs),
		}))
		got := f.get(key, f.at(1))
		if !got.ResultUntil.Equal(until) || got.ResultUntil.IsZero() != until.IsZero() {
			t.Errorf("ResultUntil = %v, want %v", got.ResultUntil, until)
		}
	}
}

func testClaimCompletedRefused(t *testing.T, f *fixture) {
	c := f.mustClaim(f.claimReq("k", 0))
	f.ok("Complete", f.complete(c.Lease, 1, []byte(`"done"`)))
	// Long after the lease ran out a completed key is still done, with the
	// same or a different payload.
	for _, now := range []int{2, leaseSecs + graceSecs + 100} {
		for _, hash := range []string{hashA, hashB} {
			req := f.claimReq("k", now)
			req.PayloadHash = hash
			req.MessageID = "m2"
			res := f.mustRefuse(req)
			if res.Record.Status != idemstore.StatusCompleted || string(res.Record.Result) != `"done"` {
				t.Errorf("refusal at +%ds (%s) returned %s with result %q, want COMPLETED with \"done\"",
					now, hash, res.Record.Status, res.Record.Result)
			}
			if res.Record.PayloadHash != hashA {
				t.Errorf("refusal returned PayloadHash %q, want the stored %q", res.Record.PayloadHash, hashA)
			}
		}
	}
}

func testFailRecordsError(t *testing.T, f *fixture) {
	c := f.mustClaim(f.claimReq("k", 0))
	f.ok("Fail", f.fail(c.Lease, 3, "handler: boom"))
	got := f.get("k", f.at(3))
	want := c.Record
	want.Status = idemstore.StatusFailed
	want.LastError = "handler: boom"
	want.ExpiresAt = f.at(3 + retentionSecs)
	want.UpdatedAt = f.at(3)
	want.LeaseUntil = got.LeaseUntil
	if d := RecordDiff(want, got); d != "" {
		t.Errorf("record after Fail (-want +got):\n%s", d)
	}
}

func testClaimFailedDifferentHashRefused(t *testing.T, f *fixture) {
	c := f.mustClaim(f.claimReq("k", 0))
	f.ok("Fail", f.fail(c.Lease, 1, "boom"))
	for _, now := range []int{2, leaseSecs + graceSecs + 100} {
		req := f.claimReq("k", now)
		req.PayloadHash = hashB
		res := f.mustRefuse(req)
		if res.Record.Status != idemstore.StatusFailed || res.Record.PayloadHash != hashA {
			t.Errorf("refusal returned %s with hash %q, want FAILED with %q", res.Record.Status, res.Record.PayloadHash, hashA)
		}
	}
}

func testReclaimFailed(t *testing.T, f *fixture) {
	c1 := f.mustClaim(f.claimReq("k", 0))
	f.ok("Fail", f.fail(c1.Lease, 1, "first"))

	req := f.claimReq("k", 2)
	req.MessageID = "m2"
	c2 := f.mustClaim(req)
	if c2.Previous != idemstore.StatusFailed {
		t.Errorf("Previous = %q, want FAILED", c2.Previous)
	}
	if c2.Lease.Attempt != 2 || c2.Lease.Fence.Claim != 2 {
		t.Errorf("Attempt = %d, Fence.Claim = %d; want 2, 2", c2.Lease.Attempt, c2.Lease.Fence.Claim)
	}
	if c2.Lease.Fence.Generation != c1.Lease.Fence.Generation {
		t.Errorf("Generation changed on a re-claim: %q -> %q", c1.Lease.Fence.Generation, c2.Lease.Fence.Generation)
	}
	if c2.Lease.Token == "" || c2.Lease.Token == c1.Lease.Token {
		t.Errorf("re-claim token %q, want a new one (old %q)", c2.Lease.Token, c1.Lease.Token)
	}
	got := f.get("k", f.at(2))
	want := idemstore.Record{
		Namespace:      f.ns,
		Key:            "k",
		SchemaVersion:  idemstore.SchemaVersion,
		Status:         idemstore.StatusInProgress,
		LeaseToken:     c2.Lease.Token,
		LeaseUntil:     req.LeaseUntil,
		Attempts:       2,
		Takeovers:      0, // a handler failure is not an abandoned lease
		Fence:          idemstore.Fence{Generation: c1.Lease.Fence.Generation, Claim: 2},
		PayloadHash:    hashA,
		MessageID:      "m2",
		ExpiresAt:      req.ExpiresAt,
		FirstAttemptAt: f.at(0),
		UpdatedAt:      req.Now,
		// Whether a new claim clears the last error is not part of the contract.
		LastError: got.LastError,
	}
	if d := RecordDiff(want, got); d != "" {
		t.Errorf("record after re-claim (-want +got):\n%s", d)
	}
	if d := RecordDiff(got, c2.Record); d != "" {
		t.Errorf("ClaimResult.Record differs from the stored record (-stored +returned):\n%s", d)
	}

	// NoTakeover is about abandoned leases only; a FAILED key is claimed.
	f.ok("Fail", f.fail(c2.Lease, 3, "second"))
	req = f.claimReq("k", 4)
	req.NoTakeover = true
	c3 := f.mustClaim(req)
	if c3.Previous != idemstore.StatusFailed || c3.Lease.Attempt != 3 || c3.Lease.Fence.Claim != 3 {
		t.Errorf("third claim: Previous %q, Attempt %d, Fence.Claim %d; want FAILED, 3, 3",
			c3.Previous, c3.Lease.Attempt, c3.Lease.Fence.Claim)
	}
	if r := f.get("k", f.at(4)); !r.FirstAttemptAt.Equal(f.at(0)) || r.Takeovers != 0 {
		t.Errorf("third claim: FirstAttemptAt %v, Takeovers %d; want %v, 0", r.FirstAttemptAt, r.Takeovers, f.at(0))
	}
}

func testTakeoverAfterGrace(t *testing.T, f *fixture) {
	c1 := f.mustClaim(f.claimReq("k", 0))
	// LeaseUntil is +30s and Grace 5s: +35s is not yet strictly past.
	f.mustRefuse(f.claimReq("k", leaseSecs+1))
	f.mustRefuse(f.claimReq("k", leaseSecs+graceSecs))

	req := f.claimReq("k", leaseSecs+graceSecs+1)
	req.MessageID = "m2"
	c2 := f.mustClaim(req)
	if c2.Previous != idemstore.StatusInProgress {
		t.Errorf("Previous = %q, want IN_PROGRESS", c2.Previous)
	}
	if c2.Lease.Attempt != 2 || c2.Lease.Fence.Claim != 2 || c2.Lease.Fence.Generation != c1.Lease.Fence.Generation {
		t.Errorf("takeover lease %+v, want attempt 2, claim 2 in generation %q", c2.Lease, c1.Lease.Fence.Generation)
	}
	if c2.Lease.Token == c1.Lease.Token {
		t.Error("takeover kept the old token")
	}
	got := f.get("k", req.Now)
	want := idemstore.Record{
		Namespace:      f.ns,
		Key:            "k",
		SchemaVersion:  idemstore.SchemaVersion,
		Status:         idemstore.StatusInProgress,
		LeaseToken:     c2.Lease.Token,
		LeaseUntil:     req.LeaseUntil,
		Attempts:       2,
		Takeovers:      1,
		Fence:          c2.Lease.Fence,
		PayloadHash:    hashA,
		MessageID:      "m2",
		ExpiresAt:      req.ExpiresAt,
		FirstAttemptAt: f.at(0),
		UpdatedAt:      req.Now,
	}
	if d := RecordDiff(want, got); d != "" {
		t.Errorf("record after takeover (-want +got):\n%s", d)
	}

	// A second abandonment is counted again; a handler failure is not.
	req = f.claimReq("k", 2*(leaseSecs+graceSecs+1))
	c3 := f.mustClaim(req)
	if c3.Previous != idemstore.StatusInProgress || c3.Record.Takeovers != 2 || c3.Lease.Attempt != 3 {
		t.Errorf("second takeover: Previous %q, Takeovers %d, Attempt %d; want IN_PROGRESS, 2, 3",
			c3.Previous, c3.Record.Takeovers, c3.Lease.Attempt)
	}
	f.ok("Fail", f.fail(c3.Lease, 73, "boom"))
	c4 := f.mustClaim(f.claimReq("k", 74))
	if c4.Previous != idemstore.StatusFailed || c4.Record.Takeovers != 2 || c4.Lease.Attempt != 4 {
		t.Errorf("re-claim after takeovers: Previous %q, Takeovers %d, Attempt %d; want FAILED, 2, 4",
			c4.Previous, c4.Record.Takeovers, c4.Lease.Attempt)
	}
}

func testTakeoverDifferentHashRefused(t *testing.T, f *fixture) {
	f.mustClaim(f.claimReq("k", 0))
	req := f.claimReq("k", leaseSecs+graceSecs+100)
	req.PayloadHash = hashB
	res := f.mustRefuse(req)
	if res.Record.Status != idemstore.StatusInProgress || res.Record.PayloadHash != hashA {
		t.Errorf("refusal returned %s with hash %q, want IN_PROGRESS with %q", res.Record.Status, res.Record.PayloadHash, hashA)
	}
}

func testNoTakeover(t *testing.T, f *fixture) {
	req := f.claimReq("k", 0)
	req.NoTakeover = true
	c1 := f.mustClaim(req) // an absent key is claimed whatever the mode

	req = f.claimReq("k", leaseSecs+graceSecs+100)
	req.NoTakeover = true
	res := f.mustRefuse(req)
	if res.Record.Status != idemstore.StatusInProgress || res.Record.LeaseToken != c1.Lease.Token {
		t.Fatalf("NoTakeover refusal returned %s with token %q, want the abandoned IN_PROGRESS record",
			res.Record.Status, res.Record.LeaseToken)
	}

	// At-most-once: the claimer marks the abandoned record "outcome unknown"
	// under the old fence, which it learned from the refusal alone.
	now := leaseSecs + graceSecs + 100
	f.ok("DeadLetter(refusing record.Lease())", f.deadLetter(res.Record.Lease(), now, idemstore.ReasonOutcomeUnknown))
	got := f.get("k", f.at(now))
	if got.Status != idemstore.StatusDeadLettered || got.DeadLetterReason != idemstore.ReasonOutcomeUnknown {
		t.Errorf("after dead-lettering: %s (%q), want DEAD_LETTERED (outcome_unknown)", got.Status, got.DeadLetterReason)
	}
	// The original owner's late completion is refused.
	f.leaseLost("late Complete of the original owner", f.complete(c1.Lease, now+1, []byte(`1`)))
	f.unchanged("late Complete", got, f.at(now+1))
}

// testStaleOwner checks that after takeOver (which returns the new owner's
// lease) the old owner's writes are refused and change nothing.
func testStaleOwner(t *testing.T, f *fixture, takeOver func(key string, old idemstore.Lease) (idemstore.Lease, int)) {
	for _, op := range writeOps {
		key := "k-" + op.name
		old := f.mustClaim(f.claimReq(key, 0)).Lease
		nw, now := takeOver(key, old)
		before := f.get(key, f.at(now))
		f.leaseLost("stale "+op.name, op.do(f, old, now))
		f.unchanged("stale "+op.name, before, f.at(now))
		// The new owner is unaffected and can still finish.
		f.ok("new owner's Complete after stale "+op.name, f.complete(nw, now+1, []byte(`"new"`)))
		if r := f.get(key, f.at(now+1)); r.Status != idemstore.StatusCompleted || string(r.Result) != `"new"` {
			t.Errorf("after stale %s: new owner's record is %s with %q", op.name, r.Status, r.Result)
		}
	}
}

func testStaleOwnerAfterTakeover(t *testing.T, f *fixture) {
	testStaleOwner(t, f, func(key string, _ idemstore.Lease) (idemstore.Lease, int) {
		now := leaseSecs + graceSecs + 1
		return f.mustClaim(f.claimReq(key, now)).Lease, now + 1
	})
}

func testStaleOwnerAfterReclaim(t *testing.T, f *fixture) {
	// The old owner failed, someone re-claimed, and the old owner's retried
	// write arrives late: its token no longer matches.
	testStaleOwner(t, f, func(key string, old idemstore.Lease) (idemstore.Lease, int) {
		f.ok("Fail", f.fail(old, 1, "boom"))
		return f.mustClaim(f.claimReq(key, 2)).Lease, 3
	})
}

func testWritesAfterLeaseRanOut(t *testing.T, f *fixture) {
	// Nobody took the lease over, so the token still fences the record and
	// the slow owner may still record its outcome.
	late := leaseSecs + graceSecs + 100
	for _, op := range []writeOp{opComplete, opFail, opDeadLetter} {
		key := "k-" + op.name
		c := f.mustClaim(f.claimReq(key, 0))
		f.ok("late "+op.name, op.do(f, c.Lease, late))
	}
	if r := f.get("k-Complete", f.at(late)); r.Status != idemstore.StatusCompleted {
		t.Errorf("late Complete left %s", r.Status)
	}
	if r := f.get("k-Fail", f.at(late)); r.Status != idemstore.StatusFailed {
		t.Errorf("late Fail left %s", r.Status)
	}
	if r := f.get("k-DeadLetter", f.at(late)); r.Status != idemstore.StatusDeadLettered {
		t.Errorf("late DeadLetter left %s", r.Status)
	}
}

func testWritesWithoutRecord(t *testing.T, f *fixture) {
	// A write to a key nobody claimed must not create a record.
	ghost := idemstore.Lease{Namespace: f.ns, Key: "ghost", Token: "no-such-token", Until: f.at(leaseSecs),
		Fence: idemstore.Fence{Generation: "g", Claim: 1}, Attempt: 1}
	for _, op := range writeOps {
		f.leaseLost(op.name+" of an absent key", op.do(f, ghost, 1))
		f.mustBeAbsent("ghost", f.at(1))
	}
	// A token that never matched the record is refused too.
	c := f.mustClaim(f.claimReq("k", 0))
	forged := c.Lease
	forged.Token = "forged-" + c.Lease.Token
	for _, op := range writeOps {
		f.leaseLost(op.name+" with a forged token", op.do(f, forged, 1))
		f.unchanged(op.name+" with a forged token", c.Record, f.at(1))
	}
}

func testRetriedWritesAreSafe(t *testing.T, f *fixture) {
	for _, finish := range []writeOp{opComplete, opFail, opDeadLetter} {
		key := "k-" + finish.name
		c := f.mustClaim(f.claimReq(key, 0))
		f.ok(finish.name, finish.do(f, c.Lease, 1))
		done := f.get(key, f.at(1))
		// The SDK retries a write whose response was lost: the same request
		// again finds its own token on a finished record and succeeds.
		f.ok("repeated "+finish.name, finish.do(f, c.Lease, 1))
		f.unchanged("repeated "+finish.name, done, f.at(1))
		// Any other write on the finished record is refused: never record
		// failure after success, never reopen a finished key.
		for _, op := range writeOps {
			if op.name == finish.name {
				continue
			}
			f.leaseLost(op.name+" after "+finish.name, op.do(f, c.Lease, 2))
			f.unchanged(op.name+" after "+finish.name, done, f.at(2))
		}
	}
}

// expiringRecords builds one record per status whose ExpiresAt is +10s.
func expiringRecords(f *fixture) map[idemstore.Status]idemstore.Lease {
	f.t.Helper()
	exp := f.at(10)
	leases := map[idemstore.Status]idemstore.Lease{}
	for _, st := range []idemstore.Status{idemstore.StatusInProgress, idemstore.StatusCompleted, idemstore.StatusFailed, idemstore.StatusDeadLettered} {
		key := "k-" + string(st)
		req := f.claimReq(key, 0)
		req.ExpiresAt = exp // before LeaseUntil: the lease is valid, the record is not
		l := f.mustClaim(req).Lease
		leases[st] = l
		var err error
		switch st {
		case idemstore.StatusCompleted:
			err = f.store.Complete(f.ctx, idemstore.CompleteRequest{Lease: l, Now: f.at(1), Result: []byte(`"old"`), ResultUntil: exp, ExpiresAt: exp})
		case idemstore.StatusFailed:
			err = f.store.Fail(f.ctx, idemstore.FailRequest{Lease: l, Now: f.at(1), Error: "old", ExpiresAt: exp})
		case idemstore.StatusDeadLettered:
			err = f.store.DeadLetter(f.ctx, idemstore.DeadLetterRequest{Lease: l, Now: f.at(1), Reason: idemstore.ReasonPoison,
				Error: "old", MessageID: "m1", DeadLetterMessageID: "dlq-1", ExpiresAt: exp})
		}
		f.ok("finish "+string(st), err)
	}
	return leases
}

func testExpiredRecordIsAbsent(t *testing.T, f *fixture) {
	for st, old := range expiringRecords(f) {
		key := old.Key
		// ExpiresAt itself is not yet past.
		if r := f.get(key, f.at(10)); r.Status != st {
			t.Errorf("%s at ExpiresAt: Get returned %s", st, r.Status)
		}
		f.mustBeAbsent(key, f.at(11))

		// Whatever it was, with whatever payload, the key starts afresh.
		req := f.claimReq(key, 11)
		req.PayloadHash = hashB
		req.MessageID = "m2"
		c := f.mustClaim(req)
		if c.Previous != "" || c.Lease.Attempt != 1 || c.Lease.Fence.Claim != 1 {
			t.Errorf("%s expired: claim Previous %q, Attempt %d, Fence.Claim %d; want \"\", 1, 1",
				st, c.Previous, c.Lease.Attempt, c.Lease.Fence.Claim)
		}
		if c.Lease.Fence.Generation == "" || c.Lease.Fence.Generation == old.Fence.Generation {
			t.Errorf("%s expired: generation %q, want a new one (old %q)", st, c.Lease.Fence.Generation, old.Fence.Generation)
		}
		want := idemstore.Record{
			Namespace:      f.ns,
			Key:            key,
			SchemaVersion:  idemstore.SchemaVersion,
			Status:         idemstore.StatusInProgress,
			LeaseToken:     c.Lease.Token,
			LeaseUntil:     req.LeaseUntil,
			Attempts:       1,
			Fence:          c.Lease.Fence,
			PayloadHash:    hashB,
			MessageID:      "m2",
			ExpiresAt:      req.ExpiresAt,
			FirstAttemptAt: req.Now,
			UpdatedAt:      req.Now,
		}
		if d := RecordDiff(want, f.get(key, req.Now)); d != "" {
			t.Errorf("%s expired: fresh record (-want +got):\n%s", st, d)
		}
		// The previous generation's owner is fenced off.
		f.leaseLost(string(st)+" expired: old owner's Complete", f.complete(old, 12, nil))
	}
}

func testWritesToExpiredRecord(t *testing.T, f *fixture) {
	// The lease is valid until +30s but the record expires at +10s: from
	// +11s it is absent, so its owner can no longer write it.
	for _, op := range writeOps {
		key := "k-" + op.name
		req := f.claimReq(key, 0)
		req.ExpiresAt = f.at(10)
		c := f.mustClaim(req)
		f.leaseLost(op.name+" of an expired record", op.do(f, c.Lease, 11))
		f.mustBeAbsent(key, f.at(11))
		f.unchanged(op.name+" of an expired record", c.Record, f.at(10))
	}
}

func testDeadLetterRecordsReason(t *testing.T, f *fixture) {
	c := f.mustClaim(f.claimReq("k", 0))
	req := idemstore.DeadLetterRequest{
		Lease:               c.Lease,
		Now:                 f.at(4),
		Reason:              idemstore.ReasonMaxAttempts,
		Error:               "handler: still broken",
		MessageID:           "m1",
		DeadLetterMessageID: "dlq-copy-7",
		ExpiresAt:           f.at(4 + retentionSecs),
	}
	f.ok("DeadLetter", f.store.DeadLetter(f.ctx, req))
	got := f.get("k", f.at(4))
	want := c.Record
	want.Status = idemstore.StatusDeadLettered
	want.DeadLetterReason = idemstore.ReasonMaxAttempts
	want.DeadLetteredMessageID = "m1"
	want.DeadLetterMessageID = "dlq-copy-7"
	want.LastError = "handler: still broken"
	want.ExpiresAt = req.ExpiresAt
	want.UpdatedAt = req.Now
	want.LeaseUntil = got.LeaseUntil
	if d := RecordDiff(want, got); d != "" {
		t.Errorf("record after DeadLetter (-want +got):\n%s", d)
	}
	// A dead-lettered key is never claimed again while it is kept: not by a
	// redelivery, not by another copy, not by another payload.
	for _, now := range []int{5, leaseSecs + graceSecs + 100} {
		for _, m := range []struct{ hash, msg string }{{hashA, "m1"}, {hashA, "m2"}, {hashB, "m3"}} {
			req := f.claimReq("k", now)
			req.PayloadHash, req.MessageID = m.hash, m.msg
			if res := f.mustRefuse(req); res.Record.Status != idemstore.StatusDeadLettered {
				t.Errorf("refusal returned %s, want DEAD_LETTERED", res.Record.Status)
			}
		}
	}
}

func testExtendMovesLease(t *testing.T, f *fixture) {
	c := f.mustClaim(f.claimReq("k", 0))
	f.ok("Extend", f.extend(c.Lease, 10, 100))
	got := f.get("k", f.at(10))
	if !got.LeaseUntil.Equal(f.at(100)) {
		t.Errorf("LeaseUntil after Extend = %v, want %v", got.LeaseUntil, f.at(100))
	}
	if got.Status != idemstore.StatusInProgress || got.LeaseToken != c.Lease.Token ||
		got.Attempts != 1 || got.Fence != c.Lease.Fence {
		t.Errorf("Extend changed more than the lease: %+v", got)
	}
	// The old end no longer allows a takeover; the new one does, after grace.
	f.mustRefuse(f.claimReq("k", leaseSecs+graceSecs+1))
	f.mustRefuse(f.claimReq("k", 100+graceSecs))
	if c2 := f.mustClaim(f.claimReq("k", 100+graceSecs+1)); c2.Previous != idemstore.StatusInProgress {
		t.Errorf("takeover after the extended lease: Previous %q", c2.Previous)
	}
}

func testDelete(t *testing.T, f *fixture) {
	del := func(key string) error {
		return f.store.Delete(f.ctx, idemstore.DeleteRequest{Namespace: f.ns, Key: key})
	}
	c := f.mustClaim(f.claimReq("k", 0))
	f.ok("Complete", f.complete(c.Lease, 1, []byte(`1`)))
	f.ok("Delete", del("k"))
	f.mustBeAbsent("k", f.at(2))
	f.ok("Delete of a deleted key", del("k"))
	f.ok("Delete of a key never written", del("never"))

	// The old lease does not bring the record back.
	for _, op := range writeOps {
		f.leaseLost(op.name+" after Delete", op.do(f, c.Lease, 2))
		f.mustBeAbsent("k", f.at(2))
	}
	// Forgetting a key lets it run again, as a fresh generation.
	c2 := f.mustClaim(f.claimReq("k", 3))
	if c2.Previous != "" || c2.Lease.Attempt != 1 || c2.Lease.Fence.Claim != 1 ||
		c2.Lease.Fence.Generation == c.Lease.Fence.Generation {
		t.Errorf("claim after Delete: Previous %q, lease %+v; want a fresh generation", c2.Previous, c2.Lease)
	}
}

func testConcurrentClaims(t *testing.T, f *fixture) {
	const n = 16
	results := make([]idemstore.ClaimResult, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := f.claimReq("k", 0)
			req.MessageID = fmt.Sprintf("m%d", i)
			<-start
			results[i], errs[i] = f.store.Claim(f.ctx, req)
		}()
	}
	close(start)
	wg.Wait()
	checkOneWinner(t, results, errs, 1)
}

func testConcurrentTakeovers(t *testing.T, f *fixture) {
	f.mustClaim(f.claimReq("k", 0))
	const n = 16
	results := make([]idemstore.ClaimResult, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := f.claimReq("k", leaseSecs+graceSecs+1)
			req.MessageID = fmt.Sprintf("m%d", i)
			<-start
			results[i], errs[i] = f.store.Claim(f.ctx, req)
		}()
	}
	close(start)
	wg.Wait()
	w := checkOneWinner(t, results, errs, 2)
	if r := f.get("k", f.at(leaseSecs+graceSecs+1)); r.Takeovers != 1 || r.LeaseToken != w.Lease.Token {
		t.Errorf("after concurrent takeovers: Takeovers %d, token %q; want 1, the winner's %q", r.Takeovers, r.LeaseToken, w.Lease.Token)
	}
}

// checkOneWinner checks that exactly one of concurrent claims won, with the
// given attempt, and that every loser saw the winner's record.
func checkOneWinner(t *testing.T, results []idemstore.ClaimResult, errs []error, attempt int) idemstore.ClaimResult {
	t.Helper()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent claims failed: %v", err)
	}
	var winners []idemstore.ClaimResult
	for _, r := range results {
		if r.Claimed {
			winners = append(winners, r)
		}
	}
	if len(winners) != 1 {
		t.Fatalf("%d of %d concurrent claims won, want exactly 1", len(winners), len(results))
	}
	w := winners[0]
	if w.Lease.Attempt != attempt {
		t.Errorf("winner's Attempt = %d, want %d", w.Lease.Attempt, attempt)
	}
	for _, r := range results {
		if !r.Claimed && r.Record.LeaseToken != w.Lease.Token {
			t.Errorf("a refused claim saw token %q, want the winner's %q", r.Record.LeaseToken, w.Lease.Token)
		}
	}
	return w
}

// unknownWrite is a write type no store can know.
type unknownWrite struct{ Table string }

func testUnsupportedWrite(t *testing.T, f *fixture) {
	c := f.mustClaim(f.claimReq("k", 0))
	err := f.store.Complete(f.ctx, idemstore.CompleteRequest{
		Lease:     c.Lease,
		Now:       f.at(1),
		Result:    []byte(`1`),
		ExpiresAt: f.at(retentionSecs),
		Writes:    []any{unknownWrite{Table: "effects"}},
	})
	if !errors.Is(err, idemstore.ErrUnsupportedWrite) {
		t.Fatalf("Complete with an unknown write = %v, want ErrUnsupportedWrite", err)
	}
	f.unchanged("Complete with an unknown write", c.Record, f.at(1))
	// Nothing was recorded, so the lease still completes.
	f.ok("Complete without writes", f.complete(c.Lease, 2, []byte(`1`)))
}

func testInvalidRequests(t *testing.T, f *fixture) {
	names := []struct{ ns, key string }{{"", "k"}, {f.ns, ""}, {"", ""}}
	for _, n := range names {
		lease := idemstore.Lease{Namespace: n.ns, Key: n.key, Token: "t", Until: f.at(leaseSecs),
			Fence: idemstore.Fence{Generation: "g", Claim: 1}, Attempt: 1}
		claim := f.claimReq(n.key, 0)
		claim.Namespace = n.ns
		_, claimErr := f.store.Claim(f.ctx, claim)
		_, getErr := f.store.Get(f.ctx, idemstore.GetRequest{Namespace: n.ns, Key: n.key, Now: f.at(0)})
		calls := map[string]error{
			"Claim":      claimErr,
			"Get":        getErr,
			"Delete":     f.store.Delete(f.ctx, idemstore.DeleteRequest{Namespace: n.ns, Key: n.key}),
			"Complete":   opComplete.do(f, lease, 1),
			"Fail":       opFail.do(f, lease, 1),
			"DeadLetter": opDeadLetter.do(f, lease, 1),
			"Extend":     opExtend.do(f, lease, 1),
		}
		for op, err := range calls {
			if err == nil || errors.Is(err, idemstore.ErrStoreUnavailable) {
				t.Errorf("%s with namespace %q, key %q = %v; want an invalid-request error", op, n.ns, n.key, err)
			}
		}
	}
}

func testNamespacesAreSeparate(t *testing.T, f *fixture) {
	other := *f
	other.ns = f.ns + "-other"
	a := f.mustClaim(f.claimReq("k", 0))
	b := other.mustClaim(other.claimReq("k", 0))
	if a.Lease.Token == b.Lease.Token {
		t.Error("two namespaces share a lease token")
	}
	f.ok("Complete in the first namespace", f.complete(a.Lease, 1, []byte(`1`)))
	if r := other.get("k", f.at(1)); r.Status != idemstore.StatusInProgress || r.LeaseToken != b.Lease.Token {
		t.Errorf("the other namespace's record became %s with token %q", r.Status, r.LeaseToken)
	}
	// A lease names its namespace: it cannot write the same key elsewhere.
	cross := a.Lease
	cross.Namespace = other.ns
	other.leaseLost("Complete with a lease of another namespace", f.complete(cross, 2, nil))
	f.ok("Delete in the other namespace", f.store.Delete(f.ctx, idemstore.DeleteRequest{Namespace: other.ns, Key: "k"}))
	if r := f.get("k", f.at(2)); r.Status != idemstore.StatusCompleted {
		t.Errorf("Delete in the other namespace removed or changed this one: %s", r.Status)
	}
}

func testTokensAreUnique(t *testing.T, f *fixture) {
	seen := map[string]bool{}
	for i := range 20 {
		c := f.mustClaim(f.claimReq(fmt.Sprintf("k%d", i), 0))
		if seen[c.Lease.Token] {
			t.Fatalf("token %q handed out twice", c.Lease.Token)
		}
		seen[c.Lease.Token] = true
	}
	// Successive claims of one key get new tokens too.
	c := f.mustClaim(f.claimReq("one", 0))
	for i := 1; i <= 5; i++ {
		f.ok("Fail", f.fail(c.Lease, i, "boom"))
		c = f.mustClaim(f.claimReq("one", i))
		if seen[c.Lease.Token] {
			t.Fatalf("re-claim %d reused token %q", i, c.Lease.Token)
		}
		seen[c.Lease.Token] = true
	}
}

// pendingDeadLetter is a pending dead-letter mark at second now.
func (f *fixture) pendingDeadLetter(l idemstore.Lease, now int) error {
	return f.store.DeadLetter(f.ctx, idemstore.DeadLetterRequest{
		Lease:     l,
		Now:       f.at(now),
		Reason:    idemstore.ReasonPoison,
		Error:     "poison: bad input",
		MessageID: "m1",
		ExpiresAt: f.at(now + retentionSecs),
		Pending:   true,
	})
}

// A pending dead-letter mark confirms the lease and keeps the record
// IN_PROGRESS; the final mark follows; a stale owner's pending mark is
// refused and changes nothing.
func testDeadLetterPendingConfirmsLease(t *testing.T, f *fixture) {
	c := f.mustClaim(f.claimReq("k", 0))
	f.ok("DeadLetter(Pending)", f.pendingDeadLetter(c.Lease, 4))
	got := f.get("k", f.at(4))
	want := c.Record
	want.DeadLetterReason = idemstore.ReasonPoison
	want.LastError = "poison: bad input"
	want.DeadLetteredMessageID = "m1"
	want.UpdatedAt = f.at(4)
	if d := RecordDiff(want, got); d != "" {
		t.Errorf("record after a pending DeadLetter (-want +got):\n%s", d)
	}
	// Retried, it still applies: the lease is still ours.
	f.ok("DeadLetter(Pending) retried", f.pendingDeadLetter(c.Lease, 5))
	f.ok("DeadLetter after pending", f.deadLetter(c.Lease, 6, idemstore.ReasonPoison))
	if r := f.get("k", f.at(6)); r.Status != idemstore.StatusDeadLettered || r.DeadLetterMessageID != "dlq-1" {
		t.Errorf("after the final mark: %s, copy %q", r.Status, r.DeadLetterMessageID)
	}
	// Once the record is no longer IN_PROGRESS, even our own token cannot
	// mark it pending again.
	f.leaseLost("DeadLetter(Pending) on a DEAD_LETTERED record", f.pendingDeadLetter(c.Lease, 7))

	// A stale owner: its lease was taken over and the new holder completed.
	old := f.mustClaim(f.claimReq("s", 0))
	now := leaseSecs + graceSecs + 1
	nc := f.mustClaim(f.claimReq("s", now))
	f.ok("Complete by the new holder", f.complete(nc.Lease, now+1, []byte(`"done"`)))
	before := f.get("s", f.at(now+2))
	f.leaseLost("stale DeadLetter(Pending)", f.pendingDeadLetter(old.Lease, now+2))
	f.unchanged("stale DeadLetter(Pending)", before, f.at(now+2))
	// And one still IN_PROGRESS under the new holder.
	old2 := f.mustClaim(f.claimReq("u", 0))
	f.mustClaim(f.claimReq("u", now))
	before = f.get("u", f.at(now+2))
	f.leaseLost("stale DeadLetter(Pending) under a new lease", f.pendingDeadLetter(old2.Lease, now+2))
	f.unchanged("stale DeadLetter(Pending) under a new lease", before, f.at(now+2))
}

// A pending dead-letter mark whose final mark could not be written (the
// copy is in the DLQ) is never lost: the holder may still write the final
// mark once its lease ran out, as long as nobody took the key over; a
// takeover's claim returns the pending mark (reason, error, source message)
// so the new holder finishes the dead-lettering instead of running the
// handler again; and the old holder's late final mark is then refused.
func testPendingDeadLetterOutlivesItsLease(t *testing.T, f *fixture) {
	expired := leaseSecs + graceSecs + 1
	// The holder writes its final mark late, after its lease ran out.
	c := f.mustClaim(f.claimReq("late", 0))
	f.ok("DeadLetter(Pending)", f.pendingDeadLetter(c.Lease, 1))
	f.ok("late final DeadLetter", f.deadLetter(c.Lease, expired, idemstore.ReasonPoison))
	if r := f.get("late", f.at(expired)); r.Status != idemstore.StatusDeadLettered || r.DeadLetterMessageID != "dlq-1" || r.DeadLetteredMessageID != "m1" {
		t.Errorf("after a late final mark: %s, copy %q, source %q; want DEAD_LETTERED, dlq-1, m1", r.Status, r.DeadLetterMessageID, r.DeadLetteredMessageID)
	}

	// Another holder takes the key over first.
	old := f.mustClaim(f.claimReq("k", 0))
	f.ok("DeadLetter(Pending)", f.pendingDeadLetter(old.Lease, 1))
	req := f.claimReq("k", expired)
	req.MessageID = "m2"
	nc := f.mustClaim(req)
	if nc.Previous != idemstore.StatusInProgress {
		t.Errorf("takeover Previous %q, want IN_PROGRESS", nc.Previous)
	}
	if r := nc.Record; r.Status != idemstore.StatusInProgress || r.DeadLetterReason != idemstore.ReasonPoison ||
		r.DeadLetteredMessageID != "m1" || r.LastError != "poison: bad input" || r.DeadLetterMessageID != "" {
		t.Errorf("takeover's record: %s, reason %q, source %q, error %q, copy %q; want the pending mark kept",
			r.Status, r.DeadLetterReason, r.DeadLetteredMessageID, r.LastError, r.DeadLetterMessageID)
	}
	if r := f.get("k", f.at(expired)); r.DeadLetterReason != idemstore.ReasonPoison || r.DeadLetteredMessageID != "m1" {
		t.Errorf("record after the takeover: reason %q, source %q; want the pending mark kept", r.DeadLetterReason, r.DeadLetteredMessageID)
	}
	before := f.get("k", f.at(expired+1))
	f.leaseLost("the old holder's late final DeadLetter", f.deadLetter(old.Lease, expired+1, idemstore.ReasonPoison))
	f.unchanged("the old holder's late final DeadLetter", before, f.at(expired+1))
	f.ok("the new holder's final DeadLetter", f.deadLetter(nc.Lease, expired+2, idemstore.ReasonPoison))
	if r := f.get("k", f.at(expired+2)); r.Status != idemstore.StatusDeadLettered || r.DeadLetterMessageID != "dlq-1" {
		t.Errorf("after the new holder's mark: %s, copy %q", r.Status, r.DeadLetterMessageID)
	}
}

// An extension that sets ExpiresAt keeps the record past its old expiry.
func testExtendMovesExpiry(t *testing.T, f *fixture) {
	req := f.claimReq("k", 0)
	req.ExpiresAt = f.at(60)
	c := f.mustClaim(req)
	f.ok("Extend", f.store.Extend(f.ctx, idemstore.ExtendRequest{
		Lease: c.Lease, Now: f.at(20), LeaseUntil: f.at(80), ExpiresAt: f.at(200),
	}))
	got := f.get("k", f.at(120))
	if !got.ExpiresAt.Equal(f.at(200)) || got.Status != idemstore.StatusInProgress || got.LeaseToken != c.Lease.Token {
		t.Errorf("after Extend with ExpiresAt: expires %v (want %v), %s", got.ExpiresAt, f.at(200), got.Status)
	}
	// Still held: a claim after the old expiry is refused.
	f.mustRefuse(f.claimReq("k", 70))
	// An extension without ExpiresAt leaves the expiry alone.
	f.ok("Extend", f.extend(c.Lease, 30, 90))
	if got := f.get("k", f.at(30)); !got.ExpiresAt.Equal(f.at(200)) {
		t.Errorf("Extend without ExpiresAt moved the expiry to %v", got.ExpiresAt)
	}
}

// testLateExtendNeverShortensLease: a heartbeat's extension held in the
// network lands after a later one. It must not move the lease's end (or
// the expiry) back, or another claimer could take the key over while its
// holder runs under the later end.
func testLateExtendNeverShortensLease(t *testing.T, f *fixture) {
	c := f.mustClaim(f.claimReq("k", 0))
	f.ok("Extend", f.store.Extend(f.ctx, idemstore.ExtendRequest{Lease: c.Lease, Now: f.at(20), LeaseUntil: f.at(100), ExpiresAt: f.at(300)}))
	f.ok("late Extend", f.store.Extend(f.ctx, idemstore.ExtendRequest{Lease: c.Lease, Now: f.at(10), LeaseUntil: f.at(50), ExpiresAt: f.at(200)}))
	got := f.get("k", f.at(30))
	if !got.LeaseUntil.Equal(f.at(100)) || !got.ExpiresAt.Equal(f.at(300)) || got.LeaseToken != c.Lease.Token || got.Status != idemstore.StatusInProgress {
		t.Errorf("after a late Extend: lease until %v (want %v), expires %v (want %v), %s", got.LeaseUntil, f.at(100), got.ExpiresAt, f.at(300), got.Status)
	}
	f.mustRefuse(f.claimReq("k", 50+graceSecs+1))
	// A late extension of a lease that was taken over is still refused.
	c2 := f.mustClaim(f.claimReq("k", 100+graceSecs+1))
	f.leaseLost("late Extend of a lease taken over", f.extend(c.Lease, 10, 50))
	if got := f.get("k", f.at(100+graceSecs+2)); got.LeaseToken != c2.Lease.Token || !got.LeaseUntil.Equal(c2.Lease.Until) {
		t.Errorf("a late Extend of the old lease changed the new one: %+v", got)
	}
}

// A failure (the dead-letter copy could not be sent) and an operator's
// release end the dead-lettering a pending mark stood for: the FAILED
// record carries no pending mark, nor does the record the next claim
// returns, so that claim's holder runs the handler, and one that takes it
// over later does not finish a dead-lettering that never happened.
func testFailEndsPendingDeadLetter(t *testing.T, f *fixture) {
	check := func(what, key string, now int) {
		t.Helper()
		r := f.get(key, f.at(now))
		if r.Status != idemstore.StatusFailed || r.DeadLetterReason != "" || r.DeadLetteredMessageID != "" {
			t.Errorf("after %s: %s with the pending mark %q (message %q); want FAILED without one", what, r.Status, r.DeadLetterReason, r.DeadLetteredMessageID)
		}
		c := f.mustClaim(f.claimReq(key, now+1))
		if c.Record.DeadLetterReason != "" || c.Record.DeadLetteredMessageID != "" {
			t.Errorf("the claim after %s returned the pending mark %q (message %q)", what, c.Record.DeadLetterReason, c.Record.DeadLetteredMessageID)
		}
	}
	c := f.mustClaim(f.claimReq("k", 0))
	f.ok("DeadLetter(Pending)", f.pendingDeadLetter(c.Lease, 1))
	f.ok("Fail", f.fail(c.Lease, 2, "dead-letter send: unavailable"))
	check("Fail", "k", 2)

	if _, ok := f.store.(idemstore.Admin); !ok {
		return
	}
	r := f.mustClaim(f.claimReq("r", 0))
	f.ok("DeadLetter(Pending)", f.pendingDeadLetter(r.Lease, 1))
	now := leaseSecs + graceSecs + 1
	if _, err := f.admin().Release(f.ctx, f.releaseReq("r", r.Lease.Token, now)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	check("Release", "r", now)
}
