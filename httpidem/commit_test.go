package httpidem_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/httpidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest/testclock"
)

// cancelStore is an in-memory store whose transactional completion fails
// with err: a stand-in for a cancelled transaction. Without err it
// completes and drops the writes.
type cancelStore struct {
	lambdaidem.Store // an in-memory store; its own declarations hidden: this double commits what it likes
	err              error
}

func (s *cancelStore) Complete(ctx context.Context, req idemstore.CompleteRequest) error {
	if s.err != nil && len(req.Writes) > 0 {
		return s.err
	}
	req.Writes = nil
	return s.Store.Complete(ctx, req)
}

// debit is a handler that adds a completion write and answers 201.
func debit(runs *atomic.Int32, write any) httpidem.HTTPHandler {
	return func(ctx context.Context, _ events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		n := runs.Add(1)
		if err := lambdaidem.AddCompletionWrite(ctx, write); err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: fmt.Sprintf(`{"debit":%d}`, n)}, nil
	}
}

// wantProblem checks a problem response's status and code.
func wantProblem(t *testing.T, resp events.APIGatewayV2HTTPResponse, err error, status int, code string) {
	t.Helper()
	if err != nil {
		t.Fatalf("error %v, want a %d problem response", err, status)
	}
	if resp.StatusCode != status {
		t.Fatalf("status %d (%s), want %d", resp.StatusCode, resp.Body, status)
	}
	if p := problemOf(t, resp.Headers, resp.Body); p["code"] != code {
		t.Fatalf("problem code %v, want %s", p["code"], code)
	}
}

// A handler's 2xx is never sent when its completion writes did not commit.
func TestUncommittedWritesNeverAnswerSuccess(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		err    error
		opts   []httpidem.Option
		status int
		code   string
	}{
		{"transient cancellation", fmt.Errorf("tx conflict: %w", lambdaidem.ErrStoreUnavailable), nil, 503, "idempotency-not-committed"},
		{"lease lost", fmt.Errorf("taken over: %w", lambdaidem.ErrLeaseLost), nil, 503, "idempotency-not-committed"},
		{"condition failed", fmt.Errorf("balance too low: %w", lambdaidem.ErrWriteRefused), nil, 409, "idempotency-write-refused"},
		{"condition failed, 422", fmt.Errorf("balance too low: %w", lambdaidem.ErrWriteRefused),
			[]httpidem.Option{httpidem.WithWriteRefusedStatus(422)}, 422, "idempotency-write-refused"},
		{"unsupported write", fmt.Errorf("cannot: %w", lambdaidem.ErrUnsupportedWrite), nil, 500, "idempotency-not-committed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := &cancelStore{Store: memstore.New(), err: tc.err}
			var runs atomic.Int32
			opts := append([]httpidem.Option{httpidem.WithAnonymousCallers(), httpidem.WithWrapOptions(lambdaidem.WithNamespace("debits"))}, tc.opts...)
			h := httpidem.HTTP(store, debit(&runs, "debit"), opts...)
			resp, err := h(t.Context(), httpReq("k-1", `{}`))
			wantProblem(t, resp, err, tc.status, tc.code)
			if tc.status == 503 && resp.Headers[httpidem.HeaderRetryAfter] == "" {
				t.Error("503 without Retry-After")
			}
		})
	}
}

// A plain memstore cannot commit writes at all: declared, the handler is
// refused when built; undeclared, AddCompletionWrite refuses the write and
// the handler's answer does not go out as if it had committed.
func TestWritesTheStoreCannotCommit(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	err := lambdaidem.Check(func() {
		httpidem.HTTP(memstore.New(), debit(&runs, "debit"), httpidem.WithAnonymousCallers(), httpidem.WithWrapOptions(lambdaidem.WithCompletionWrites[string]()))
	})
	if !errors.Is(err, lambdaidem.ErrUnsupportedWrite) {
		t.Fatalf("built with writes the store cannot commit: %v, want ErrUnsupportedWrite", err)
	}
	h := httpidem.HTTP(memstore.New(), debit(&runs, "debit"), httpidem.WithAnonymousCallers())
	resp, err := h(t.Context(), httpReq("k-1", `{}`))
	if !errors.Is(err, lambdaidem.ErrUnsupportedWrite) || resp.StatusCode/100 == 2 {
		t.Fatalf("status %d, error %v; want no 2xx and the write's refusal (ErrUnsupportedWrite)", resp.StatusCode, err)
	}
}

// accountRow is a row in the idempotency table standing for the caller's
// own data: the table's key is "pk", like every record's.
func accountRow(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "account#" + id}}
}

// On DynamoDB Local: a completion write whose own condition fails cancels
// the real TransactWriteItems; the client gets 409, not the handler's 201,
// and a retry with the key runs again.
func TestDynamoRefusedWriteAnswersProblem(t *testing.T) {
	t.Parallel()
	store, client := newStoreAndClient(t)
	row := accountRow("a1")
	// The account already has this payment: the handler's conditional put
	// is refused.
	if _, err := client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(store.Table()), Item: row}); err != nil {
		t.Fatal(err)
	}
	put := types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(store.Table()), Item: row, ConditionExpression: aws.String("attribute_not_exists(pk)"),
	}}
	var runs atomic.Int32
	h := httpidem.HTTP(store, debit(&runs, put), ns(t), httpidem.WithAnonymousCallers())
	// A deadline, as in Lambda: the completion may use the time up to it.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	resp, err := h(ctx, httpReq("k-1", `{}`))
	wantProblem(t, resp, err, 409, "idempotency-write-refused")
	// The key is retryable: the next request runs the handler again (and
	// is refused again, the row still being there).
	resp, err = h(ctx, httpReq("k-1", `{}`))
	wantProblem(t, resp, err, 409, "idempotency-write-refused")
	if n := runs.Load(); n != 2 {
		t.Fatalf("handler ran %d times, want 2", n)
	}
}

// On DynamoDB Local: the first request's lease is taken over while its
// handler runs; the new holder completes. The first handler's completion
// transaction is refused, and its client gets 503, not 201.
func TestDynamoLeaseLostAnswersProblem(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	clk := testclock.New(time.Now()).PassShort(200 * time.Millisecond)
	const lease = time.Minute
	var h httpidem.HTTPHandler
	var runs atomic.Int32
	var second events.APIGatewayV2HTTPResponse
	var secondErr error
	handler := func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		n := runs.Add(1)
		row := accountRow(fmt.Sprintf("run-%d", n))
		if err := lambdaidem.AddCompletionWrite(ctx, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(store.Table()), Item: row}}); err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
		if n == 1 {
			// This run stalls past its lease; a retry takes the key over.
			clk.Advance(lease + time.Hour)
			second, secondErr = h(context.Background(), req)
		}
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: fmt.Sprintf(`{"run":%d}`, n)}, nil
	}
	h = httpidem.HTTP(store, handler, ns(t), httpidem.WithAnonymousCallers(),
		// No deadline (the clock is the test's): the margin is the time
		// the completion may take, generous for a busy DynamoDB Local.
		httpidem.WithWrapOptions(lambdaidem.WithClock(clk), lambdaidem.WithLease(lease), lambdaidem.WithDeadlineMargin(20*time.Second)))
	first, err := h(context.Background(), httpReq("k-1", `{}`))
	if secondErr != nil || second.StatusCode != 201 || second.Body != `{"run":2}` {
		t.Fatalf("takeover: %+v %v, want run 2's 201", second, secondErr)
	}
	wantProblem(t, first, err, 503, "idempotency-not-committed")
	// A repeat replays the run whose writes committed.
	again, err := h(context.Background(), httpReq("k-1", `{}`))
	if err != nil || again.Body != `{"run":2}` || again.Headers[httpidem.HeaderReplayed] != "true" {
		t.Fatalf("repeat: %+v %v, want run 2's response replayed", again, err)
	}
}

// Without WithAnonymousCallers, a keyed request with no caller identity is
// refused before the handler runs: it would share its keys with everyone.
func TestUnknownCallerIsRefused(t *testing.T) {
	t.Parallel()
	var p payments
	h := httpidem.HTTP(memstore.New(), p.HTTP)
	resp, err := h(t.Context(), httpReq("k-1", `{}`))
	wantProblem(t, resp, err, 500, "idempotency-caller-unknown")
	if resp, err := h(t.Context(), withSub(httpReq("k-1", `{}`), "alice")); err != nil || resp.StatusCode != 201 {
		t.Fatalf("authenticated request: %+v %v", resp, err)
	}
	if n := p.runs.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1 (the authenticated request)", n)
	}
}
