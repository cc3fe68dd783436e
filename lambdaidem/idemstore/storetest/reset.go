package storetest

import (
	"errors"
	"testing"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// The reset cases run for stores that implement
// idemstore.DeadLetterResetter and are skipped, with a note, for the
// others.
func init() {
	cases = append(cases,
		testCase{"ResetDeadLetter", testResetDeadLetter},
		testCase{"ResetOnlyByTheCopyThatDeadLettered", testResetOnlyByItsCopy},
		testCase{"ResetRefusedUnlessDeadLettered", testResetRefusedUnlessDeadLettered},
		testCase{"ResetAbsentOrExpired", testResetAbsentOrExpired},
		testCase{"ResetMaxRedrives", testResetMaxRedrives},
		testCase{"ResetForgottenWithItsGeneration", testResetForgottenWithItsGeneration},
	)
}

func (f *fixture) resetter() idemstore.DeadLetterResetter {
	f.t.Helper()
	r, ok := f.store.(idemstore.DeadLetterResetter)
	if !ok {
		f.t.Skipf("%T does not implement idemstore.DeadLetterResetter: redrive cannot use it", f.store)
	}
	return r
}

func (f *fixture) resetReq(key, copyID string, now int) idemstore.ResetRequest {
	return idemstore.ResetRequest{Namespace: f.ns, Key: key, DeadLetterMessageID: copyID, Now: f.at(now)}
}

// deadLettered claims key and dead-letters it as copy copyID at second now.
func (f *fixture) deadLettered(key, copyID string, now int) idemstore.Lease {
	f.t.Helper()
	c := f.mustClaim(f.claimReq(key, now))
	f.ok("DeadLetter", f.store.DeadLetter(f.ctx, idemstore.DeadLetterRequest{
		Lease: c.Lease, Now: f.at(now + 1), Reason: idemstore.ReasonPoison, Error: "boom",
		MessageID: "m1", DeadLetterMessageID: copyID, ExpiresAt: f.at(now + retentionSecs),
	}))
	return c.Lease
}

// mustRefuseReset checks that a reset is refused with ErrResetRefused,
// returns the stored record and changes nothing.
func (f *fixture) mustRefuseReset(req idemstore.ResetRequest) idemstore.Record {
	f.t.Helper()
	before := f.get(req.Key, req.Now)
	got, err := f.resetter().ResetDeadLetter(f.ctx, req)
	if !errors.Is(err, idemstore.ErrResetRefused) {
		f.t.Fatalf("ResetDeadLetter(%s, copy %s) = %+v, %v; want ErrResetRefused", req.Key, req.DeadLetterMessageID, got, err)
	}
	if d := RecordDiff(before, got); d != "" {
		f.t.Errorf("refused reset returned a record unlike the stored one (-stored +returned):\n%s", d)
	}
	f.unchanged("refused reset", before, req.Now)
	return got
}

func testResetDeadLetter(t *testing.T, f *fixture) {
	rs := f.resetter()
	old := f.deadLettered("k", "dlq-1", 0)
	before := f.get("k", f.at(2))
	got, err := rs.ResetDeadLetter(f.ctx, f.resetReq("k", "dlq-1", 2))
	f.ok("ResetDeadLetter", err)
	want := before
	want.Status = idemstore.StatusFailed
	want.Attempts = 0
	want.Redrives = 1
	want.RedrivenFrom = "dlq-1"
	want.LastError = idemstore.DefaultResetNote
	want.DeadLetterReason, want.DeadLetteredMessageID, want.DeadLetterMessageID = "", "", ""
	want.UpdatedAt = f.at(2)
	want.LeaseToken = got.LeaseToken
	if d := RecordDiff(want, got); d != "" {
		t.Errorf("record after reset (-want +got):\n%s", d)
	}
	if got.LeaseToken == "" || got.LeaseToken == before.LeaseToken {
		t.Errorf("reset kept lease token %q; want a new one", got.LeaseToken)
	}
	f.unchanged("reading back the reset", got, f.at(2))

	// The old holder's late writes are refused.
	for _, op := range writeOps {
		f.leaseLost("late "+op.name+" after reset", op.do(f, old, 3))
	}
	// The redriven message claims it as after any failure, attempts
	// counting from one again.
	c := f.mustClaim(f.claimReq("k", 4))
	if c.Previous != idemstore.StatusFailed || c.Lease.Attempt != 1 || c.Record.Redrives != 1 {
		t.Errorf("claim after reset: previous %q, attempt %d, redrives %d; want FAILED, 1, 1", c.Previous, c.Lease.Attempt, c.Record.Redrives)
	}
	// A second reset by the same copy is refused: it was redriven already.
	f.mustRefuseReset(f.resetReq("k", "dlq-1", 5))
}

func testResetOnlyByItsCopy(t *testing.T, f *fixture) {
	f.deadLettered("k", "dlq-1", 0)
	for _, id := range []string{"dlq-2", "DLQ-1", "dlq-1 "} {
		if r := f.mustRefuseReset(f.resetReq("k", id, 2)); r.Status != idemstore.StatusDeadLettered {
			t.Errorf("refusal returned %s, want DEAD_LETTERED", r.Status)
		}
	}
	_, err := f.resetter().ResetDeadLetter(f.ctx, f.resetReq("k", "", 2))
	if !errors.Is(err, idemstore.ErrResetRefused) {
		t.Errorf("reset without a copy ID = %v, want ErrResetRefused", err)
	}
}

func testResetRefusedUnlessDeadLettered(t *testing.T, f *fixture) {
	// IN_PROGRESS under a valid lease, and after it ran out.
	c := f.mustClaim(f.claimReq("held", 0))
	f.mustRefuseReset(f.resetReq("held", "dlq-1", 1))
	f.mustRefuseReset(f.resetReq("held", "dlq-1", leaseSecs+graceSecs+10))
	// COMPLETED.
	c2 := f.mustClaim(f.claimReq("done", 0))
	f.ok("Complete", f.complete(c2.Lease, 1, nil))
	f.mustRefuseReset(f.resetReq("done", "dlq-1", 2))
	// FAILED.
	f.ok("Fail", f.fail(c.Lease, 2, "transient"))
	if r := f.mustRefuseReset(f.resetReq("held", "dlq-1", 3)); r.Status != idemstore.StatusFailed {
		t.Errorf("refusal returned %s, want FAILED", r.Status)
	}
}

func testResetAbsentOrExpired(t *testing.T, f *fixture) {
	rs := f.resetter()
	if _, err := rs.ResetDeadLetter(f.ctx, f.resetReq("never", "dlq-1", 0)); !errors.Is(err, idemstore.ErrNotFound) {
		t.Errorf("reset of an absent record = %v, want ErrNotFound", err)
	}
	f.deadLettered("k", "dlq-1", 0)
	if _, err := rs.ResetDeadLetter(f.ctx, f.resetReq("k", "dlq-1", retentionSecs+10)); !errors.Is(err, idemstore.ErrNotFound) {
		t.Errorf("reset of an expired record = %v, want ErrNotFound", err)
	}
}

func testResetMaxRedrives(t *testing.T, f *fixture) {
	rs := f.resetter()
	f.deadLettered("k", "dlq-1", 0)
	req := f.resetReq("k", "dlq-1", 2)
	req.MaxRedrives = 1
	f.ok("first reset", func() error { _, err := rs.ResetDeadLetter(f.ctx, req); return err }())
	f.deadLettered("k", "dlq-2", 3)
	req = f.resetReq("k", "dlq-2", 5)
	req.MaxRedrives = 1
	if r := f.mustRefuseReset(req); r.Redrives != 1 {
		t.Errorf("refusal at the limit returned redrives %d, want 1", r.Redrives)
	}
	req.MaxRedrives = 2
	r, err := rs.ResetDeadLetter(f.ctx, req)
	f.ok("reset under a higher limit", err)
	if r.Redrives != 2 || r.RedrivenFrom != "dlq-2" {
		t.Errorf("redrives %d from %q, want 2 from dlq-2", r.Redrives, r.RedrivenFrom)
	}
}

// testResetForgottenWithItsGeneration: what a record says about redrives
// belongs to its generation. A redrive that finds a COMPLETED record
// redriven from its copy deletes the copy as done, so a fresh generation
// (after an expiry) must not carry the old one's RedrivenFrom.
func testResetForgottenWithItsGeneration(t *testing.T, f *fixture) {
	rs := f.resetter()
	f.deadLettered("k", "dlq-1", 0)
	_, err := rs.ResetDeadLetter(f.ctx, f.resetReq("k", "dlq-1", 2))
	f.ok("ResetDeadLetter", err)
	c := f.mustClaim(f.claimReq("k", 3))
	f.ok("Complete", f.complete(c.Lease, 4, nil))
	if r := f.get("k", f.at(5)); r.RedrivenFrom != "dlq-1" || r.Redrives != 1 {
		t.Fatalf("completed after the reset: redriven %d times from %q, want 1 from dlq-1", r.Redrives, r.RedrivenFrom)
	}
	fresh := f.mustClaim(f.claimReq("k", 4+retentionSecs+10))
	if fresh.Previous != "" || fresh.Record.Redrives != 0 || fresh.Record.RedrivenFrom != "" {
		t.Errorf("fresh generation after the expiry: previous %q, redriven %d times from %q; want a record with no redrives",
			fresh.Previous, fresh.Record.Redrives, fresh.Record.RedrivenFrom)
	}
}
