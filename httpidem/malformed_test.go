package httpidem_test

import (
	"context"
	"encoding/json"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/httpidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
)

// A request body is never parsed here: the key comes from the header and
// the body is fingerprinted as bytes, so a body that is not JSON (or not
// UTF-8) is no "malformed body" refusal of the library's. It reaches the
// handler, whose answer (a 400, say) is stored and replayed like any
// other, and the same key with a corrected body is a different request.
func TestMalformedRequestBodyIsTheHandlersToAnswer(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	handler := func(_ context.Context, r events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		runs.Add(1)
		if !json.Valid([]byte(r.Body)) {
			return events.APIGatewayV2HTTPResponse{StatusCode: 400, Body: `{"error":"body is not JSON"}`}, nil
		}
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{"id":"p-1"}`}, nil
	}
	h := httpidem.HTTP(memstore.New(), handler, ns(t), httpidem.WithAnonymousCallers())
	ctx := t.Context()
	for i, body := range []string{`{"cents":`, "\xff\xfe"} {
		key := "k-" + strconv.Itoa(i)
		first, err := h(ctx, httpReq(key, body))
		if err != nil || first.StatusCode != 400 || first.Body != `{"error":"body is not JSON"}` || first.Headers[httpidem.HeaderReplayed] != "" {
			t.Fatalf("body %q: first answer %+v, %v; want the handler's 400", body, first, err)
		}
		again, err := h(ctx, httpReq(key, body))
		if err != nil || again.StatusCode != 400 || again.Body != first.Body || again.Headers[httpidem.HeaderReplayed] != "true" {
			t.Fatalf("body %q: repeat %+v, %v; want the stored 400, replayed", body, again, err)
		}
		fixed, err := h(ctx, httpReq(key, `{"cents":100}`))
		if err != nil || fixed.StatusCode != 422 {
			t.Fatalf("body %q: the key with another body got %+v, %v; want 422 (key reused)", body, fixed, err)
		}
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("handler ran %d times, want 2 (once per malformed body)", n)
	}
}
