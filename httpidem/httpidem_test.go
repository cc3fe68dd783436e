package httpidem_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"

	"github.com/lambdaidem/go-lambdaidem/httpidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest/testclock"
)

func TestHTTPRepeatReplaysStoredResponse(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	var p payments
	h := httpidem.HTTP(store, p.HTTP, ns(t), httpidem.WithAnonymousCallers())
	ctx := t.Context()

	first, err := h(ctx, httpReq(`"k-1"`, `{"cents":100}`))
	if err != nil {
		t.Fatal(err)
	}
	if first.StatusCode != 201 || first.Headers[httpidem.HeaderReplayed] != "" {
		t.Fatalf("first = %+v, want 201 without the replay header", first)
	}
	// The same key, bare rather than quoted, is the same key.
	second, err := h(ctx, httpReq(`k-1`, `{"cents":100}`))
	if err != nil {
		t.Fatal(err)
	}
	want := first
	want.Headers = map[string]string{"Content-Type": "application/json", "Location": "/payments/p-1", httpidem.HeaderReplayed: "true"}
	if diff := cmp.Diff(want, second); diff != "" {
		t.Errorf("replay differs (-want +got):\n%s", diff)
	}
	if n := p.runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

func TestRESTRepeatReplaysStoredResponse(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	var p payments
	h := httpidem.REST(store, p.REST, ns(t), httpidem.WithAnonymousCallers())
	ctx := t.Context()

	first, err := h(ctx, restReq("k-1", `{"cents":100}`))
	if err != nil {
		t.Fatal(err)
	}
	second, err := h(ctx, restReq("k-1", `{"cents":100}`))
	if err != nil {
		t.Fatal(err)
	}
	if first.Headers[httpidem.HeaderReplayed] != "" {
		t.Errorf("first response is marked replayed: %v", first.Headers)
	}
	want := first
	want.Headers = map[string]string{"Content-Type": "application/octet-stream", httpidem.HeaderReplayed: "true"}
	if diff := cmp.Diff(want, second); diff != "" {
		t.Errorf("replay differs (-want +got):\n%s", diff)
	}
	if !second.IsBase64Encoded {
		t.Error("replay lost isBase64Encoded")
	}
	if n := p.runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

func TestRepeatWhileRunningGets409WithRetryAfter(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	p := payments{gate: make(chan struct{}), started: make(chan struct{})}
	h := httpidem.HTTP(store, p.HTTP, ns(t), httpidem.WithAnonymousCallers())
	ctx := t.Context()

	type result struct {
		resp events.APIGatewayV2HTTPResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := h(ctx, httpReq("k-1", `{}`))
		done <- result{resp, err}
	}()
	<-p.started

	resp, err := h(ctx, httpReq("k-1", `{}`))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 409 {
		t.Fatalf("status = %d, want 409 (%s)", resp.StatusCode, resp.Body)
	}
	secs, err := strconv.Atoi(resp.Headers[httpidem.HeaderRetryAfter])
	// The lease without a deadline is a minute, plus the grace.
	if err != nil || secs < 1 || secs > int((lambdaidem.DefaultLeaseWithoutDeadline+lambdaidem.DefaultGrace).Seconds())+1 {
		t.Errorf("Retry-After = %q, want whole seconds up to the lease", resp.Headers[httpidem.HeaderRetryAfter])
	}
	if prob := problemOf(t, resp.Headers, resp.Body); prob["code"] != "idempotency-key-in-use" || prob["status"] != 409.0 {
		t.Errorf("problem = %v", prob)
	}

	close(p.gate)
	r := <-done
	if r.err != nil || r.resp.StatusCode != 201 {
		t.Fatalf("first request = %+v, %v", r.resp, r.err)
	}
	again, err := h(ctx, httpReq("k-1", `{}`))
	if err != nil || again.StatusCode != 201 || again.Headers[httpidem.HeaderReplayed] != "true" {
		t.Fatalf("after completion = %+v, %v; want the replayed 201", again, err)
	}
	if n := p.runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

func TestSameKeyDifferentRequestGets422(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	var p payments
	h := httpidem.HTTP(store, p.HTTP, ns(t), httpidem.WithAnonymousCallers())
	ctx := t.Context()
	if _, err := h(ctx, httpReq("k-1", `{"cents":100}`)); err != nil {
		t.Fatal(err)
	}
	otherPath := httpReq("k-1", `{"cents":100}`)
	otherPath.RawPath = "/payments/"
	for name, req := range map[string]events.APIGatewayV2HTTPRequest{
		"body": httpReq("k-1", `{"cents":999}`),
		"path": otherPath,
	} {
		resp, err := h(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 422 {
			t.Errorf("different %s: status = %d, want 422", name, resp.StatusCode)
		}
		if prob := problemOf(t, resp.Headers, resp.Body); prob["code"] != "idempotency-key-reused" {
			t.Errorf("different %s: problem = %v", name, prob)
		}
	}
	if n := p.runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

func TestMissingOrInvalidKey(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	var p payments
	required := httpidem.HTTP(store, p.HTTP, ns(t), httpidem.WithAnonymousCallers())
	optional := httpidem.HTTP(store, p.HTTP, ns(t), httpidem.WithAnonymousCallers(), httpidem.WithKeyOptional())
	ctx := t.Context()

	resp, err := required(ctx, httpReq("", `{}`))
	if err != nil || resp.StatusCode != 400 {
		t.Fatalf("required, no key = %+v, %v; want 400", resp, err)
	}
	if prob := problemOf(t, resp.Headers, resp.Body); prob["code"] != "idempotency-key-missing" || prob["title"] != "Bad Request" {
		t.Errorf("problem = %v", prob)
	}
	for _, key := range []string{`""`, `"a", "b"`, string(make([]byte, 300))} {
		for name, h := range map[string]httpidem.HTTPHandler{"required": required, "optional": optional} {
			resp, err := h(ctx, httpReq(key, `{}`))
			if err != nil || resp.StatusCode != 400 {
				t.Errorf("%s, key %q = %d, %v; want 400", name, key, resp.StatusCode, err)
			}
		}
	}
	rest := restReq("", `{}`)
	rest.MultiValueHeaders = map[string][]string{"idempotency-key": {"a", "b"}}
	if resp, err := httpidem.REST(store, p.REST, ns(t), httpidem.WithAnonymousCallers())(ctx, rest); err != nil || resp.StatusCode != 400 {
		t.Errorf("REST, key sent twice = %d, %v; want 400", resp.StatusCode, err)
	}
	if n := p.runs.Load(); n != 0 {
		t.Fatalf("handler ran %d times on bad keys, want 0", n)
	}

	// Optional and absent: the handler runs every time, nothing is stored.
	for range 2 {
		resp, err := optional(ctx, httpReq("", `{}`))
		if err != nil || resp.StatusCode != 201 || resp.Headers[httpidem.HeaderReplayed] != "" {
			t.Fatalf("optional, no key = %+v, %v", resp, err)
		}
	}
	if n := p.runs.Load(); n != 2 {
		t.Errorf("handler ran %d times, want 2", n)
	}
}

func TestStoreOutageGets503(t *testing.T) {
	t.Parallel()
	var p payments
	h := httpidem.HTTP(unreachableStore(t), p.HTTP, ns(t), httpidem.WithAnonymousCallers(), httpidem.WithUnavailableRetryAfter(1500*time.Millisecond))
	resp, err := h(t.Context(), httpReq("k-1", `{}`))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 503 || resp.Headers[httpidem.HeaderRetryAfter] != "2" {
		t.Errorf("outage = %d, Retry-After %q; want 503, 2", resp.StatusCode, resp.Headers[httpidem.HeaderRetryAfter])
	}
	if prob := problemOf(t, resp.Headers, resp.Body); prob["code"] != "idempotency-unavailable" {
		t.Errorf("problem = %v", prob)
	}
	if n := p.runs.Load(); n != 0 {
		t.Errorf("handler ran %d times during an outage, want 0", n)
	}
}

func TestCallersAreNamespaced(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	var p payments
	h := httpidem.HTTP(store, p.HTTP, ns(t), httpidem.WithAnonymousCallers())
	ctx := t.Context()
	for _, req := range []events.APIGatewayV2HTTPRequest{
		withSub(httpReq("k-1", `{}`), "alice"),
		withSub(httpReq("k-1", `{}`), "bob"),
		httpReq("k-1", `{}`), // anonymous
	} {
		resp, err := h(ctx, req)
		if err != nil || resp.StatusCode != 201 || resp.Headers[httpidem.HeaderReplayed] != "" {
			t.Fatalf("first use by a caller = %+v, %v; want a fresh 201", resp, err)
		}
	}
	resp, err := h(ctx, withSub(httpReq("k-1", `{}`), "alice"))
	if err != nil || resp.Body != `{"id":"p-1"}` || resp.Headers[httpidem.HeaderReplayed] != "true" {
		t.Fatalf("alice's repeat = %+v, %v; want her own response replayed", resp, err)
	}
	if n := p.runs.Load(); n != 3 {
		t.Errorf("handler ran %d times, want 3", n)
	}
}

// A caller that WithCaller names "anonymous" and a request with no caller
// at all are two callers: neither replays the other's response, whichever
// comes first and on every store.
func TestAnonymousIsNoCallerName(t *testing.T) {
	t.Parallel()
	for _, anonymousFirst := range []bool{true, false} {
		t.Run("anonymous first="+strconv.FormatBool(anonymousFirst), func(t *testing.T) {
			t.Parallel()
			store := newStore(t)
			var p payments
			h := httpidem.HTTP(store, p.HTTP, ns(t), httpidem.WithAnonymousCallers(),
				httpidem.WithCaller(func(r events.APIGatewayV2HTTPRequest) string { return r.Headers["x-caller"] }))
			named := httpReq("k-1", `{}`)
			named.Headers["x-caller"] = httpidem.Anonymous
			reqs := []events.APIGatewayV2HTTPRequest{httpReq("k-1", `{}`), named}
			if !anonymousFirst {
				reqs[0], reqs[1] = reqs[1], reqs[0]
			}
			for i, req := range reqs {
				resp, err := h(t.Context(), req)
				if err != nil || resp.StatusCode != 201 || resp.Headers[httpidem.HeaderReplayed] != "" {
					t.Fatalf("request %d = %+v, %v; want a fresh 201 of its own", i, resp, err)
				}
			}
			if n := p.runs.Load(); n != 2 {
				t.Errorf("handler ran %d times, want 2: one per caller", n)
			}
		})
	}
}

func TestRoutesAreNamespaced(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	var p payments
	h := httpidem.HTTP(store, p.HTTP, ns(t), httpidem.WithAnonymousCallers())
	ctx := t.Context()
	refund := httpReq("k-1", `{}`)
	refund.RouteKey, refund.RawPath = "POST /refunds", "/refunds"
	for _, req := range []events.APIGatewayV2HTTPRequest{httpReq("k-1", `{}`), refund} {
		if resp, err := h(ctx, req); err != nil || resp.StatusCode != 201 || resp.Headers[httpidem.HeaderReplayed] != "" {
			t.Fatalf("first use on a route = %+v, %v; want a fresh 201", resp, err)
		}
	}
}

func TestFailuresAreNotStored(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	var p payments
	boom := errors.New("boom")
	fail := true
	h := httpidem.HTTP(store, func(ctx context.Context, r events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		if fail {
			fail = false
			return events.APIGatewayV2HTTPResponse{}, boom
		}
		return p.HTTP(ctx, r)
	}, ns(t), httpidem.WithAnonymousCallers())
	ctx := t.Context()

	if _, err := h(ctx, httpReq("k-1", `{}`)); !errors.Is(err, boom) {
		t.Fatalf("handler error = %v, want it returned unchanged", err)
	}
	p.status.Store(503)
	if resp, err := h(ctx, httpReq("k-1", `{}`)); err != nil || resp.StatusCode != 503 || resp.Headers[httpidem.HeaderReplayed] != "" {
		t.Fatalf("5xx answer = %+v, %v; want it passed through", resp, err)
	}
	p.status.Store(201)
	if resp, err := h(ctx, httpReq("k-1", `{}`)); err != nil || resp.StatusCode != 201 || resp.Headers[httpidem.HeaderReplayed] != "" {
		t.Fatalf("retry after the 5xx = %+v, %v; want a fresh 201", resp, err)
	}
	if resp, err := h(ctx, httpReq("k-1", `{}`)); err != nil || resp.StatusCode != 201 || resp.Headers[httpidem.HeaderReplayed] != "true" {
		t.Fatalf("repeat = %+v, %v; want the replayed 201", resp, err)
	}
	if n := p.runs.Load(); n != 2 {
		t.Errorf("handler answered %d times, want 2", n)
	}
}

func TestClientErrorsAreStored(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	var p payments
	p.status.Store(402)
	h := httpidem.HTTP(store, p.HTTP, ns(t), httpidem.WithAnonymousCallers())
	for i := range 2 {
		resp, err := h(t.Context(), httpReq("k-1", `{}`))
		if err != nil || resp.StatusCode != 402 || (resp.Headers[httpidem.HeaderReplayed] == "true") != (i == 1) {
			t.Fatalf("call %d = %+v, %v", i, resp, err)
		}
	}
	if n := p.runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

func TestLateReplayGets422(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	var p payments
	clk := testclock.New(time.Now()).PassShort(200 * time.Millisecond)
	h := httpidem.HTTP(store, p.HTTP, httpidem.WithAnonymousCallers(), httpidem.WithWrapOptions(
		lambdaidem.WithNamespace("late"+strconv.FormatInt(time.Now().UnixNano(), 36)),
		lambdaidem.WithClock(clk),
		lambdaidem.WithResultRetention(time.Minute),
		lambdaidem.WithRetention(time.Hour),
	))
	ctx := t.Context()
	if _, err := h(ctx, httpReq("k-1", `{}`)); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Minute)
	resp, err := h(ctx, httpReq("k-1", `{}`))
	if err != nil || resp.StatusCode != 422 {
		t.Fatalf("late replay = %+v, %v; want 422", resp, err)
	}
	if prob := problemOf(t, resp.Headers, resp.Body); prob["code"] != "idempotency-key-expired" {
		t.Errorf("problem = %v", prob)
	}
	if n := p.runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

func TestDeadLetteredKeyGets424(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	var p payments
	namespace := "dl" + strconv.FormatInt(time.Now().UnixNano(), 36)
	h := httpidem.HTTP(store, p.HTTP, httpidem.WithAnonymousCallers(), httpidem.WithWrapOptions(lambdaidem.WithNamespace(namespace)))
	ctx := t.Context()

	// Plant what at-most-once mode leaves behind: a key set aside with its
	// outcome unknown. Its payload hash is irrelevant: a dead-lettered key
	// is refused whatever the payload.
	now := time.Now()
	cr, err := store.Claim(ctx, idemstore.ClaimRequest{
		Namespace: namespace, Key: httpidem.StoreKey("POST /payments", "", "k-1") /* no caller */, PayloadHash: "h",
		Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour),
	})
	if err != nil || !cr.Claimed {
		t.Fatalf("claim: %+v, %v", cr, err)
	}
	if err := store.DeadLetter(ctx, idemstore.DeadLetterRequest{Lease: cr.Lease, Now: now, Reason: lambdaidem.ReasonOutcomeUnknown, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}

	resp, err := h(ctx, httpReq("k-1", `{}`))
	if err != nil || resp.StatusCode != 424 {
		t.Fatalf("dead-lettered key = %+v, %v; want 424", resp, err)
	}
	if prob := problemOf(t, resp.Headers, resp.Body); prob["code"] != "idempotency-key-outcome-unknown" {
		t.Errorf("problem = %v", prob)
	}
	if n := p.runs.Load(); n != 0 {
		t.Errorf("handler ran %d times, want 0", n)
	}
}

func TestProblemType(t *testing.T) {
	t.Parallel()
	var p payments
	h := httpidem.HTTP(memstore.New(), p.HTTP, httpidem.WithProblemType("https://example.com/docs/idempotency"))
	resp, err := h(t.Context(), httpReq("", `{}`))
	if err != nil {
		t.Fatal(err)
	}
	prob := problemOf(t, resp.Headers, resp.Body)
	if prob["type"] != "https://example.com/docs/idempotency" || prob["title"] != "Idempotency-Key is missing" {
		t.Errorf("problem = %v", prob)
	}
}

// Options that could never work are refused when the handler is built,
// with a *lambdaidem.ConfigError naming the handler and the option.
func TestRefusedWhenBuilt(t *testing.T) {
	t.Parallel()
	var p payments
	for _, tc := range []struct {
		name    string
		build   func()
		handler string
		option  string
		want    error
	}{
		{"caller of the wrong type", func() {
			httpidem.HTTP(memstore.New(), p.HTTP, httpidem.WithCaller(func(events.APIGatewayProxyRequest) string { return "" }))
		}, "httpidem.HTTP", "WithCaller", lambdaidem.ErrInvalidOption},
		{"refused status", func() { httpidem.REST(memstore.New(), p.REST, httpidem.WithWriteRefusedStatus(200)) }, "httpidem.REST", "WithWriteRefusedStatus", lambdaidem.ErrInvalidOption},
		{"no retry wait", func() { httpidem.HTTP(memstore.New(), p.HTTP, httpidem.WithUnavailableRetryAfter(0)) }, "httpidem.HTTP", "WithUnavailableRetryAfter", lambdaidem.ErrInvalidOption},
		{"no key length", func() { httpidem.HTTP(memstore.New(), p.HTTP, httpidem.WithMaxKeyLength(0)) }, "httpidem.HTTP", "WithMaxKeyLength", lambdaidem.ErrInvalidOption},
		{"empty problem type", func() { httpidem.HTTP(memstore.New(), p.HTTP, httpidem.WithProblemType("")) }, "httpidem.HTTP", "WithProblemType", lambdaidem.ErrInvalidOption},
		{"a key option", func() {
			httpidem.HTTP(memstore.New(), p.HTTP, httpidem.WithWrapOptions(lambdaidem.WithKeyJSONField("id")))
		}, "httpidem.HTTP", "WithWrapOptions(WithKeyJSONField)", lambdaidem.ErrUnsupportedOption},
		{"an option Wrap refuses", func() {
			httpidem.REST(memstore.New(), p.REST, httpidem.WithWrapOptions(lambdaidem.WithCache(10, time.Minute)))
		}, "httpidem.REST (lambdaidem.Wrap)", "WithCache", lambdaidem.ErrUnsupportedOption},
		{"an empty namespace", func() {
			httpidem.REST(memstore.New(), p.REST, httpidem.WithWrapOptions(lambdaidem.WithNamespace("")))
		}, "httpidem.REST (lambdaidem.Wrap)", "WithNamespace", lambdaidem.ErrInvalidOption},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := lambdaidem.Check(tc.build)
			var ce *lambdaidem.ConfigError
			if !errors.As(err, &ce) || ce.Handler != tc.handler || ce.Option != tc.option || !errors.Is(err, tc.want) {
				t.Fatalf("refusal %v, want %s refusing %s with %v", err, tc.handler, tc.option, tc.want)
			}
		})
	}
}

func TestWithCaller(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	var p payments
	h := httpidem.REST(store, p.REST, ns(t), httpidem.WithCaller(func(r events.APIGatewayProxyRequest) string {
		return r.Headers["X-Tenant"]
	}))
	ctx := t.Context()
	for _, tenant := range []string{"t1", "t2", "t1"} {
		req := restReq("k-1", `{}`)
		req.Headers["X-Tenant"] = tenant
		if _, err := h(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if n := p.runs.Load(); n != 2 {
		t.Errorf("handler ran %d times, want 2 (one per tenant)", n)
	}
}
