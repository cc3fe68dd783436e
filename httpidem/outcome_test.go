package httpidem_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/httpidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
)

// A request whose outcome is unknown is answered 424 with the
// outcome-unknown problem, on the request that found it out and every
// repeat; the handler never runs again. A NotApplied failure in
// at-most-once mode stays the handler's own error, and the key retryable.
func TestOutcomeUnknownGets424(t *testing.T) {
	t.Parallel()
	errTimeout := errors.New("payment provider: 504")
	for _, tc := range []struct {
		name       string
		atMostOnce bool
		err        error
		unknown    bool
	}{
		{"at-most-once plain error", true, errTimeout, true},
		{"at-least-once OutcomeUnknown", false, lambdaidem.OutcomeUnknown(errTimeout), true},
		{"at-most-once NotApplied", true, lambdaidem.NotApplied(errors.New("card declined before charging")), false},
		{"at-least-once plain error", false, errTimeout, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var runs atomic.Int32
			var wopts []lambdaidem.Option
			if tc.atMostOnce {
				wopts = append(wopts, lambdaidem.WithAtMostOnce())
			}
			h := httpidem.HTTP(memstore.New(), func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				if runs.Add(1) == 1 {
					return events.APIGatewayV2HTTPResponse{}, tc.err
				}
				return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{"id":"p-1"}`}, nil
			}, httpidem.WithAnonymousCallers(), httpidem.WithWrapOptions(wopts...))
			resp, err := h(t.Context(), httpReq("k-1", `{"amount":10}`))
			if !tc.unknown {
				if !errors.Is(err, errors.Unwrap(tc.err)) && !errors.Is(err, tc.err) {
					t.Fatalf("first request: %+v, %v; want the handler's own error", resp, err)
				}
				if resp, err := h(t.Context(), httpReq("k-1", `{"amount":10}`)); err != nil || resp.StatusCode != 201 || runs.Load() != 2 {
					t.Fatalf("retry: %d, %v after %d runs; want the handler to run again", resp.StatusCode, err, runs.Load())
				}
				return
			}
			for i := range 2 {
				if err != nil || resp.StatusCode != httpidem.StatusOutcomeUnknown {
					t.Fatalf("request %d: %+v, %v; want %d", i+1, resp, err, httpidem.StatusOutcomeUnknown)
				}
				if prob := problemOf(t, resp.Headers, resp.Body); prob["code"] != "idempotency-key-outcome-unknown" || prob["status"] != float64(424) {
					t.Errorf("request %d: problem %v", i+1, prob)
				}
				resp, err = h(t.Context(), httpReq("k-1", `{"amount":10}`))
			}
			if n := runs.Load(); n != 1 {
				t.Fatalf("handler ran %d times, want 1", n)
			}
		})
	}
}

// In at-most-once mode a 5xx answer is a failure like an error (neither is
// stored): it may have come after the effect, so the key is set aside. The
// request gets the handler's answer; every repeat, 424.
func TestAtMostOnce5xxAnswerSetsTheKeyAside(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	h := httpidem.HTTP(memstore.New(), func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		runs.Add(1)
		return events.APIGatewayV2HTTPResponse{StatusCode: 502, Body: `{"error":"payment provider timed out"}`}, nil
	}, httpidem.WithAnonymousCallers(), httpidem.WithWrapOptions(lambdaidem.WithAtMostOnce()))
	resp, err := h(t.Context(), httpReq("k-1", `{"amount":10}`))
	if err != nil || resp.StatusCode != 502 {
		t.Fatalf("first request: %+v, %v; want the handler's 502", resp, err)
	}
	resp, err = h(t.Context(), httpReq("k-1", `{"amount":10}`))
	if err != nil || resp.StatusCode != httpidem.StatusOutcomeUnknown || runs.Load() != 1 {
		t.Fatalf("repeat: %d, %v after %d runs; want 424 after 1", resp.StatusCode, err, runs.Load())
	}
}
