package dynamo_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/internal/faultproxy"
	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// wantRequests fails the test unless the proxy saw exactly want, per
// operation, since the last reset; then it resets.
func wantRequests(t *testing.T, p *faultproxy.Proxy, what string, want map[string]int) {
	t.Helper()
	got := map[string]int{}
	for target, n := range p.Counts() {
		got[faultproxy.Request{Target: target}.Operation()] += n
	}
	for op, n := range want {
		if got[op] != n {
			t.Errorf("%s: %d %s requests, want %d (all: %v)", what, got[op], op, n, got)
		}
	}
	for op, n := range got {
		if _, ok := want[op]; !ok {
			t.Errorf("%s: %d unexpected %s requests (all: %v)", what, n, op, got)
		}
	}
	p.ResetCounts()
}

// TestRequestsPerTransition pins the request count of every transition, as
// DynamoDB sees them through the proxy.
func TestRequestsPerTransition(t *testing.T) {
	t.Parallel()
	b := setup(t, testTuning)
	ctx := t.Context()

	// First delivery: claim 1, complete 1.
	c := b.mustClaim(t, b.claimReq("a", 0))
	wantRequests(t, b.proxy, "claim of an absent key", map[string]int{"UpdateItem": 1})
	if err := b.store.Complete(ctx, idemstore.CompleteRequest{Lease: c.Lease, Now: b.at(1), Result: []byte("ok"), ExpiresAt: b.at(3600)}); err != nil {
		t.Fatal(err)
	}
	wantRequests(t, b.proxy, "complete", map[string]int{"UpdateItem": 1})

	// Duplicate: refused claim 1 (the record comes back with the refusal).
	res, err := b.store.Claim(ctx, b.claimReq("a", 2))
	if err != nil || res.Claimed || res.Record.Status != idemstore.StatusCompleted || string(res.Record.Result) != "ok" {
		t.Fatalf("duplicate claim = %+v, %v", res, err)
	}
	wantRequests(t, b.proxy, "refused claim", map[string]int{"UpdateItem": 1})

	// Handler failure: claim 1, fail 1; the retry's claim of FAILED 1.
	c = b.mustClaim(t, b.claimReq("f", 0))
	if err := b.store.Fail(ctx, idemstore.FailRequest{Lease: c.Lease, Now: b.at(1), Error: "boom", ExpiresAt: b.at(3600)}); err != nil {
		t.Fatal(err)
	}
	wantRequests(t, b.proxy, "claim and fail", map[string]int{"UpdateItem": 2})
	c = b.mustClaim(t, b.claimReq("f", 2))
	if c.Previous != idemstore.StatusFailed || c.Lease.Attempt != 2 {
		t.Fatalf("re-claim of FAILED: previous %q attempt %d", c.Previous, c.Lease.Attempt)
	}
	wantRequests(t, b.proxy, "claim of FAILED", map[string]int{"UpdateItem": 1})

	// Dead-letter and extend: 1 each.
	if err := b.store.Extend(ctx, idemstore.ExtendRequest{Lease: c.Lease, Now: b.at(3), LeaseUntil: b.at(60)}); err != nil {
		t.Fatal(err)
	}
	if err := b.store.DeadLetter(ctx, idemstore.DeadLetterRequest{Lease: c.Lease, Now: b.at(4), Reason: idemstore.ReasonPoison, MessageID: "m-f", DeadLetterMessageID: "d-1", ExpiresAt: b.at(3600)}); err != nil {
		t.Fatal(err)
	}
	wantRequests(t, b.proxy, "extend and dead-letter", map[string]int{"UpdateItem": 2})

	// Expired record: the refused claim, then the re-creating PutItem.
	c = b.mustClaim(t, b.claimReq("a", 7200))
	if c.Previous != "" || c.Lease.Attempt != 1 || c.Lease.Fence.Claim != 1 {
		t.Fatalf("re-created: previous %q attempt %d claim %d", c.Previous, c.Lease.Attempt, c.Lease.Fence.Claim)
	}
	wantRequests(t, b.proxy, "claim of an expired record", map[string]int{"UpdateItem": 1, "PutItem": 1})

	// Takeover of an abandoned lease: the refused claim, then the takeover.
	b.mustClaim(t, b.claimReq("t", 0))
	b.proxy.ResetCounts()
	c = b.mustClaim(t, b.claimReq("t", 100))
	if c.Previous != idemstore.StatusInProgress || c.Record.Takeovers != 1 || c.Lease.Attempt != 2 {
		t.Fatalf("takeover: previous %q takeovers %d attempt %d", c.Previous, c.Record.Takeovers, c.Lease.Attempt)
	}
	wantRequests(t, b.proxy, "takeover", map[string]int{"UpdateItem": 2})

	// Held by a valid lease: refused in 1.
	res, err = b.store.Claim(ctx, b.claimReq("t", 101))
	if err != nil || res.Claimed {
		t.Fatalf("claim of a held key = %+v, %v", res, err)
	}
	wantRequests(t, b.proxy, "claim of a held key", map[string]int{"UpdateItem": 1})

	// A stale owner's complete: refused in 1, no read.
	stale := idemstore.Lease{Namespace: b.ns, Key: "t", Token: "not-mine"}
	err = b.store.Complete(ctx, idemstore.CompleteRequest{Lease: stale, Now: b.at(102), ExpiresAt: b.at(3600)})
	if !errors.Is(err, idemstore.ErrLeaseLost) {
		t.Fatalf("stale complete = %v, want ErrLeaseLost", err)
	}
	wantRequests(t, b.proxy, "stale complete", map[string]int{"UpdateItem": 1})
}

// TestLostResponses drops the response of writes that applied: the SDK
// retries, the retry fails its condition against our own item, and the
// store recognises its own success.
func TestLostResponses(t *testing.T) {
	t.Parallel()
	b := setup(t, testTuning)
	ctx := t.Context()
	drop := func(op string) {
		b.proxy.Inject(faultproxy.Fault{Match: faultproxy.Op(op), Action: faultproxy.DropResponse, Times: 1})
	}

	t.Run("claim and complete", func(t *testing.T) {
		drop("UpdateItem")
		c := b.mustClaim(t, b.claimReq("k", 0))
		if c.Lease.Attempt != 1 || c.Previous != "" {
			t.Errorf("claim after lost response: attempt %d previous %q, want 1 and absent", c.Lease.Attempt, c.Previous)
		}
		wantRequests(t, b.proxy, "claim with a lost response", map[string]int{"UpdateItem": 2})

		drop("UpdateItem")
		if err := b.store.Complete(ctx, idemstore.CompleteRequest{Lease: c.Lease, Now: b.at(1), Result: []byte("r"), ExpiresAt: b.at(3600)}); err != nil {
			t.Fatalf("complete after lost response: %v", err)
		}
		wantRequests(t, b.proxy, "complete with a lost response", map[string]int{"UpdateItem": 2})
		r := b.get(t, "k", 2)
		if r.Status != idemstore.StatusCompleted || r.Attempts != 1 || r.LeaseToken != c.Lease.Token || string(r.Result) != "r" {
			t.Errorf("record = %+v", r)
		}
	})

	t.Run("fail and re-claim", func(t *testing.T) {
		c := b.mustClaim(t, b.claimReq("f", 0))
		drop("UpdateItem")
		if err := b.store.Fail(ctx, idemstore.FailRequest{Lease: c.Lease, Now: b.at(1), Error: "e", ExpiresAt: b.at(3600)}); err != nil {
			t.Fatalf("fail after lost response: %v", err)
		}
		drop("UpdateItem")
		c2 := b.mustClaim(t, b.claimReq("f", 2))
		if c2.Previous != idemstore.StatusFailed || c2.Lease.Attempt != 2 {
			t.Errorf("re-claim after lost response: previous %q attempt %d", c2.Previous, c2.Lease.Attempt)
		}
		b.proxy.ResetCounts()
	})

	t.Run("takeover", func(t *testing.T) {
		b.mustClaim(t, b.claimReq("t", 0))
		// The first UpdateItem is refused normally; drop the second's
		// response (the takeover).
		b.proxy.ResetCounts()
		b.proxy.Inject(faultproxy.Fault{Match: nth("UpdateItem", 2), Action: faultproxy.DropResponse, Times: 1})
		c := b.mustClaim(t, b.claimReq("t", 100))
		if c.Previous != idemstore.StatusInProgress || c.Record.Takeovers != 1 || c.Lease.Attempt != 2 {
			t.Errorf("takeover after lost response: previous %q takeovers %d attempt %d", c.Previous, c.Record.Takeovers, c.Lease.Attempt)
		}
		if b.proxy.Applied(faultproxy.DropResponse) != 1 {
			t.Errorf("the takeover's response was not dropped")
		}
		wantRequests(t, b.proxy, "takeover with a lost response", map[string]int{"UpdateItem": 3})
	})

	t.Run("re-create", func(t *testing.T) {
		b.mustClaim(t, b.claimReq("x", 0))
		drop("PutItem")
		c := b.mustClaim(t, b.claimReq("x", 7200))
		if c.Previous != "" || c.Lease.Attempt != 1 {
			t.Errorf("re-create after lost response: previous %q attempt %d", c.Previous, c.Lease.Attempt)
		}
		if got := b.proxy.Count("PutItem"); got != 2 {
			t.Errorf("%d PutItem requests, want 2 (the lost one and its retry)", got)
		}
		b.proxy.ResetCounts()
	})
}

// nth matches the n-th request (from 1) of operation op seen while the
// fault is armed. The proxy calls Match under its lock.
func nth(op string, n int) func(faultproxy.Request) bool {
	seen := 0
	return func(r faultproxy.Request) bool {
		if r.Operation() != op {
			return false
		}
		seen++
		return seen == n
	}
}

// TestStoreUnavailable: throttling, 5xx, hangs and a canceled context are
// ErrStoreUnavailable, and nothing is recorded.
//
// The attempts are counted in the client: an attempt abandoned at its
// timeout may reach the proxy after the next subtest began, or not at all
// when the machine is slow to send it, so the proxy's count is not the
// client's.
func TestStoreUnavailable(t *testing.T) {
	t.Parallel()
	tuning := testTuning
	tuning.AttemptTimeout = 300 * time.Millisecond
	b := setup(t, tuning)
	var attempts atomic.Int32
	b.store = dynamo.New(testenv.DynamoDB(t, dynamo.ClientOptions(tuning), func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(b.proxy.URL())
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			// After the retry middleware: once per attempt.
			return st.Finalize.Add(middleware.FinalizeMiddlewareFunc("countUpdateItemAttempts",
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					if awsmiddleware.GetOperationName(ctx) == "UpdateItem" {
						attempts.Add(1)
					}
					return next.HandleFinalize(ctx, in)
				}), middleware.After)
		})
	}), b.table)
	ctx := t.Context()
	for _, tc := range []struct {
		name  string
		fault faultproxy.Fault
	}{
		{"throttling", faultproxy.Throttle(faultproxy.Op("UpdateItem"), 0)},
		{"500", faultproxy.ServerError(faultproxy.Op("UpdateItem"), 0)},
		{"hang", faultproxy.Fault{Match: faultproxy.Op("UpdateItem"), Action: faultproxy.Hang}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b.proxy.Inject(tc.fault)
			defer b.proxy.ClearFaults()
			_, err := b.store.Claim(ctx, b.claimReq(tc.name, 0))
			if !errors.Is(err, idemstore.ErrStoreUnavailable) {
				t.Fatalf("Claim = %v, want ErrStoreUnavailable", err)
			}
			if got := attempts.Swap(0); got != dynamo.DefaultMaxAttempts {
				t.Errorf("%d attempts, want %d", got, dynamo.DefaultMaxAttempts)
			}
			_, err = b.store.Get(ctx, idemstore.GetRequest{Namespace: b.ns, Key: tc.name, Now: b.at(1)})
			if !errors.Is(err, idemstore.ErrNotFound) {
				t.Errorf("after the failed claim Get = %v, want ErrNotFound", err)
			}
		})
	}

	t.Run("canceled context", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := b.store.Claim(cctx, b.claimReq("canceled", 0))
		if !errors.Is(err, idemstore.ErrStoreUnavailable) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Claim = %v, want ErrStoreUnavailable wrapping context.Canceled", err)
		}
	})

	t.Run("one failed attempt is retried", func(t *testing.T) {
		b.proxy.Inject(faultproxy.ServerError(faultproxy.Op("UpdateItem"), 1))
		b.mustClaim(t, b.claimReq("retried", 0))
	})
}

// TestNoRetryLockOut: after an outage long enough to empty the SDK's default
// retry quota, a call whose first attempt fails is still retried (the
// tuning turns the quota off), so recovery is immediate.
func TestNoRetryLockOut(t *testing.T) {
	t.Parallel()
	b := setup(t, testTuning)
	ctx := t.Context()
	// The default quota holds 500 tokens at 5 per retry: 100 retries.
	// 60 calls of 3 attempts make 120.
	b.proxy.Inject(faultproxy.ServerError(faultproxy.Op("GetItem"), 0))
	for range 60 {
		if _, err := b.store.Get(ctx, idemstore.GetRequest{Namespace: b.ns, Key: "k", Now: b.t0}); !errors.Is(err, idemstore.ErrStoreUnavailable) {
			t.Fatalf("Get during the outage = %v", err)
		}
	}
	b.proxy.ClearFaults()
	b.proxy.Inject(faultproxy.ServerError(faultproxy.Op("UpdateItem"), 1))
	b.mustClaim(t, b.claimReq("k", 0))
	if got := b.proxy.Applied(faultproxy.Respond); got != 181 {
		t.Errorf("%d injected errors, want 181", got)
	}
}

// TestConnectionRefused: a store that cannot reach DynamoDB at all is
// unavailable, not broken.
func TestConnectionRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, testTuning)
	if err := b.proxy.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := b.store.Claim(t.Context(), b.claimReq("k", 0))
	if !errors.Is(err, idemstore.ErrStoreUnavailable) {
		t.Fatalf("Claim = %v, want ErrStoreUnavailable", err)
	}
}
