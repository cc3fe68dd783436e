package redisstore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
)

// scriptCalls records the number of arguments of every script call a
// client sends (EVALSHA or EVAL, the command's name included).
type scriptCalls struct {
	mu    sync.Mutex
	sizes []int
}

func (h *scriptCalls) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.record(cmd)
		return next(ctx, cmd)
	}
}

func (h *scriptCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.record(c)
		}
		return next(ctx, cmds)
	}
}

func (h *scriptCalls) record(cmd redis.Cmder) {
	if name := cmd.Name(); name == "evalsha" || name == "eval" {
		h.mu.Lock()
		h.sizes = append(h.sizes, len(cmd.Args()))
		h.mu.Unlock()
	}
}

// take returns the sizes recorded since the last take.
func (h *scriptCalls) take() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.sizes
	h.sizes = nil
	return s
}

// limited is a store with opts whose script calls are recorded, in a
// namespace of its own.
type limited struct {
	store *redisstore.Store
	calls *scriptCalls
	ns    string
	t0    time.Time
}

func newLimited(t *testing.T, opts ...redisstore.Option) *limited {
	t.Helper()
	client := newClient(t, addr(t))
	calls := &scriptCalls{}
	client.AddHook(calls)
	l := &limited{store: redisstore.New(client, "", opts...), calls: calls, ns: "limits-" + rand.Text()[:12], t0: time.Now().UTC().Truncate(time.Second)}
	if err := l.store.LoadScripts(t.Context()); err != nil {
		t.Fatal(err)
	}
	return l
}

func (l *limited) claim(t *testing.T, key string) idemstore.Lease {
	t.Helper()
	c, err := l.store.Claim(t.Context(), idemstore.ClaimRequest{Namespace: l.ns, Key: key, PayloadHash: "h", MessageID: "m-" + key,
		Now: l.t0, LeaseUntil: l.t0.Add(30 * time.Second), Grace: time.Second, ExpiresAt: l.t0.Add(time.Hour)})
	if err != nil || !c.Claimed {
		t.Fatalf("Claim(%s) = %+v, %v", key, c, err)
	}
	return c.Lease
}

func (l *limited) completion(lease idemstore.Lease, writes []any) idemstore.CompleteRequest {
	return idemstore.CompleteRequest{Lease: lease, Now: l.t0.Add(time.Second), ExpiresAt: l.t0.Add(time.Hour),
		ResultUntil: l.t0.Add(time.Minute), Result: []byte(strings.Repeat("r", 2000)), Writes: writes}
}

func (l *limited) commit(key string, writes []any) idemstore.CommitRequest {
	return idemstore.CommitRequest{Namespace: l.ns, Key: key, PayloadHash: "h", Token: "tok-" + key, Now: l.t0,
		Status: idemstore.StatusCompleted, ExpiresAt: l.t0.Add(time.Hour), ResultUntil: l.t0.Add(time.Minute),
		Result: []byte(strings.Repeat("r", 2000)), Writes: writes}
}

func values(n int, prefix string) []string {
	v := make([]string, n)
	for i := range v {
		v[i] = prefix + strconv.Itoa(i)
	}
	return v
}

// TestRequestLimitAtAdd: under the default limit (3,999 arguments a
// request, ElastiCache Serverless's), AddCompletionWrite's check refuses
// the command that would make a completion's request longer, with
// ErrRequestTooLarge, and takes every command before it; those commands
// then complete in a request within the limit, alone, optimistic or
// batched. A completion holding the refused command is refused before
// anything is sent.
func TestRequestLimitAtAdd(t *testing.T) {
	l := newLimited(t)
	check := l.store.Capabilities().CheckWrite
	lease := idemstore.Lease{Namespace: l.ns, Key: "k"}
	var writes []any
	for i := 0; ; i++ {
		w := redisstore.RPush(l.store.Key(l.ns, fmt.Sprint("list-", i)), values(500, "v")...)
		err := check(lease, append(writes, w))
		if err != nil {
			if !errors.Is(err, redisstore.ErrRequestTooLarge) || !errors.Is(err, redisstore.ErrInvalidCommand) {
				t.Fatalf("CheckWrite of command %d = %v, want ErrRequestTooLarge", i, err)
			}
			t.Logf("command %d refused: %v", i, err)
			break
		}
		writes = append(writes, w)
	}
	if len(writes) < 7 {
		t.Fatalf("%d commands of 500 values taken, want 7 (3,999 arguments hold 7 and some)", len(writes))
	}
	within := func(what string) {
		t.Helper()
		sizes := l.calls.take()
		if len(sizes) == 0 {
			t.Fatalf("%s: no script call sent", what)
		}
		for _, n := range sizes {
			if n > redisstore.DefaultMaxRequestArgs {
				t.Errorf("%s: a script call of %d arguments, over %d", what, n, redisstore.DefaultMaxRequestArgs)
			}
		}
		t.Logf("%s: script calls of %v arguments", what, sizes)
	}
	lease = l.claim(t, "alone")
	l.calls.take()
	if err := l.store.Complete(t.Context(), l.completion(lease, writes)); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	within("Complete")
	if _, err := l.store.Commit(t.Context(), l.commit("commit", writes)); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	within("Commit")
	b1, b2, b3 := l.claim(t, "b1"), l.claim(t, "b2"), l.claim(t, "b3")
	l.calls.take()
	errs := l.store.CompleteBatch(t.Context(), []idemstore.CompleteRequest{
		l.completion(b1, nil), l.completion(b2, writes), l.completion(b3, nil),
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("CompleteBatch item %d: %v", i, err)
		}
	}
	within("CompleteBatch")

	// One command more, sent without AddCompletionWrite: refused before
	// sending, nothing written.
	over := append(writes, redisstore.Set(l.store.Key(l.ns, "over"), "x"), redisstore.RPush(l.store.Key(l.ns, "over-list"), values(500, "x")...))
	lease = l.claim(t, "over")
	l.calls.take()
	if err := l.store.Complete(t.Context(), l.completion(lease, over)); !errors.Is(err, redisstore.ErrRequestTooLarge) {
		t.Errorf("Complete over the limit = %v, want ErrRequestTooLarge", err)
	}
	if _, err := l.store.Commit(t.Context(), l.commit("over", over)); !errors.Is(err, redisstore.ErrRequestTooLarge) {
		t.Errorf("Commit over the limit = %v, want ErrRequestTooLarge", err)
	}
	if errs := l.store.CompleteBatch(t.Context(), []idemstore.CompleteRequest{l.completion(lease, over)}); !errors.Is(errs[0], redisstore.ErrRequestTooLarge) {
		t.Errorf("CompleteBatch over the limit = %v, want ErrRequestTooLarge", errs[0])
	}
	if sizes := l.calls.take(); len(sizes) != 0 {
		t.Errorf("script calls of %v arguments sent for completions over the limit, want none", sizes)
	}
	if n := l.store.Client().Exists(t.Context(), l.store.Key(l.ns, "over"), l.store.Key(l.ns, "over-list")).Val(); n != 0 {
		t.Errorf("%d keys of the refused completion exist", n)
	}
}

// TestRequestBytesLimit: a command whose bytes would make the request
// longer than the store's byte limit is refused when added and before
// sending, with ErrRequestTooLarge. (The limit is lowered here; it is
// MaxRequestBytes, 512 MiB, the server's limit on one argument.)
func TestRequestBytesLimit(t *testing.T) {
	l := newLimited(t, redisstore.WithMaxRequestBytes(64<<10))
	key := l.store.Key(l.ns, "big")
	w := redisstore.Set(key, strings.Repeat("b", 65<<10))
	if err := l.store.Capabilities().CheckWrite(idemstore.Lease{Namespace: l.ns, Key: "k"}, []any{w}); !errors.Is(err, redisstore.ErrRequestTooLarge) {
		t.Errorf("CheckWrite = %v, want ErrRequestTooLarge", err)
	}
	lease := l.claim(t, "k")
	l.calls.take()
	if err := l.store.Complete(t.Context(), l.completion(lease, []any{w})); !errors.Is(err, redisstore.ErrRequestTooLarge) {
		t.Errorf("Complete = %v, want ErrRequestTooLarge", err)
	}
	if sizes := l.calls.take(); len(sizes) != 0 {
		t.Errorf("%d script calls sent, want none", len(sizes))
	}
	if err := l.store.Complete(t.Context(), l.completion(lease, []any{redisstore.Set(key, strings.Repeat("b", 32<<10))})); err != nil {
		t.Errorf("Complete within the limit: %v", err)
	}
}

// TestOwnRequestArgs: the arguments a completion's request carries
// besides its commands stay within the bound AddCompletionWrite counts
// for them, alone, optimistic and batched, with a result kept apart and
// a result expiry (the longest forms).
func TestOwnRequestArgs(t *testing.T) {
	l := newLimited(t, redisstore.WithInlineResultBytes(10))
	lease := l.claim(t, "alone")
	l.calls.take()
	if err := l.store.Complete(t.Context(), l.completion(lease, nil)); err != nil {
		t.Fatal(err)
	}
	alone := l.calls.take()
	if _, err := l.store.Commit(t.Context(), l.commit("commit", nil)); err != nil {
		t.Fatal(err)
	}
	commit := l.calls.take()
	a, b := l.claim(t, "b1"), l.claim(t, "b2")
	l.calls.take()
	for _, err := range l.store.CompleteBatch(t.Context(), []idemstore.CompleteRequest{l.completion(a, nil), l.completion(b, nil)}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	batch := l.calls.take()
	t.Logf("script calls of %v (Complete), %v (Commit), %v (a batch of two) arguments", alone, commit, batch)
	// A completion without commands still carries the count of its
	// commands (0), which the bound includes.
	for what, sizes := range map[string][]int{"Complete": alone, "Commit": commit} {
		if len(sizes) != 1 || sizes[0] > redisstore.OwnRequestArgs {
			t.Errorf("%s: script calls of %v arguments, want one within %d", what, sizes, redisstore.OwnRequestArgs)
		}
	}
	if len(batch) != 1 || batch[0]-4 > 2*(redisstore.OwnRequestArgs-3) {
		t.Errorf("CompleteBatch of two: script calls of %v arguments, want one within two items' bound", batch)
	}
}

// TestBatchSplitsAtRequestLimit: batched claims and completions of one
// namespace go out in as many script calls as the request limit needs,
// each within it, and every item is answered as alone.
func TestBatchSplitsAtRequestLimit(t *testing.T) {
	l := newLimited(t, redisstore.WithMaxRequestArgs(64))
	var reqs []idemstore.ClaimRequest
	for i := range 20 {
		key := fmt.Sprint("k", i)
		reqs = append(reqs, idemstore.ClaimRequest{Namespace: l.ns, Key: key, PayloadHash: "h", MessageID: "m-" + key,
			Now: l.t0, LeaseUntil: l.t0.Add(30 * time.Second), Grace: time.Second, ExpiresAt: l.t0.Add(time.Hour)})
	}
	l.calls.take()
	claims := l.store.ClaimBatch(t.Context(), reqs)
	sizes := l.calls.take()
	var completions []idemstore.CompleteRequest
	for i, c := range claims {
		if c.Err != nil || !c.Result.Claimed {
			t.Fatalf("claim %d: %+v", i, c)
		}
		completions = append(completions, l.completion(c.Result.Lease, []any{redisstore.IncrBy(l.store.Key(l.ns, "counter"), 1)}))
	}
	errs := l.store.CompleteBatch(t.Context(), completions)
	sizes = append(sizes, l.calls.take()...)
	for i, err := range errs {
		if err != nil {
			t.Errorf("completion %d: %v", i, err)
		}
	}
	if len(sizes) < 10 {
		t.Errorf("%d script calls for 20 claims and 20 completions under a limit of 64 arguments, want several of each", len(sizes))
	}
	for _, n := range sizes {
		if n > 64 {
			t.Errorf("a script call of %d arguments, over 64", n)
		}
	}
	if n, err := l.store.Client().Get(t.Context(), l.store.Key(l.ns, "counter")).Int(); err != nil || n != 20 {
		t.Errorf("counter = %d, %v; want 20", n, err)
	}
}
