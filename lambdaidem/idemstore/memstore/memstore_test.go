package memstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) idemstore.Store { return memstore.New() })
}

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func claimReq(key string) idemstore.ClaimRequest {
	return idemstore.ClaimRequest{
		Namespace:   "ns",
		Key:         key,
		PayloadHash: "h",
		MessageID:   "m",
		Now:         t0,
		LeaseUntil:  t0.Add(time.Minute),
		ExpiresAt:   t0.Add(time.Hour),
	}
}

func TestStatsCountsEveryOperation(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := memstore.New()
	c, err := s.Claim(ctx, claimReq("a"))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = s.Claim(ctx, claimReq("a")) // refused, still a call
	_ = s.Extend(ctx, idemstore.ExtendRequest{Lease: c.Lease, Now: t0, LeaseUntil: t0.Add(2 * time.Minute)})
	_ = s.Complete(ctx, idemstore.CompleteRequest{Lease: c.Lease, Now: t0, ExpiresAt: t0.Add(time.Hour)})
	_ = s.Fail(ctx, idemstore.FailRequest{Lease: c.Lease, Now: t0}) // lease lost, still a call
	_ = s.DeadLetter(ctx, idemstore.DeadLetterRequest{Lease: c.Lease, Now: t0})
	_, _ = s.Get(ctx, idemstore.GetRequest{Namespace: "ns", Key: "a", Now: t0})
	_, _ = s.Get(ctx, idemstore.GetRequest{Namespace: "ns", Key: "missing", Now: t0})
	_ = s.Delete(ctx, idemstore.DeleteRequest{Namespace: "ns", Key: "a"})
	_, _ = s.Get(ctx, idemstore.GetRequest{Namespace: "", Key: "a", Now: t0}) // invalid: not a call

	want := memstore.Stats{Claim: 2, Complete: 1, Fail: 1, DeadLetter: 1, Extend: 1, Get: 2, Delete: 1}
	if got := s.Stats(); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
	if got := s.Stats().Total(); got != 9 {
		t.Errorf("Total() = %d, want 9", got)
	}
}

func TestFaultFailsOperationAndRecordsNothing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := memstore.New()
	throttled := errors.New("throttled")
	var seen []string
	s.SetFault(func(op string) error {
		seen = append(seen, op)
		if op == memstore.OpClaim {
			return throttled
		}
		return nil
	})
	_, err := s.Claim(ctx, claimReq("a"))
	if !errors.Is(err, idemstore.ErrStoreUnavailable) || !errors.Is(err, throttled) {
		t.Fatalf("Claim under fault = %v, want ErrStoreUnavailable and the hook's error", err)
	}
	if _, err := s.Get(ctx, idemstore.GetRequest{Namespace: "ns", Key: "a", Now: t0}); !errors.Is(err, idemstore.ErrNotFound) {
		t.Fatalf("Get after a faulted claim = %v, want ErrNotFound", err)
	}
	if len(seen) != 2 || seen[0] != memstore.OpClaim || seen[1] != memstore.OpGet {
		t.Errorf("hook saw %q, want [claim get]", seen)
	}
	if got := s.Stats().Claim; got != 1 {
		t.Errorf("Stats().Claim = %d, want 1: a faulted request still counts", got)
	}

	// A fault on completion leaves the lease in place, and lifting it lets
	// the same lease complete.
	s.SetFault(nil)
	c, err := s.Claim(ctx, claimReq("a"))
	if err != nil || !c.Claimed {
		t.Fatalf("Claim after removing the hook = %+v, %v", c, err)
	}
	s.SetFault(func(op string) error {
		if op == memstore.OpComplete {
			return throttled
		}
		return nil
	})
	done := idemstore.CompleteRequest{Lease: c.Lease, Now: t0, Result: []byte("r"), ExpiresAt: t0.Add(time.Hour)}
	if err := s.Complete(ctx, done); !errors.Is(err, idemstore.ErrStoreUnavailable) {
		t.Fatalf("Complete under fault = %v, want ErrStoreUnavailable", err)
	}
	r, err := s.Get(ctx, idemstore.GetRequest{Namespace: "ns", Key: "a", Now: t0})
	if err != nil || r.Status != idemstore.StatusInProgress {
		t.Fatalf("after a faulted Complete: %s, %v; want IN_PROGRESS", r.Status, err)
	}
	s.SetFault(nil)
	if err := s.Complete(ctx, done); err != nil {
		t.Fatalf("Complete after the fault lifted: %v", err)
	}
}

func TestFaultHookMayBlock(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := memstore.New()
	entered := make(chan struct{})
	release := make(chan struct{})
	s.SetFault(func(op string) error {
		if op == memstore.OpClaim {
			close(entered)
			<-release
		}
		return nil
	})
	var wg sync.WaitGroup
	wg.Add(1)
	var claimed bool
	go func() {
		defer wg.Done()
		c, err := s.Claim(ctx, claimReq("a"))
		claimed = err == nil && c.Claimed
	}()
	<-entered
	// The held-back claim holds no lock: other operations go on.
	if _, err := s.Get(ctx, idemstore.GetRequest{Namespace: "ns", Key: "a", Now: t0}); !errors.Is(err, idemstore.ErrNotFound) {
		t.Errorf("Get while a claim is held back = %v, want ErrNotFound", err)
	}
	close(release)
	wg.Wait()
	if !claimed {
		t.Error("the held-back claim did not succeed")
	}
}

func TestDoneContextFails(t *testing.T) {
	t.Parallel()
	s := memstore.New()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := s.Claim(ctx, claimReq("a"))
	if !errors.Is(err, idemstore.ErrStoreUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Claim with a done context = %v, want ErrStoreUnavailable and context.Canceled", err)
	}
	if _, err := s.Get(t.Context(), idemstore.GetRequest{Namespace: "ns", Key: "a", Now: t0}); !errors.Is(err, idemstore.ErrNotFound) {
		t.Fatalf("a claim with a done context recorded something: %v", err)
	}
}

func TestClaimKeepsNoReferenceToCallerBytes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := memstore.New()
	c, _ := s.Claim(ctx, claimReq("a"))
	result := []byte("abc")
	if err := s.Complete(ctx, idemstore.CompleteRequest{Lease: c.Lease, Now: t0, Result: result, ExpiresAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	result[0] = 'X'
	dup, _ := s.Claim(ctx, claimReq("a"))
	dup.Record.Result[1] = 'Y'
	r, _ := s.Get(ctx, idemstore.GetRequest{Namespace: "ns", Key: "a", Now: t0})
	if string(r.Result) != "abc" {
		t.Errorf("stored result = %q, want \"abc\"", r.Result)
	}
}

// The decorator on the in-memory store costs what it costs on the real
// stores: first delivery 2 requests, duplicate 1, cached duplicate 0,
// handler failure 2.
func TestDecoratorRequestsPerMessage(t *testing.T) {
	t.Parallel()
	s := memstore.New()
	base := 0
	storetest.RequestsPerMessage(t, s, "orders",
		func() { base = s.Stats().Total() },
		func() int { return s.Stats().Total() - base })
}

// A dead-letter copy whose final mark the store did not take is never
// stranded (storetest.UnwrittenFinalMark).
func TestDecoratorUnwrittenFinalMark(t *testing.T) {
	t.Parallel()
	storetest.UnwrittenFinalMark(t, memstore.New(), "orders")
}
