package lambdaidem_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

type order struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

type receipt struct {
	Charge string `json:"charge"`
	Run    int32  `json:"run"`
}

func TestWrapStoresAndReplaysTheResult(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var runs atomic.Int32
	charge := lambdaidem.Wrap(b.store, func(ctx context.Context, o order) (receipt, error) {
		l, ok := lambdaidem.LeaseFromContext(ctx)
		if !ok || l.Attempt != 1 || l.Token == "" {
			t.Errorf("lease on the context: %+v %v", l, ok)
		}
		return receipt{Charge: "ch-" + o.ID, Run: runs.Add(1)}, nil
	}, b.opts(lambdaidem.WithKeyJSONField("id"))...)
	first, err := charge(context.Background(), order{ID: "o1", Amount: 5})
	if err != nil {
		t.Fatal(err)
	}
	again, err := charge(context.Background(), order{ID: "o1", Amount: 5})
	if err != nil {
		t.Fatal(err)
	}
	if again != first || runs.Load() != 1 {
		t.Fatalf("replay %+v, first %+v, runs %d", again, first, runs.Load())
	}
	if _, err := charge(context.Background(), order{ID: "o1", Amount: 6}); !errors.Is(err, lambdaidem.ErrKeyConflict) {
		t.Fatalf("different payload: %v, want ErrKeyConflict", err)
	}
}

func TestWrapWithTypedKeyAndDefaultKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var runs atomic.Int32
	f := func(ctx context.Context, o order) (int32, error) { return runs.Add(1), nil }
	byID := lambdaidem.Wrap(b.store, f, b.opts(lambdaidem.WithNamespace("typed"),
		lambdaidem.WithWrapKey(func(o order) (string, error) { return "order-" + o.ID, nil }))...)
	if _, err := byID(context.Background(), order{ID: "x"}); err != nil {
		t.Fatal(err)
	}
	r, err := b.store.Get(context.Background(), lambdaidem.GetRequest{Namespace: "typed", Key: "order-x", Now: b.clock.Now()})
	if err != nil || r.Status != lambdaidem.StatusCompleted {
		t.Fatalf("typed key record: %+v %v", r, err)
	}
	whole := lambdaidem.Wrap(b.store, f, b.opts(lambdaidem.WithNamespace("whole"))...)
	_, _ = whole(context.Background(), order{ID: "y", Amount: 1})
	_, _ = whole(context.Background(), order{ID: "y", Amount: 1})
	_, _ = whole(context.Background(), order{ID: "y", Amount: 2})
	if runs.Load() != 3 {
		t.Fatalf("runs %d, want 3 (x once, y/1 once, y/2 once)", runs.Load())
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a key function of the wrong input type was accepted")
		}
	}()
	lambdaidem.Wrap(b.store, f, lambdaidem.WithWrapKey(func(s string) (string, error) { return s, nil }))
}

func TestWrapInProgressAndFailure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	entered, release := make(chan struct{}), make(chan struct{})
	slow := lambdaidem.Wrap(b.store, func(ctx context.Context, o order) (string, error) {
		close(entered)
		<-release
		return "", errors.New("card declined")
	}, b.opts(lambdaidem.WithKeyJSONField("id"), lambdaidem.WithLease(time.Minute))...)
	done := make(chan error)
	go func() { _, err := slow(context.Background(), order{ID: "o1"}); done <- err }()
	<-entered
	_, err := slow(context.Background(), order{ID: "o1"})
	var ip *lambdaidem.InProgressError
	if !errors.As(err, &ip) || !errors.Is(err, lambdaidem.ErrInProgress) || ip.RetryAfter <= 0 {
		t.Fatalf("concurrent call: %v, want InProgressError with a retry hint", err)
	}
	close(release)
	if err := <-done; err == nil || !strings.Contains(err.Error(), "declined") {
		t.Fatalf("first call: %v", err)
	}
	// A failure is retryable: the next call runs again.
	var ran bool
	retry := lambdaidem.Wrap(b.store, func(ctx context.Context, o order) (string, error) {
		ran = true
		l, _ := lambdaidem.LeaseFromContext(ctx)
		if l.Attempt != 2 {
			t.Errorf("attempt %d, want 2", l.Attempt)
		}
		return "ok", nil
	}, b.opts(lambdaidem.WithKeyJSONField("id"))...)
	if out, err := retry(context.Background(), order{ID: "o1"}); err != nil || out != "ok" || !ran {
		t.Fatalf("retry: %q %v ran=%v", out, err, ran)
	}
}

func TestWrapResultTooLargeLeavesNoLock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	big := true
	f := lambdaidem.Wrap(b.store, func(ctx context.Context, o order) (string, error) {
		if big {
			return strings.Repeat("x", 500*1024), nil
		}
		return "small", nil
	}, b.opts(lambdaidem.WithKeyJSONField("id"))...)
	if _, err := f(context.Background(), order{ID: "o1"}); !errors.Is(err, lambdaidem.ErrResultTooLarge) {
		t.Fatalf("err = %v, want ErrResultTooLarge", err)
	}
	if r := b.record(t, "o1"); r.Status != lambdaidem.StatusFailed {
		t.Fatalf("status %s: a too-large result must not leave the key locked", r.Status)
	}
	big = false
	if out, err := f(context.Background(), order{ID: "o1"}); err != nil || out != "small" {
		t.Fatalf("after a smaller result: %q %v", out, err)
	}
}

func TestWrapLateReplay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var runs atomic.Int32
	f := lambdaidem.Wrap(b.store, func(ctx context.Context, o order) (int32, error) { return runs.Add(1), nil },
		b.opts(lambdaidem.WithKeyJSONField("id"), lambdaidem.WithRetention(24*time.Hour), lambdaidem.WithResultRetention(time.Hour))...)
	if _, err := f(context.Background(), order{ID: "o1"}); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(2 * time.Hour)
	if _, err := f(context.Background(), order{ID: "o1"}); !errors.Is(err, lambdaidem.ErrLateReplay) {
		t.Fatalf("err = %v, want ErrLateReplay", err)
	}
	if runs.Load() != 1 {
		t.Fatal("a late replay re-ran the function")
	}
}
