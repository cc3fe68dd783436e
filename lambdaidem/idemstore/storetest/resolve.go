package storetest

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// The resolve cases run for stores that implement idemstore.Admin and are
// skipped, with a note, for the others.
func init() {
	cases = append(cases,
		testCase{"ResolveApplied", testResolveApplied},
		testCase{"ResolveNotApplied", testResolveNotApplied},
		testCase{"ResolveAbandoned", testResolveAbandoned},
		testCase{"ResolveRefusals", testResolveRefusals},
		testCase{"ResolveInvalidRequests", testResolveInvalid},
		testCase{"ResolveForgottenWithItsGeneration", testResolveForgottenWithItsGeneration},
	)
}

// uncertain claims key and dead-letters it as outcome_unknown with copy
// copyID ("" for none, as Wrap's records have) at second now, and returns
// the holder's lease and the record as an operator reads it.
func (f *fixture) uncertain(key, copyID string, now int) (idemstore.Lease, idemstore.Record) {
	f.t.Helper()
	c := f.mustClaim(f.claimReq(key, now))
	f.ok("DeadLetter(outcome_unknown)", f.store.DeadLetter(f.ctx, idemstore.DeadLetterRequest{
		Lease: c.Lease, Now: f.at(now + 1), Reason: idemstore.ReasonOutcomeUnknown, Error: "attempt 1 ended without an outcome",
		MessageID: "m1", DeadLetterMessageID: copyID, ExpiresAt: f.at(now + retentionSecs),
	}))
	return c.Lease, f.get(key, f.at(now+1))
}

// resolveReq is the decision d on the record r as read, at second now.
func (f *fixture) resolveReq(r idemstore.Record, d idemstore.Resolution, now int) idemstore.ResolveRequest {
	return idemstore.ResolveRequest{
		Namespace: f.ns, Key: r.Key, Decision: d, Token: r.LeaseToken, DeadLetterMessageID: r.DeadLetterMessageID,
		Now: f.at(now), By: "storetest", Note: "checked the effect's target",
	}
}

// mustRefuseResolve checks that a decision is refused with want, returns
// the stored record and changes nothing.
func (f *fixture) mustRefuseResolve(req idemstore.ResolveRequest, want error) {
	f.t.Helper()
	before := f.get(req.Key, req.Now)
	got, err := f.admin().Resolve(f.ctx, req)
	if !errors.Is(err, want) {
		f.t.Fatalf("Resolve(%s, %s at %v) = %+v, %v; want %v", req.Key, req.Decision, req.Now, got, err, want)
	}
	if d := RecordDiff(before, got); d != "" {
		f.t.Errorf("refused Resolve returned a record unlike the stored one (-stored +returned):\n%s", d)
	}
	f.unchanged("refused Resolve", before, req.Now)
}

// resolved checks the fields every decision writes.
func (f *fixture) resolved(req idemstore.ResolveRequest, before, got idemstore.Record) {
	f.t.Helper()
	if got.LeaseToken == "" || got.LeaseToken == before.LeaseToken {
		f.t.Errorf("Resolve(%s) kept lease token %q; want a new one", req.Decision, got.LeaseToken)
	}
	if got.Resolution != req.Decision || got.ResolutionNote != req.StoredNote() {
		f.t.Errorf("Resolve(%s) stored resolution %q, note %q; want %q, %q", req.Decision, got.Resolution, got.ResolutionNote, req.Decision, req.StoredNote())
	}
	f.unchanged("reading back the Resolve", got, req.Now)
}

func testResolveApplied(t *testing.T, f *fixture) {
	a := f.admin()
	old, before := f.uncertain("k", "dlq-1", 0)
	req := f.resolveReq(before, idemstore.ResolutionApplied, 5)
	req.Result = []byte("!lambdaidem: result not stored: resolved by an operator")
	got, err := a.Resolve(f.ctx, req)
	f.ok("Resolve(applied)", err)
	want := before
	want.Status = idemstore.StatusCompleted
	want.Result = req.Result
	want.DeadLetterReason, want.DeadLetteredMessageID, want.DeadLetterMessageID = "", "", ""
	want.UpdatedAt = req.Now
	want.LeaseToken = got.LeaseToken
	want.Resolution, want.ResolutionNote = req.Decision, req.StoredNote()
	if d := RecordDiff(want, got); d != "" {
		t.Errorf("record after Resolve(applied) (-want +got):\n%s", d)
	}
	f.resolved(req, before, got)
	f.fenced("Resolve(applied)", old, 6)
	// A message with the key is a duplicate now, and gets the result.
	res := f.mustRefuse(f.claimReq("k", 7))
	if res.Record.Status != idemstore.StatusCompleted || string(res.Record.Result) != string(req.Result) {
		t.Errorf("claim after Resolve(applied) refused by %s with result %q, want COMPLETED with %q", res.Record.Status, res.Record.Result, req.Result)
	}
	// No longer open: neither listed nor counted as DEAD_LETTERED.
	if n, err := a.Count(f.ctx, idemstore.CountRequest{Status: idemstore.StatusDeadLettered, Namespace: f.ns, Now: f.at(7)}); err != nil || n != 0 {
		t.Errorf("Count(DEAD_LETTERED) after Resolve(applied) = %d, %v; want 0", n, err)
	}
	// The decision under the token it replaced is refused.
	f.mustRefuseResolve(req, idemstore.ErrRecordChanged)
	// A redrive of its copy finds it COMPLETED: refused.
	if rs, ok := f.store.(idemstore.DeadLetterResetter); ok {
		if _, err := rs.ResetDeadLetter(f.ctx, f.resetReq("k", "dlq-1", 8)); !errors.Is(err, idemstore.ErrResetRefused) {
			t.Errorf("reset after Resolve(applied) = %v, want ErrResetRefused", err)
		}
	}
}

func testResolveNotApplied(t *testing.T, f *fixture) {
	a := f.admin()
	for _, copyID := range []string{"dlq-1", ""} {
		key := "k" + copyID
		old, before := f.uncertain(key, copyID, 0)
		req := f.resolveReq(before, idemstore.ResolutionNotApplied, 5)
		got, err := a.Resolve(f.ctx, req)
		f.ok("Resolve(not_applied)", err)
		want := before
		want.Status = idemstore.StatusFailed
		want.Attempts = 0
		want.Redrives = 1
		want.RedrivenFrom = copyID
		want.LastError = req.StoredNote()
		want.DeadLetterReason, want.DeadLetteredMessageID, want.DeadLetterMessageID = "", "", ""
		want.UpdatedAt = req.Now
		want.LeaseToken = got.LeaseToken
		want.Resolution, want.ResolutionNote = req.Decision, req.StoredNote()
		if d := RecordDiff(want, got); d != "" {
			t.Errorf("copy %q: record after Resolve(not_applied) (-want +got):\n%s", copyID, d)
		}
		f.resolved(req, before, got)
		f.fenced("Resolve(not_applied)", old, 6)
		// The key runs once more, as after a redrive, and keeps the
		// decision as its history.
		c := f.mustClaim(f.claimReq(key, 7))
		if c.Previous != idemstore.StatusFailed || c.Lease.Attempt != 1 || c.Lease.Fence != (idemstore.Fence{Generation: before.Fence.Generation, Claim: before.Fence.Claim + 1}) {
			t.Errorf("copy %q: claim after Resolve(not_applied): previous %q, attempt %d, fence %+v; want FAILED, 1, the same generation",
				copyID, c.Previous, c.Lease.Attempt, c.Lease.Fence)
		}
		f.ok("Complete", f.complete(c.Lease, 8, nil))
		if r := f.get(key, f.at(8)); r.Status != idemstore.StatusCompleted || r.Resolution != idemstore.ResolutionNotApplied || r.ResolutionNote != req.StoredNote() {
			t.Errorf("copy %q: completed after Resolve(not_applied): %s, resolution %q, note %q; want COMPLETED keeping the decision", copyID, r.Status, r.Resolution, r.ResolutionNote)
		}
	}
}

func testResolveAbandoned(t *testing.T, f *fixture) {
	a := f.admin()
	old, before := f.uncertain("k", "dlq-1", 0)
	req := f.resolveReq(before, idemstore.ResolutionAbandoned, 5)
	got, err := a.Resolve(f.ctx, req)
	f.ok("Resolve(abandoned)", err)
	want := before
	want.UpdatedAt = req.Now
	want.LeaseToken = got.LeaseToken
	want.Resolution, want.ResolutionNote = req.Decision, req.StoredNote()
	if d := RecordDiff(want, got); d != "" {
		t.Errorf("record after Resolve(abandoned) (-want +got):\n%s", d)
	}
	if !got.Abandoned() || got.Uncertain() {
		t.Errorf("after Resolve(abandoned): Abandoned %t, Uncertain %t; want true, false", got.Abandoned(), got.Uncertain())
	}
	f.resolved(req, before, got)
	f.fenced("Resolve(abandoned)", old, 6)
	// Never run: a message with the key is refused, a redrive of its
	// copy is refused, and so is every other decision.
	f.mustRefuse(f.claimReq("k", 7))
	if _, ok := f.store.(idemstore.DeadLetterResetter); ok {
		f.mustRefuseReset(f.resetReq("k", "dlq-1", 8))
	}
	for _, d := range []idemstore.Resolution{idemstore.ResolutionApplied, idemstore.ResolutionNotApplied, idemstore.ResolutionAbandoned} {
		f.mustRefuseResolve(f.resolveReq(got, d, 9), idemstore.ErrResolved)
	}
	// Still open, and listed with its decision.
	if n, err := a.Count(f.ctx, idemstore.CountRequest{Status: idemstore.StatusDeadLettered, Namespace: f.ns, Now: f.at(10)}); err != nil || n != 1 {
		t.Errorf("Count(DEAD_LETTERED) after Resolve(abandoned) = %d, %v; want 1", n, err)
	}
	var listed []idemstore.Resolution
	for r, err := range a.ListOpen(f.ctx, idemstore.ListOpenRequest{Status: idemstore.StatusDeadLettered, Namespace: f.ns, Now: f.at(10)}) {
		if err != nil {
			t.Fatalf("ListOpen: %v", err)
		}
		listed = append(listed, r.Resolution)
	}
	if !slices.Equal(listed, []idemstore.Resolution{idemstore.ResolutionAbandoned}) {
		t.Errorf("ListOpen(DEAD_LETTERED) after Resolve(abandoned) yielded resolutions %q, want [abandoned]", listed)
	}
}

func testResolveRefusals(t *testing.T, f *fixture) {
	a := f.admin()
	_, r := f.uncertain("k", "dlq-1", 0)
	// Another token (read before a later write), another copy.
	stale := f.resolveReq(r, idemstore.ResolutionApplied, 5)
	stale.Token = "not-" + r.LeaseToken
	f.mustRefuseResolve(stale, idemstore.ErrRecordChanged)
	other := f.resolveReq(r, idemstore.ResolutionNotApplied, 5)
	other.DeadLetterMessageID = "dlq-2"
	f.mustRefuseResolve(other, idemstore.ErrRecordChanged)
	// Not an unknown outcome: dead-lettered for another reason, held,
	// failed, completed.
	f.deadLettered("poison", "dlq-3", 0)
	f.mustRefuseResolve(f.resolveReq(f.get("poison", f.at(2)), idemstore.ResolutionApplied, 5), idemstore.ErrNotOutcomeUnknown)
	held := f.mustClaim(f.claimReq("held", 0))
	f.mustRefuseResolve(f.resolveReq(held.Record, idemstore.ResolutionApplied, 5), idemstore.ErrNotOutcomeUnknown)
	f.ok("Fail", f.fail(held.Lease, 6, "transient"))
	f.mustRefuseResolve(f.resolveReq(f.get("held", f.at(6)), idemstore.ResolutionNotApplied, 7), idemstore.ErrNotOutcomeUnknown)
	done := f.mustClaim(f.claimReq("done", 0))
	f.ok("Complete", f.complete(done.Lease, 1, nil))
	f.mustRefuseResolve(f.resolveReq(f.get("done", f.at(2)), idemstore.ResolutionAbandoned, 5), idemstore.ErrNotOutcomeUnknown)
	// Absent, expired.
	absent := f.resolveReq(r, idemstore.ResolutionApplied, 5)
	absent.Key = "never"
	if _, err := a.Resolve(f.ctx, absent); !errors.Is(err, idemstore.ErrNotFound) {
		t.Errorf("Resolve of an absent record = %v, want ErrNotFound", err)
	}
	if _, err := a.Resolve(f.ctx, f.resolveReq(r, idemstore.ResolutionApplied, retentionSecs+10)); !errors.Is(err, idemstore.ErrNotFound) {
		t.Errorf("Resolve of an expired record = %v, want ErrNotFound", err)
	}
	// None of it moved the record.
	f.unchanged("the refused decisions", r, f.at(5))
}

func testResolveInvalid(t *testing.T, f *fixture) {
	a := f.admin()
	_, r := f.uncertain("k", "dlq-1", 0)
	for name, edit := range map[string]func(*idemstore.ResolveRequest){
		"unknown decision": func(q *idemstore.ResolveRequest) { q.Decision = "maybe" },
		"no decision":      func(q *idemstore.ResolveRequest) { q.Decision = "" },
		"no token":         func(q *idemstore.ResolveRequest) { q.Token = "" },
		"no By":            func(q *idemstore.ResolveRequest) { q.By = "" },
		"long By":          func(q *idemstore.ResolveRequest) { q.By = strings.Repeat("b", idemstore.MaxResolveByBytes+1) },
		"long Note":        func(q *idemstore.ResolveRequest) { q.Note = strings.Repeat("n", idemstore.MaxResolveNoteBytes+1) },
		"Note not UTF-8":   func(q *idemstore.ResolveRequest) { q.Note = "\xff" },
		"long Result":      func(q *idemstore.ResolveRequest) { q.Result = make([]byte, idemstore.MaxResolveNoteBytes+1) },
	} {
		req := f.resolveReq(r, idemstore.ResolutionApplied, 5)
		edit(&req)
		_, err := a.Resolve(f.ctx, req)
		if !errors.Is(err, idemstore.ErrInvalidRequest) || errors.Is(err, idemstore.ErrStoreUnavailable) {
			t.Errorf("Resolve with %s = %v, want ErrInvalidRequest", name, err)
		}
	}
	f.unchanged("the invalid decisions", r, f.at(5))
	// The longest text a request may hold is stored whole.
	req := f.resolveReq(r, idemstore.ResolutionAbandoned, 5)
	req.By = strings.Repeat("b", idemstore.MaxResolveByBytes)
	req.Note = strings.Repeat("é", idemstore.MaxResolveNoteBytes/2)
	got, err := a.Resolve(f.ctx, req)
	f.ok("Resolve with the longest text", err)
	if got.ResolutionNote != req.StoredNote() || len(got.ResolutionNote) > idemstore.MaxResolutionNoteBytes {
		t.Errorf("stored note of %d bytes differs from the request's %d (at most %d)", len(got.ResolutionNote), len(req.StoredNote()), idemstore.MaxResolutionNoteBytes)
	}
}

// testResolveForgottenWithItsGeneration: a decision belongs to its
// generation; the key's next generation (after a forget or an expiry)
// starts without one.
func testResolveForgottenWithItsGeneration(t *testing.T, f *fixture) {
	a := f.admin()
	_, r := f.uncertain("k", "dlq-1", 0)
	_, err := a.Resolve(f.ctx, f.resolveReq(r, idemstore.ResolutionAbandoned, 5))
	f.ok("Resolve(abandoned)", err)
	req := f.forgetReq("k", 6)
	req.AbandonCopy = true
	_, err = a.Forget(f.ctx, req)
	f.ok("Forget", err)
	if fresh := f.mustClaim(f.claimReq("k", 7)); fresh.Previous != "" || fresh.Record.Resolution != "" || fresh.Record.ResolutionNote != "" {
		t.Errorf("claim after forgetting an abandoned record: previous %q, resolution %q, note %q; want a fresh record with no decision",
			fresh.Previous, fresh.Record.Resolution, fresh.Record.ResolutionNote)
	}
	_, r = f.uncertain("e", "dlq-2", 0)
	_, err = a.Resolve(f.ctx, f.resolveReq(r, idemstore.ResolutionApplied, 5))
	f.ok("Resolve(applied)", err)
	if fresh := f.mustClaim(f.claimReq("e", retentionSecs+10)); fresh.Previous != "" || fresh.Record.Resolution != "" {
		t.Errorf("claim after the expiry of a resolved record: previous %q, resolution %q; want a fresh record with no decision", fresh.Previous, fresh.Record.Resolution)
	}
}
