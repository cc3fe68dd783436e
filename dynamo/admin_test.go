package dynamo_test

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/internal/faultproxy"
	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
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

// TestReleaseLostResponse: the SDK's retry of a release that applied is
// recognised by the new token, not reported as a changed record.
func TestReleaseLostResponse(t *testing.T) {
	t.Parallel()
	b, a := adminSetup(t)
	held := b.mustClaim(t, b.claimReq("k", 0))
	b.proxy.Inject(faultproxy.Fault{Match: faultproxy.Op("UpdateItem"), Action: faultproxy.DropResponse, Times: 1})
	r, err := a.Release(t.Context(), idemstore.ReleaseRequest{Namespace: b.ns, Key: "k", Token: held.Lease.Token, Now: b.at(31)})
	if err != nil {
		t.Fatalf("Release with a lost response: %v", err)
	}
	if b.proxy.Applied(faultproxy.DropResponse) != 1 {
		t.Fatal("the response was not dropped")
	}
	if r.Status != idemstore.StatusFailed {
		t.Errorf("status %s, want FAILED", r.Status)
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
	if err := b.store.Fail(ctx, idemstore.FailRequest{Lease: f.Lease, Now: b.at(1), Error: "e", ExpiresAt: b.at(3600)}); err != nil {
		t.Fatal(err)
	}
	d := b.mustClaim(t, b.claimReq("dead", 0))
	if err := b.store.DeadLetter(ctx, idemstore.DeadLetterRequest{Lease: d.Lease, Now: b.at(1), Reason: idemstore.ReasonPoison, ExpiresAt: b.at(3600)}); err != nil {
		t.Fatal(err)
	}
	complete := func(ns, key string) {
		req := b.claimReq(key, 0)
		req.Namespace = ns
		c := b.mustClaim(t, req)
		if err := b.store.Complete(ctx, idemstore.CompleteRequest{Lease: c.Lease, Now: b.at(1), ExpiresAt: b.at(3600)}); err != nil {
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
	if err := b.store.Fail(ctx, idemstore.FailRequest{Lease: ol.Lease, Now: b.at(1), ExpiresAt: b.at(3600)}); err != nil {
		t.Fatal(err)
	}

	now := b.at(110)
	for _, tc := range []struct {
		status idemstore.Status
		ns     string
		stuck  bool
		want   int
	}{
		{idemstore.StatusInProgress, b.ns, false, 2},
		{idemstore.StatusInProgress, b.ns, true, 1},
		{idemstore.StatusFailed, b.ns, false, 1},
		{idemstore.StatusFailed, "", false, 2},
		{idemstore.StatusDeadLettered, b.ns, false, 1},
		{idemstore.StatusCompleted, b.ns, false, 3},
		{idemstore.StatusCompleted, "", false, 4},
	} {
		req := idemstore.CountRequest{Status: tc.status, Namespace: tc.ns, Now: now, AllowScan: tc.status == idemstore.StatusCompleted}
		if tc.stuck {
			req.LeaseEndedBefore = now
		}
		var last idemstore.PageProgress
		req.Progress = func(p idemstore.PageProgress) { last = p }
		got, err := a.Count(ctx, req)
		if err != nil {
			t.Fatalf("Count(%s, %q): %v", tc.status, tc.ns, err)
		}
		if got != tc.want {
			t.Errorf("Count(%s, ns %q, stuck %t) = %d, want %d", tc.status, tc.ns, tc.stuck, got, tc.want)
		}
		if last.Pages < 1 || last.Matched != got || last.Read < got {
			t.Errorf("Count(%s): last progress %+v for %d", tc.status, last, got)
		}
	}
	// Expired records are not counted.
	if got, err := a.Count(ctx, idemstore.CountRequest{Status: idemstore.StatusCompleted, Now: b.at(7200), AllowScan: true}); err != nil || got != 0 {
		t.Errorf("Count of expired records: %d, %v", got, err)
	}
	if _, err := a.Count(ctx, idemstore.CountRequest{Status: "NOPE"}); !errors.Is(err, idemstore.ErrNotIndexed) {
		t.Errorf("Count of an unknown status: %v, want ErrNotIndexed", err)
	}
}
