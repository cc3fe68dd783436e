package httpidem_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/httpidem"
	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest/testclock"
)

// testTuning keeps the SDK's retries few and short: the outage test waits
// them out. The per-attempt timeout is a bound for a hang, long enough for
// DynamoDB Local on a loaded machine.
var testTuning = dynamo.Tuning{AttemptTimeout: 10 * time.Second, MaxAttempts: 2, MaxBackoff: 20 * time.Millisecond}

// newStore gives a test its own table on DynamoDB Local (TTL off: DynamoDB
// Local would delete expired records within seconds).
func newStore(t *testing.T) *dynamo.Store {
	t.Helper()
	store, _ := newStoreAndClient(t)
	return store
}

// newStoreAndClient is newStore that also returns the store's client, for
// tests that write rows of their own.
func newStoreAndClient(t *testing.T) (*dynamo.Store, *dynamodb.Client) {
	t.Helper()
	client := testenv.DynamoDB(t, dynamo.ClientOptions(testTuning))
	table := testenv.Name("httpidem")
	// A bound for a hang, not for a slow machine.
	ctx := testenv.Context(t)
	if err := dynamo.CreateTable(ctx, client, table, dynamo.TableOptions{NoTTL: true, PollInterval: 20 * time.Millisecond}); err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	t.Cleanup(func() {
		if _, err := client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
			t.Logf("delete table %s: %v", table, err)
		}
	})
	return dynamo.New(client, table), client
}

// unreachableStore is a store whose client points at a loopback port that
// nothing listens on.
func unreachableStore(t *testing.T) *dynamo.Store {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	client := testenv.DynamoDB(t, dynamo.ClientOptions(testTuning), func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String("http://" + addr)
	})
	return dynamo.New(client, "unreachable")
}

// clock is a settable clock shared by the wrapper and the test.
type clock = testclock.Clock

// payments is a "create payment" handler: every run is a new payment, so
// the count of runs is the count of effects.
type payments struct {
	runs atomic.Int32
	// gate, when set, is received from before answering, so a test can
	// hold a request in flight; started is closed when the first run
	// begins.
	gate    chan struct{}
	started chan struct{}
	once    sync.Once
	// status, when set, is the status of the next answers.
	status atomic.Int32
}

func (p *payments) next(ctx context.Context) (int, int32, error) {
	n := p.runs.Add(1)
	if p.started != nil {
		p.once.Do(func() { close(p.started) })
	}
	if p.gate != nil {
		select {
		case <-p.gate:
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		}
	}
	status := int(p.status.Load())
	if status == 0 {
		status = 201
	}
	return status, n, nil
}

func (p *payments) HTTP(ctx context.Context, _ events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	status, n, err := p.next(ctx)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	return events.APIGatewayV2HTTPResponse{
		StatusCode:      status,
		Headers:         map[string]string{"Content-Type": "application/json", "Location": fmt.Sprintf("/payments/p-%d", n)},
		Body:            fmt.Sprintf(`{"id":"p-%d"}`, n),
		Cookies:         []string{"session=s" + strconv.Itoa(int(n))},
		IsBase64Encoded: false,
	}, nil
}

func (p *payments) REST(ctx context.Context, _ events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	status, n, err := p.next(ctx)
	if err != nil {
		return events.APIGatewayProxyResponse{}, err
	}
	return events.APIGatewayProxyResponse{
		StatusCode:        status,
		Headers:           map[string]string{"Content-Type": "application/octet-stream"},
		MultiValueHeaders: map[string][]string{"Set-Cookie": {"a=1", "b=2"}},
		Body:              base64.StdEncoding.EncodeToString([]byte{0xff, byte(n)}),
		IsBase64Encoded:   true,
	}, nil
}

// httpReq is an HTTP API request to POST /payments.
func httpReq(key, body string) events.APIGatewayV2HTTPRequest {
	r := events.APIGatewayV2HTTPRequest{
		Version:  "2.0",
		RouteKey: "POST /payments",
		RawPath:  "/payments",
		Headers:  map[string]string{"content-type": "application/json"},
		Body:     body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey: "POST /payments",
			HTTP:     events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/payments"},
		},
	}
	if key != "" {
		r.Headers["idempotency-key"] = key
	}
	return r
}

// withSub makes r come from a caller authenticated by a JWT authorizer.
func withSub(r events.APIGatewayV2HTTPRequest, sub string) events.APIGatewayV2HTTPRequest {
	r.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
		JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": sub}},
	}
	return r
}

// restReq is a REST API request to POST /accounts/{id}/payments.
func restReq(key, body string) events.APIGatewayProxyRequest {
	r := events.APIGatewayProxyRequest{
		Resource:   "/accounts/{id}/payments",
		Path:       "/accounts/a-1/payments",
		HTTPMethod: "POST",
		Headers:    map[string]string{"Content-Type": "application/json"},
		Body:       body,
		RequestContext: events.APIGatewayProxyRequestContext{
			Identity: events.APIGatewayRequestIdentity{APIKeyID: "key-1"},
		},
	}
	if key != "" {
		r.Headers["Idempotency-Key"] = key
		r.MultiValueHeaders = map[string][]string{"Idempotency-Key": {key}}
	}
	return r
}

// problemOf decodes an RFC 9457 problem body, checking its media type.
func problemOf(t *testing.T, headers map[string]string, body string) map[string]any {
	t.Helper()
	if ct := headers["Content-Type"]; ct != httpidem.ProblemContentType {
		t.Errorf("Content-Type = %q, want %q", ct, httpidem.ProblemContentType)
	}
	var p map[string]any
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatalf("problem body %q: %v", body, err)
	}
	return p
}

// ns gives each test a namespace of its own.
func ns(t *testing.T) httpidem.Option {
	return httpidem.WithWrapOptions(lambdaidem.WithNamespace(testenv.Name("ns")))
}
