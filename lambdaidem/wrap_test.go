package lambdaidem_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
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
	}, b.wrapOpts(lambdaidem.WithKeyJSONField("id"))...)
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
	byID := lambdaidem.Wrap(b.store, f, b.wrapOpts(lambdaidem.WithNamespace("typed"),
		lambdaidem.WithWrapKey(func(o order) (string, error) { return "order-" + o.ID, nil }))...)
	if _, err := byID(context.Background(), order{ID: "x"}); err != nil {
		t.Fatal(err)
	}
	r, err := b.store.Get(context.Background(), idemstore.GetRequest{Namespace: "typed", Key: "order-x", Now: b.clock.Now()})
	if err != nil || r.Status != lambdaidem.StatusCompleted {
		t.Fatalf("typed key record: %+v %v", r, err)
	}
	whole := lambdaidem.Wrap(b.store, f, b.wrapOpts(lambdaidem.WithNamespace("whole"))...)
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
	}, b.wrapOpts(lambdaidem.WithKeyJSONField("id"), lambdaidem.WithLease(time.Minute))...)
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
	}, b.wrapOpts(lambdaidem.WithKeyJSONField("id"))...)
	if out, err := retry(context.Background(), order{ID: "o1"}); err != nil || out != "ok" || !ran {
		t.Fatalf("retry: %q %v ran=%v", out, err, ran)
	}
}

// A successful call whose result cannot be stored completes its key: the
// first call returns the result, a repeat gets ErrResultNotStored and the
// function does not run again.
func TestWrapResultNotStoredCompletesTheKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		result any
	}{
		{"too large", strings.Repeat("x", 500*1024)},
		{"not JSON-encodable", math.NaN()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			var runs atomic.Int32
			f := lambdaidem.Wrap(b.store, func(ctx context.Context, o order) (any, error) {
				runs.Add(1)
				return tc.result, nil
			}, b.wrapOpts(lambdaidem.WithKeyJSONField("id"))...)
			out, err := f(context.Background(), order{ID: "o1"})
			if err != nil {
				t.Fatalf("first call: %v; a call that succeeded must return its result", err)
			}
			if s, ok := tc.result.(string); ok && out != s {
				t.Fatalf("first call returned %.20v, want the function's result", out)
			}
			if r := b.record(t, "o1"); r.Status != lambdaidem.StatusCompleted {
				t.Fatalf("status %s, want COMPLETED: success must never be recorded as failure", r.Status)
			}
			if _, err := f(context.Background(), order{ID: "o1"}); !errors.Is(err, lambdaidem.ErrResultNotStored) {
				t.Fatalf("repeat: %v, want ErrResultNotStored", err)
			}
			if n := runs.Load(); n != 1 {
				t.Fatalf("the function ran %d times, want 1", n)
			}
		})
	}
}

// smallStore is a store that holds results of at most limit bytes, like a
// store whose items are smaller than WithMaxResultBytes allows.
type smallStore struct {
	lambdaidem.Store // an in-memory store; its own declarations hidden: this double commits what it likes
	limit            int
}

func (s smallStore) Complete(ctx context.Context, req idemstore.CompleteRequest) error {
	if len(req.Result) > s.limit {
		return fmt.Errorf("small store: %w", lambdaidem.ErrResultTooLarge)
	}
	return s.Store.Complete(ctx, req)
}

func TestWrapResultTheStoreRefusesCompletesTheKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store := smallStore{Store: b.store, limit: 100}
	var runs atomic.Int32
	f := lambdaidem.Wrap(store, func(ctx context.Context, o order) (string, error) {
		runs.Add(1)
		return strings.Repeat("y", 200), nil
	}, b.wrapOpts(lambdaidem.WithKeyJSONField("id"))...)
	if out, err := f(context.Background(), order{ID: "o1"}); err != nil || len(out) != 200 {
		t.Fatalf("first call: %d bytes, %v", len(out), err)
	}
	if _, err := f(context.Background(), order{ID: "o1"}); !errors.Is(err, lambdaidem.ErrResultNotStored) {
		t.Fatalf("repeat: %v, want ErrResultNotStored", err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the function ran %d times, want 1", n)
	}
}

// Integers above 2^53 replay exactly, wherever they sit in the result.
func TestWrapReplayKeepsLargeIntegers(t *testing.T) {
	t.Parallel()
	const big = 9007199254740993 // 2^53 + 1: float64 rounds it to ...992
	type typed struct {
		N int64          `json:"n"`
		U uint64         `json:"u"`
		A any            `json:"a"`
		M map[string]any `json:"m"`
	}
	check := func(t *testing.T, name string, run func(b *bundle) (first, replay any, err error)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			first, replay, err := run(b)
			if err != nil {
				t.Fatal(err)
			}
			fj, _ := json.Marshal(first)
			rj, _ := json.Marshal(replay)
			if string(fj) != string(rj) {
				t.Fatalf("replay encodes as %s, first call as %s", rj, fj)
			}
			if !strings.Contains(string(rj), "9007199254740993") {
				t.Fatalf("replay %s lost the integer", rj)
			}
		})
	}
	twice := func(b *bundle, f func(context.Context, order) (any, error)) (any, any, error) {
		first, err := f(context.Background(), order{ID: "o1"})
		if err != nil {
			return nil, nil, err
		}
		again, err := f(context.Background(), order{ID: "o1"})
		return first, again, err
	}
	wrapAny := func(b *bundle, v any) func(context.Context, order) (any, error) {
		return lambdaidem.Wrap(b.store, func(context.Context, order) (any, error) { return v, nil },
			b.wrapOpts(lambdaidem.WithKeyJSONField("id"))...)
	}
	check(t, "any", func(b *bundle) (any, any, error) { return twice(b, wrapAny(b, int64(big))) })
	check(t, "[]any", func(b *bundle) (any, any, error) { return twice(b, wrapAny(b, []any{uint64(big), 1.5})) })
	check(t, "nested", func(b *bundle) (any, any, error) {
		return twice(b, wrapAny(b, map[string]any{"x": []any{map[string]any{"id": int64(big)}}}))
	})
	check(t, "map[string]any", func(b *bundle) (any, any, error) {
		f := lambdaidem.Wrap(b.store, func(context.Context, order) (map[string]any, error) {
			return map[string]any{"id": int64(big), "amount": 12.25}, nil
		}, b.wrapOpts(lambdaidem.WithKeyJSONField("id"))...)
		first, err := f(context.Background(), order{ID: "o1"})
		if err != nil {
			return nil, nil, err
		}
		again, err := f(context.Background(), order{ID: "o1"})
		if n, ok := again["id"].(json.Number); !ok || n.String() != "9007199254740993" {
			t.Errorf("replayed id is %T %v, want json.Number 9007199254740993", again["id"], again["id"])
		}
		return first, again, err
	})
	check(t, "typed struct", func(b *bundle) (any, any, error) {
		want := typed{N: big, U: big + 2, A: int64(big), M: map[string]any{"k": uint64(big)}}
		f := lambdaidem.Wrap(b.store, func(context.Context, order) (typed, error) { return want, nil },
			b.wrapOpts(lambdaidem.WithKeyJSONField("id"))...)
		first, err := f(context.Background(), order{ID: "o1"})
		if err != nil {
			return nil, nil, err
		}
		again, err := f(context.Background(), order{ID: "o1"})
		if again.N != big || again.U != big+2 {
			t.Errorf("typed fields replayed as %d, %d", again.N, again.U)
		}
		return first, again, err
	})
}

// A panicking key or hash function fails that call with ErrMissingKey; it
// never crashes the caller.
func TestWrapPanickingKeyFunction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var runs atomic.Int32
	fn := func(context.Context, order) (int32, error) { return runs.Add(1), nil }
	byKey := lambdaidem.Wrap(b.store, fn, b.wrapOpts(lambdaidem.WithWrapKey(func(o order) (string, error) {
		var m map[string]string
		m[o.ID] = "boom" // assignment to a nil map panics
		return o.ID, nil
	}))...)
	var pe *lambdaidem.PanicError
	if _, err := byKey(context.Background(), order{ID: "o1"}); !errors.Is(err, lambdaidem.ErrMissingKey) || !errors.As(err, &pe) {
		t.Fatalf("panicking key function: %v, want ErrMissingKey with the panic", err)
	}
	byHash := lambdaidem.Wrap(b.store, fn, b.wrapOpts(lambdaidem.WithPayloadHash(func([]byte) (string, error) { panic("hash") }))...)
	if _, err := byHash(context.Background(), order{ID: "o1"}); !errors.Is(err, lambdaidem.ErrMissingKey) || !errors.As(err, &pe) {
		t.Fatalf("panicking hash function: %v, want ErrMissingKey with the panic", err)
	}
	if runs.Load() != 0 {
		t.Fatal("the function ran without a key")
	}
}

func TestWrapLateReplay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var runs atomic.Int32
	f := lambdaidem.Wrap(b.store, func(ctx context.Context, o order) (int32, error) { return runs.Add(1), nil },
		b.wrapOpts(lambdaidem.WithKeyJSONField("id"), lambdaidem.WithRetention(24*time.Hour), lambdaidem.WithResultRetention(time.Hour))...)
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
