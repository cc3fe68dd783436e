package httpidem_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/httpidem"
	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
)

// Waiting for the first request (lambdaidem.WithWaitForCompletion through
// WithWrapOptions), on every store: the first request is held on its
// gate, and the waiter's reads of the record are held until the test has
// decided what they find.

var waitStores = []struct {
	name string
	new  func(t *testing.T) lambdaidem.Store
}{
	{"memory", func(*testing.T) lambdaidem.Store { return memstore.New() }},
	{"dynamodb", func(t *testing.T) lambdaidem.Store { return newStore(t) }},
	{"redis", func(t *testing.T) lambdaidem.Store {
		client := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
		prefix := testenv.Name("httpidem")
		t.Cleanup(func() {
			ctx := context.Background()
			iter := client.Scan(ctx, 0, prefix+":*", 1000).Iterator()
			for iter.Next(ctx) {
				_ = client.Unlink(ctx, iter.Val()).Err()
			}
			_ = client.Close()
		})
		store := redisstore.New(client, prefix)
		if err := store.LoadScripts(t.Context()); err != nil {
			t.Fatal(err)
		}
		return store
	}},
}

// heldReads says when a read of a record starts and holds it until the
// gate opens.
type heldReads struct {
	lambdaidem.Store
	reading chan struct{}
	gate    chan struct{}
}

func (s *heldReads) Get(ctx context.Context, req idemstore.GetRequest) (idemstore.Record, error) {
	s.reading <- struct{}{}
	select {
	case <-s.gate:
	case <-ctx.Done():
	}
	return s.Store.Get(ctx, req)
}

type httpAnswer struct {
	resp events.APIGatewayV2HTTPResponse
	err  error
}

func TestWaitForTheFirstRequest(t *testing.T) {
	t.Parallel()
	for _, s := range waitStores {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			store := s.new(t)
			namespace := httpidem.WithWrapOptions(lambdaidem.WithNamespace(testenv.Name("ns")))
			call := func(h func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), key string) <-chan httpAnswer {
				out := make(chan httpAnswer, 1)
				go func() {
					resp, err := h(context.Background(), withSub(httpReq(key, `{"amount":100}`), "alice"))
					out <- httpAnswer{resp, err}
				}()
				return out
			}
			wait := func(ch <-chan httpAnswer, who string) httpAnswer {
				t.Helper()
				select {
				case a := <-ch:
					if a.err != nil {
						t.Fatalf("%s: %v", who, a.err)
					}
					return a
				case <-time.After(60 * time.Second):
					t.Fatalf("%s never answered", who)
					return httpAnswer{}
				}
			}
			// race holds a first request for key answering status, and a
			// second request waiting for it until it has answered; it
			// returns both answers and the handler's runs.
			race := func(key string, status int32) (first, second httpAnswer, runs int32) {
				t.Helper()
				p := &payments{gate: make(chan struct{}), started: make(chan struct{})}
				p.status.Store(status)
				held := &heldReads{Store: store, reading: make(chan struct{}, 100), gate: make(chan struct{})}
				h := httpidem.HTTP(store, p.HTTP, namespace)
				waiting := httpidem.HTTP(held, p.HTTP, namespace, httpidem.WithWrapOptions(lambdaidem.WithWaitForCompletion(time.Minute)))
				fc := call(h, key)
				<-p.started
				sc := call(waiting, key)
				select {
				case <-held.reading:
				case <-time.After(30 * time.Second):
					t.Fatal("the waiting request never read the record")
				}
				close(p.gate)
				first = wait(fc, "the first request")
				close(held.gate)
				return first, wait(sc, "the waiting request"), p.runs.Load()
			}

			// The first request completes while the second waits: the
			// second gets its response, replayed.
			a1, a2, runs := race("k-1", 201)
			if a2.resp.StatusCode != 201 || a2.resp.Body != a1.resp.Body || a2.resp.Headers[httpidem.HeaderReplayed] != "true" || runs != 1 {
				t.Fatalf("waiting request: %d %q %v after %d runs, want the first's %q, replayed", a2.resp.StatusCode, a2.resp.Body, a2.resp.Headers, runs, a1.resp.Body)
			}

			// The first request answers 503, which is not stored: the
			// waiter gets 503 idempotency-original-failed, and a retry
			// runs the handler.
			a1, a2, runs = race("k-2", 503)
			prob := problemOf(t, a2.resp.Headers, a2.resp.Body)
			if a1.resp.StatusCode != 503 || a2.resp.StatusCode != http.StatusServiceUnavailable || prob["code"] != "idempotency-original-failed" ||
				a2.resp.Headers[httpidem.HeaderRetryAfter] == "" || runs != 1 {
				t.Fatalf("waiter of a failed request: %d %v %v after %d runs", a2.resp.StatusCode, prob, a2.resp.Headers, runs)
			}
			p := &payments{}
			retry, err := httpidem.HTTP(store, p.HTTP, namespace)(context.Background(), withSub(httpReq("k-2", `{"amount":100}`), "alice"))
			if err != nil || retry.StatusCode != 201 || p.runs.Load() != 1 {
				t.Fatalf("retry after the failure: %d %v after %d runs", retry.StatusCode, err, p.runs.Load())
			}
		})
	}
}

// A wait that ends before the first request answers 409 with Retry-After,
// as without waiting.
func TestWaitEndsWith409(t *testing.T) {
	t.Parallel()
	for _, s := range waitStores {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			store := s.new(t)
			p := &payments{gate: make(chan struct{}), started: make(chan struct{})}
			namespace := httpidem.WithWrapOptions(lambdaidem.WithNamespace(testenv.Name("ns")))
			h := httpidem.HTTP(store, p.HTTP, namespace)
			waiting := httpidem.HTTP(store, p.HTTP, namespace,
				httpidem.WithWrapOptions(lambdaidem.WithWaitForCompletion(200*time.Millisecond)))
			first := make(chan error, 1)
			go func() {
				_, err := h(context.Background(), withSub(httpReq("k-1", `{}`), "bob"))
				first <- err
			}()
			<-p.started
			resp, err := waiting(context.Background(), withSub(httpReq("k-1", `{}`), "bob"))
			close(p.gate)
			if err != nil {
				t.Fatal(err)
			}
			prob := problemOf(t, resp.Headers, resp.Body)
			secs, _ := strconv.Atoi(resp.Headers[httpidem.HeaderRetryAfter])
			if resp.StatusCode != http.StatusConflict || prob["code"] != "idempotency-key-in-use" || secs < 1 {
				t.Fatalf("wait ended: %d %v %v", resp.StatusCode, prob, resp.Headers)
			}
			if err := <-first; err != nil {
				t.Fatal(err)
			}
		})
	}
}
