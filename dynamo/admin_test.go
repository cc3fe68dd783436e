package dynamo_test

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/internal/faultproxy"
	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// adminSetup is setup plus an Admin whose client goes through the proxy.
func adminSetup(t *testing.T) (*bundle, *dynamo.Admin) {
	t.Helper()
	b := setup(t, testTuning)
	client := testenv.DynamoDB(t, dynamo.ClientOptions(testTuning), func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(b.proxy.URL())
	})
	return b, dynamo.NewAdmin(client, b.table)
}

func TestReleaseRefusesValidLease(t *testing.T) {
	t.Parallel()
	b, a := adminSetup(t)
	held := b.mustClaim(t, b.claimReq("k", 0)) // lease until 30
	rel := dynamo.ReleaseRequest{Namespace: b.ns, Key: "k", Token: held.Lease.Token, Now: b.at(10)}

	r, err := a.Release(t.Context(), rel)
	if !errors.Is(err, dynamo.ErrLeaseValid) {
		t.Fatalf("Release of a valid lease: %v, want ErrLeaseValid", err)
	}
	if r.Status != lambdaidem.StatusInProgress || r.LeaseToken != held.Lease.Token {
		t.Errorf("refusal returned %s/%s, want the holder's IN_PROGRESS record", r.Status, r.LeaseToken)
	}
	if got := b.get(t, "k", 10); got.Status != lambdaidem.StatusInProgress || got.LeaseToken != held.Lease.Token {
		t.Fatalf("refused release changed the record: %+v", got)
	}

	rel.Force = true
	r, err = a.Release(t.Context(), rel)
	if err != nil {
		t.Fatalf("forced Release: %v", err)
	}
	if r.Status != lambdaidem.StatusFailed || r.Attempts != 1 || r.LeaseToken == held.Lease.Token || r.LastError == "" {
		t.Errorf("after forced release: status %s attempts %d token changed %t last_error %q",
			r.Status, r.Attempts, r.LeaseToken != held.Lease.Token, r.LastError)
	}
	// The old holder is fenced off.
	err = b.store.Complete(t.Context(), lambdaidem.CompleteRequest{Lease: held.Lease, Now: b.at(11), ExpiresAt: b.at(3600)})
	if !errors.Is(err, lambdaidem.ErrLeaseLost) {
		t.Errorf("old holder's Complete after release: %v, want ErrLeaseLost", err)
	}
	// The next delivery claims it as after any failure, attempts counting on.
	again := b.mustClaim(t, b.claimReq("k", 12))
	if again.Previous != lambdaidem.StatusFailed || again.Lease.Attempt != 2 {
		t.Errorf("claim after release: previous %q attempt %d, want FAILED and 2", again.Previous, again.Lease.Attempt)
	}
}

func TestReleaseExpiredLease(t *testing.T) {
	t.Parallel()
	b, a := adminSetup(t)
	held := b.mustClaim(t, b.claimReq("k", 0))
	r, err := a.Release(t.Context(), dynamo.ReleaseRequest{Namespace: b.ns, Key: "k", Token: held.Lease.Token, Now: b.at(31), Note: "stuck since the deploy"})
	if err != nil {
		t.Fatalf("Release of an expired lease: %v", err)
	}
	if r.Status != lambdaidem.StatusFailed || r.LastError != "stuck since the deploy" || !r.UpdatedAt.Equal(b.at(31)) {
		t.Errorf("released record: %s %q updated %s", r.Status, r.LastError, r.UpdatedAt)
	}
	if got := b.get(t, "k", 31); got.Status != lambdaidem.StatusFailed || got.Fence != held.Lease.Fence {
		t.Errorf("stored: %s fence %+v, want FAILED with the fence kept", got.Status, got.Fence)
	}
}

// TestReleaseRefusals: a release never applies to a record other than the
// one the operator read.
func TestReleaseRefusals(t *testing.T) {
	t.Parallel()
	b, a := adminSetup(t)
	ctx := t.Context()
	stale := b.mustClaim(t, b.claimReq("taken", 0))
	b.mustClaim(t, b.claimReq("taken", 40)) // takeover: new token

	done := b.mustClaim(t, b.claimReq("done", 0))
	if err := b.store.Complete(ctx, lambdaidem.CompleteRequest{Lease: done.Lease, Now: b.at(1), ExpiresAt: b.at(3600)}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, key, token string
		now              int
		want             error
	}{
		{"claimed in between", "taken", stale.Lease.Token, 100, dynamo.ErrRecordChanged},
		{"completed", "done", done.Lease.Token, 100, dynamo.ErrNotInProgress},
		{"absent", "nothing", "tok", 100, lambdaidem.ErrNotFound},
		{"expired", "done", done.Lease.Token, 7200, lambdaidem.ErrNotFound},
	} {
		_, err := a.Release(ctx, dynamo.ReleaseRequest{Namespace: b.ns, Key: tc.key, Token: tc.token, Now: b.at(tc.now), Force: true})
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := a.Release(ctx, dynamo.ReleaseRequest{Namespace: b.ns, Key: "taken", Now: b.at(100)}); !errors.Is(err, dynamo.ErrInvalidKey) {
		t.Errorf("release without token: %v, want ErrInvalidKey", err)
	}
}

// TestReleaseLostResponse: the SDK's retry of a release that applied is
// recognised by the new token, not reported as a changed record.
func TestReleaseLostResponse(t *testing.T) {
	t.Parallel()
	b, a := adminSetup(t)
	held := b.mustClaim(t, b.claimReq("k", 0))
	b.proxy.Inject(faultproxy.Fault{Match: faultproxy.Op("UpdateItem"), Action: faultproxy.DropResponse, Times: 1})
	r, err := a.Release(t.Context(), dynamo.ReleaseRequest{Namespace: b.ns, Key: "k", Token: held.Lease.Token, Now: b.at(31)})
	if err != nil {
		t.Fatalf("Release with a lost response: %v", err)
	}
	if b.proxy.Applied(faultproxy.DropResponse) != 1 {
		t.Fatal("the response was not dropped")
	}
	if r.Status != lambdaidem.StatusFailed {
		t.Errorf("status %s, want FAILED", r.Status)
	}
}

func TestForget(t *testing.T) {
	t.Parallel()
	b, a := adminSetup(t)
	ctx := t.Context()
	b.mustClaim(t, b.claimReq("running", 0)) // lease until 30
	b.mustClaim(t, b.claimReq("stuck", 0))
	done := b.mustClaim(t, b.claimReq("done", 0))
	if err := b.store.Complete(ctx, lambdaidem.CompleteRequest{Lease: done.Lease, Now: b.at(1), ExpiresAt: b.at(3600)}); err != nil {
		t.Fatal(err)
	}

	r, err := a.Forget(ctx, dynamo.ForgetRequest{Namespace: b.ns, Key: "running", Now: b.at(10)})
	if !errors.Is(err, dynamo.ErrLeaseValid) || r.Status != lambdaidem.StatusInProgress {
		t.Fatalf("Forget of a valid lease: %v (record %s), want ErrLeaseValid", err, r.Status)
	}
	b.get(t, "running", 10) // still there

	if r, err = a.Forget(ctx, dynamo.ForgetRequest{Namespace: b.ns, Key: "running", Now: b.at(10), Force: true}); err != nil || r.Key != "running" {
		t.Fatalf("forced Forget: %v %+v", err, r)
	}
	if r, err = a.Forget(ctx, dynamo.ForgetRequest{Namespace: b.ns, Key: "stuck", Now: b.at(31)}); err != nil || r.Status != lambdaidem.StatusInProgress {
		t.Fatalf("Forget of an expired lease: %v %+v", err, r)
	}
	if r, err = a.Forget(ctx, dynamo.ForgetRequest{Namespace: b.ns, Key: "done", Now: b.at(10)}); err != nil || r.Status != lambdaidem.StatusCompleted {
		t.Fatalf("Forget of a completed record: %v %+v", err, r)
	}
	for _, k := range []string{"running", "stuck", "done"} {
		if _, err := b.store.Get(ctx, lambdaidem.GetRequest{Namespace: b.ns, Key: k, Now: b.at(40)}); !errors.Is(err, lambdaidem.ErrNotFound) {
			t.Errorf("Get(%s) after Forget: %v, want ErrNotFound", k, err)
		}
	}
	if _, err := a.Forget(ctx, dynamo.ForgetRequest{Namespace: b.ns, Key: "done", Now: b.at(10)}); !errors.Is(err, lambdaidem.ErrNotFound) {
		t.Errorf("second Forget: %v, want ErrNotFound", err)
	}
	// The forgotten key is claimed afresh.
	if res := b.mustClaim(t, b.claimReq("done", 50)); res.Previous != "" || res.Lease.Attempt != 1 {
		t.Errorf("claim after Forget: previous %q attempt %d, want a fresh generation", res.Previous, res.Lease.Attempt)
	}
}

func TestCount(t *testing.T) {
	t.Parallel()
	b, a := adminSetup(t)
	ctx := t.Context()
	// ns: 2 running (one stuck), 1 failed, 1 dead-lettered, 3 completed;
	// other: 1 failed, 1 completed.
	b.mustClaim(t, b.claimReq("run", 100))
	b.mustClaim(t, b.claimReq("stuck", 0))
	f := b.mustClaim(t, b.claimReq("fail", 0))
	if err := b.store.Fail(ctx, lambdaidem.FailRequest{Lease: f.Lease, Now: b.at(1), Error: "e", ExpiresAt: b.at(3600)}); err != nil {
		t.Fatal(err)
	}
	d := b.mustClaim(t, b.claimReq("dead", 0))
	if err := b.store.DeadLetter(ctx, lambdaidem.DeadLetterRequest{Lease: d.Lease, Now: b.at(1), Reason: lambdaidem.ReasonPoison, ExpiresAt: b.at(3600)}); err != nil {
		t.Fatal(err)
	}
	complete := func(ns, key string) {
		req := b.claimReq(key, 0)
		req.Namespace = ns
		c := b.mustClaim(t, req)
		if err := b.store.Complete(ctx, lambdaidem.CompleteRequest{Lease: c.Lease, Now: b.at(1), ExpiresAt: b.at(3600)}); err != nil {
			t.Fatal(err)
		}
	}
	complete(b.ns, "c1")
	complete(b.ns, "c2")
	complete(b.ns, "c3")
	complete("other", "c1")
	of := b.claimReq("fail", 0)
	of.Namespace = "other"
	ol := b.mustClaim(t, of)
	if err := b.store.Fail(ctx, lambdaidem.FailRequest{Lease: ol.Lease, Now: b.at(1), ExpiresAt: b.at(3600)}); err != nil {
		t.Fatal(err)
	}

	now := b.at(110)
	for _, tc := range []struct {
		status lambdaidem.Status
		ns     string
		stuck  bool
		want   int
	}{
		{lambdaidem.StatusInProgress, b.ns, false, 2},
		{lambdaidem.StatusInProgress, b.ns, true, 1},
		{lambdaidem.StatusFailed, b.ns, false, 1},
		{lambdaidem.StatusFailed, "", false, 2},
		{lambdaidem.StatusDeadLettered, b.ns, false, 1},
		{lambdaidem.StatusCompleted, b.ns, false, 3},
		{lambdaidem.StatusCompleted, "", false, 4},
	} {
		req := dynamo.CountRequest{Status: tc.status, Namespace: tc.ns, Now: now}
		if tc.stuck {
			req.LeaseEndedBefore = now
		}
		var last dynamo.CountProgress
		req.Progress = func(p dynamo.CountProgress) { last = p }
		got, err := a.Count(ctx, req)
		if err != nil {
			t.Fatalf("Count(%s, %q): %v", tc.status, tc.ns, err)
		}
		if got != tc.want {
			t.Errorf("Count(%s, ns %q, stuck %t) = %d, want %d", tc.status, tc.ns, tc.stuck, got, tc.want)
		}
		if last.Pages < 1 || last.Counted != got || last.Scanned < got {
			t.Errorf("Count(%s): last progress %+v for %d", tc.status, last, got)
		}
	}
	// Expired records are not counted.
	if got, err := a.Count(ctx, dynamo.CountRequest{Status: lambdaidem.StatusCompleted, Now: b.at(7200)}); err != nil || got != 0 {
		t.Errorf("Count of expired records: %d, %v", got, err)
	}
	if _, err := a.Count(ctx, dynamo.CountRequest{Status: "NOPE"}); err == nil {
		t.Error("Count of an unknown status: no error")
	}
}
