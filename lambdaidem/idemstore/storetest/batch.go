package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// The batched claims' and completions' cases run for stores that
// implement idemstore.Batcher and are skipped, with a note, for the
// others.
func init() {
	cases = append(cases,
		testCase{"BatchClaimMatchesClaim", testBatchClaimMatchesClaim},
		testCase{"BatchClaimMany", testBatchClaimMany},
		testCase{"BatchCompleteMatchesComplete", testBatchCompleteMatchesComplete},
		testCase{"BatchInvalidRequests", testBatchInvalidRequests},
	)
}

func (f *fixture) batcher() idemstore.Batcher {
	f.t.Helper()
	b, ok := f.store.(idemstore.Batcher)
	if !ok {
		f.t.Skipf("%T does not implement idemstore.Batcher: the SQS handler claims and completes one record at a time", f.store)
	}
	return b
}

// batchWorld builds the same records in f's namespace and returns the
// requests of one batch at second now: a key for every way a claim can
// go, and one key asked for twice.
func batchWorld(f *fixture) (reqs []idemstore.ClaimRequest, now int) {
	f.t.Helper()
	now = leaseSecs + graceSecs + 1
	done := f.mustClaim(f.claimReq("completed", 0))
	f.ok("Complete", f.complete(done.Lease, 1, []byte(`"r"`)))
	failed := f.mustClaim(f.claimReq("failed", 0))
	f.ok("Fail", f.fail(failed.Lease, 1, "boom"))
	other := f.mustClaim(f.claimReq("failed-other", 0))
	f.ok("Fail", f.fail(other.Lease, 1, "boom"))
	f.mustClaim(f.claimReq("held", now-1))
	f.mustClaim(f.claimReq("abandoned", 0))
	f.mustClaim(f.claimReq("abandoned-amo", 0))
	exp := f.claimReq("expired", 0)
	exp.ExpiresAt = f.at(10)
	f.mustClaim(exp)
	dead := f.mustClaim(f.claimReq("dead", 0))
	f.ok("DeadLetter", f.deadLetter(dead.Lease, 1, idemstore.ReasonPoison))

	for _, key := range []string{"absent", "completed", "failed", "failed-other", "held", "abandoned", "abandoned-amo", "expired", "dead", "twice", "twice"} {
		req := f.claimReq(key, now)
		req.MessageID = "m-batch"
		switch key {
		case "failed-other":
			req.PayloadHash = hashB
		case "abandoned-amo":
			req.NoTakeover = true
		}
		reqs = append(reqs, req)
	}
	return reqs, now
}

// normal hides what differs between two namespaces built alike: the
// namespace, tokens and generations (random), keeping whether they are
// set.
func normal(r idemstore.Record) idemstore.Record {
	r.Namespace = ""
	if r.LeaseToken != "" {
		r.LeaseToken = "token"
	}
	if r.Fence.Generation != "" {
		r.Fence.Generation = "generation"
	}
	return r
}

func testBatchClaimMatchesClaim(t *testing.T, f *fixture) {
	b := f.batcher()
	ref := *f
	ref.ns = f.ns + "-ref"
	reqs, now := batchWorld(f)
	refReqs, _ := batchWorld(&ref)

	before := map[string]idemstore.Record{}
	for _, req := range reqs {
		if r, err := f.store.Get(f.ctx, idemstore.GetRequest{Namespace: f.ns, Key: req.Key, Now: f.at(now)}); err == nil {
			before[req.Key] = r
		}
	}
	out := b.ClaimBatch(f.ctx, reqs)
	if len(out) != len(reqs) {
		t.Fatalf("ClaimBatch of %d requests answered %d", len(reqs), len(out))
	}
	for i, req := range reqs {
		want, err := ref.store.Claim(ref.ctx, refReqs[i])
		if err != nil {
			t.Fatalf("reference Claim(%s): %v", req.Key, err)
		}
		got := out[i]
		if got.Err != nil {
			t.Errorf("ClaimBatch answered %s (request %d) with %v", req.Key, i, got.Err)
			continue
		}
		if got.Result.Claimed != want.Claimed || got.Result.Previous != want.Previous {
			t.Errorf("%s (request %d): batch claimed %v (previous %q), a single Claim %v (previous %q)",
				req.Key, i, got.Result.Claimed, got.Result.Previous, want.Claimed, want.Previous)
		}
		if d := RecordDiff(normal(want.Record), normal(got.Result.Record)); d != "" {
			t.Errorf("%s (request %d): the batch's record differs from a single Claim's (-single +batch):\n%s", req.Key, i, d)
		}
		if got.Result.Claimed {
			l := got.Result.Lease
			if l.Token == "" || l.Token != got.Result.Record.LeaseToken || l.Attempt != got.Result.Record.Attempts ||
				l.Fence != got.Result.Record.Fence || !l.Until.Equal(req.LeaseUntil) || l.Key != req.Key || l.Namespace != f.ns {
				t.Errorf("%s: the batch's lease %+v does not match its record %+v", req.Key, l, got.Result.Record)
			}
			if old, ok := before[req.Key]; ok && old.LeaseToken == l.Token {
				t.Errorf("%s: the batch's claim kept the old token", req.Key)
			}
		}
	}
	// The records are now as a single Claim of each leaves them, and the
	// batch's leases fence every later write as Claim's do.
	for _, req := range reqs {
		got, gerr := f.store.Get(f.ctx, idemstore.GetRequest{Namespace: f.ns, Key: req.Key, Now: f.at(now)})
		want, werr := ref.store.Get(ref.ctx, idemstore.GetRequest{Namespace: ref.ns, Key: req.Key, Now: f.at(now)})
		if (gerr == nil) != (werr == nil) {
			t.Errorf("%s after the batch: Get = %v, after single claims %v", req.Key, gerr, werr)
			continue
		}
		if d := RecordDiff(normal(want), normal(got)); d != "" {
			t.Errorf("%s after the batch (-single claims +batch):\n%s", req.Key, d)
		}
	}
	for i, o := range out {
		if o.Result.Claimed && i < len(out)-1 {
			f.ok("Complete under a batch's lease", f.complete(o.Result.Lease, now+1, nil))
		}
	}
}

func testBatchClaimMany(t *testing.T, f *fixture) {
	b := f.batcher()
	if out := b.ClaimBatch(f.ctx, nil); len(out) != 0 {
		t.Errorf("ClaimBatch(nil) answered %d", len(out))
	}
	// More than any one request of a store holds (DynamoDB: 100 actions a
	// transaction, 25 statements a PartiQL batch).
	const n = 130
	var reqs []idemstore.ClaimRequest
	for i := range n {
		reqs = append(reqs, f.claimReq(fmt.Sprintf("k%03d", i), 0))
	}
	// A few of them are duplicates already.
	for _, i := range []int{7, 64, 129} {
		c := f.mustClaim(reqs[i])
		f.ok("Complete", f.complete(c.Lease, 0, nil))
	}
	out := b.ClaimBatch(f.ctx, reqs)
	var leases []idemstore.Lease
	var completes []idemstore.CompleteRequest
	for i, o := range out {
		switch {
		case o.Err != nil:
			t.Fatalf("%s: %v", reqs[i].Key, o.Err)
		case i == 7 || i == 64 || i == 129:
			if o.Result.Claimed || o.Result.Record.Status != idemstore.StatusCompleted {
				t.Errorf("%s: claimed %v, record %s; want refused by the COMPLETED record", reqs[i].Key, o.Result.Claimed, o.Result.Record.Status)
			}
		case !o.Result.Claimed || o.Result.Lease.Attempt != 1:
			t.Errorf("%s: claimed %v, attempt %d; want a fresh claim", reqs[i].Key, o.Result.Claimed, o.Result.Lease.Attempt)
		default:
			leases = append(leases, o.Result.Lease)
			completes = append(completes, idemstore.CompleteRequest{Lease: o.Result.Lease, Now: f.at(1), Result: []byte(`1`), ExpiresAt: f.at(retentionSecs)})
		}
	}
	for i, err := range b.CompleteBatch(f.ctx, completes) {
		f.ok("CompleteBatch of "+leases[i].Key, err)
	}
	for _, l := range leases {
		if r := f.get(l.Key, f.at(2)); r.Status != idemstore.StatusCompleted || r.LeaseToken != l.Token || !bytes.Equal(r.Result, []byte(`1`)) {
			t.Errorf("%s after CompleteBatch: %s, token %q, result %q", l.Key, r.Status, r.LeaseToken, r.Result)
		}
	}
	if errs := b.CompleteBatch(f.ctx, nil); len(errs) != 0 {
		t.Errorf("CompleteBatch(nil) answered %d", len(errs))
	}
}

func testBatchCompleteMatchesComplete(t *testing.T, f *fixture) {
	b := f.batcher()
	large := bytes.Repeat([]byte("0123456789abcdef"), idemstore.MinResultBytes/16)
	valid := f.mustClaim(f.claimReq("valid", 0)).Lease
	bigOne := f.mustClaim(f.claimReq("large", 0)).Lease
	done := f.mustClaim(f.claimReq("retried", 0)).Lease
	f.ok("Complete", f.complete(done, 1, []byte(`"r"`)))
	old := f.mustClaim(f.claimReq("taken", 0)).Lease
	f.mustClaim(f.claimReq("taken", leaseSecs+graceSecs+1))
	gone := f.mustClaim(f.claimReq("gone", 0)).Lease
	f.ok("Delete", f.store.Delete(f.ctx, idemstore.DeleteRequest{Namespace: f.ns, Key: "gone"}))
	failed := f.mustClaim(f.claimReq("failed", 0)).Lease
	f.ok("Fail", f.fail(failed, 1, "boom"))
	unknown := f.mustClaim(f.claimReq("unknown-write", 0)).Lease
	ran := f.mustClaim(f.claimReq("ran-out", 0)).Lease // its lease ran out, nobody took it over

	now := leaseSecs + graceSecs + 2
	req := func(l idemstore.Lease, result []byte) idemstore.CompleteRequest {
		return idemstore.CompleteRequest{Lease: l, Now: f.at(now), Result: result, ExpiresAt: f.at(now + retentionSecs)}
	}
	withWrite := req(unknown, nil)
	withWrite.Writes = []any{unknownWrite{Table: "effects"}}
	reqs := []idemstore.CompleteRequest{
		req(valid, []byte(`"v"`)), req(bigOne, large), req(done, []byte(`"r"`)), req(old, nil),
		req(gone, nil), req(failed, nil), withWrite, req(ran, nil), req(valid, []byte(`"v"`)),
	}
	beforeUnknown := f.get("unknown-write", f.at(now))
	beforeTaken := f.get("taken", f.at(now))
	errs := b.CompleteBatch(f.ctx, reqs)
	if len(errs) != len(reqs) {
		t.Fatalf("CompleteBatch of %d requests answered %d", len(reqs), len(errs))
	}
	want := []error{nil, nil, nil, idemstore.ErrLeaseLost, idemstore.ErrLeaseLost, idemstore.ErrLeaseLost,
		idemstore.ErrUnsupportedWrite, nil, nil}
	for i, w := range want {
		if (w == nil && errs[i] != nil) || (w != nil && !errors.Is(errs[i], w)) {
			t.Errorf("%s (request %d): CompleteBatch = %v, want %v", reqs[i].Lease.Key, i, errs[i], w)
		}
	}
	for _, c := range []struct {
		key    string
		result []byte
	}{{"valid", []byte(`"v"`)}, {"large", large}, {"retried", []byte(`"r"`)}, {"ran-out", nil}} {
		r := f.get(c.key, f.at(now))
		if r.Status != idemstore.StatusCompleted || !bytes.Equal(r.Result, c.result) {
			t.Errorf("%s after CompleteBatch: %s with %d result bytes, want COMPLETED with %d", c.key, r.Status, len(r.Result), len(c.result))
		}
	}
	f.unchanged("CompleteBatch under an old lease", beforeTaken, f.at(now))
	f.unchanged("CompleteBatch with an unknown write", beforeUnknown, f.at(now))
	f.mustBeAbsent("gone", f.at(now))
	if r := f.get("failed", f.at(now)); r.Status != idemstore.StatusFailed {
		t.Errorf("failed after CompleteBatch: %s", r.Status)
	}
}

func testBatchInvalidRequests(t *testing.T, f *fixture) {
	b := f.batcher()
	good := f.claimReq("k", 0)
	noKey := f.claimReq("", 0)
	noNS := f.claimReq("k2", 0)
	noNS.Namespace = ""
	out := b.ClaimBatch(f.ctx, []idemstore.ClaimRequest{noKey, good, noNS})
	for _, i := range []int{0, 2} {
		if out[i].Err == nil || errors.Is(out[i].Err, idemstore.ErrStoreUnavailable) || out[i].Result.Claimed {
			t.Errorf("ClaimBatch request %d without a key or namespace = %+v; want an invalid-request error", i, out[i])
		}
	}
	if out[1].Err != nil || !out[1].Result.Claimed {
		t.Errorf("ClaimBatch's valid request beside invalid ones = %+v, want claimed", out[1])
	}
	bad := idemstore.Lease{Namespace: f.ns, Token: "t", Fence: idemstore.Fence{Generation: "g", Claim: 1}, Attempt: 1}
	errs := b.CompleteBatch(f.ctx, []idemstore.CompleteRequest{
		{Lease: bad, Now: f.at(1)},
		{Lease: out[1].Result.Lease, Now: f.at(1), ExpiresAt: f.at(retentionSecs)},
	})
	if errs[0] == nil || errors.Is(errs[0], idemstore.ErrStoreUnavailable) {
		t.Errorf("CompleteBatch without a key = %v; want an invalid-request error", errs[0])
	}
	f.ok("CompleteBatch's valid request beside an invalid one", errs[1])
}
