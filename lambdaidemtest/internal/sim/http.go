package sim

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambdaidem/go-lambdaidem/httpidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// The request streams through httpidem: the HTTP API (payload 2.0) or,
// with Config.REST, the REST API (payload 1.0). Callers are told by a
// header the route reads (WithCaller), or with Config.AuthCaller by the
// authorizer identity the request carries, read by the default readers
// (HTTPCaller, RESTCaller), each caller always in the same form. With
// Config.BadKeys some requests carry an Idempotency-Key that is missing or
// not one (empty, too long, a byte it may not hold, sent twice, quoted
// badly): they must be answered 400 and never run, or, missing under
// WithKeyOptional, run without idempotency. The key header of the others
// comes in each form a client may send (bare, quoted, with spaces around).

// httpKeyForms are the header values of valid key k a client may send.
var httpKeyForms = []func(k string) string{
	func(k string) string { return `"` + k + `"` },
	func(k string) string { return k },
	func(k string) string { return `  "` + k + `" ` },
}

// badKeys are the Idempotency-Key values that are not a key: each must be
// answered 400 (missing: the header is left out).
var badKeys = []string{"missing", `""`, "two words", `"r1", "r2"`, `"unterminated`, `"bad\escape"`, "long"}

// httpMaxKeyLength is WithMaxKeyLength when Config.HTTPOptions sets it.
const httpMaxKeyLength = 32

// unkeyed is the body a run without idempotency answers.
const unkeyed = "unkeyed"

// httpCall returns one call of the function through httpidem, as a client
// sees it: a 2xx is a success.
func (s *Scenario) httpCall(store idemstore.Store, opts []lambdaidem.Option) func(ctx context.Context, rq request) (reply, error) {
	c := s.Cfg
	hopts := []httpidem.Option{httpidem.WithWrapOptions(opts...)}
	if c.Callers > 1 {
		hopts = append(hopts, httpidem.WithAnonymousCallers())
	}
	if c.KeyOptional {
		hopts = append(hopts, httpidem.WithKeyOptional())
	}
	if c.HTTPOptions {
		hopts = append(hopts, httpidem.WithProblemType("https://sim.invalid/idempotency"),
			httpidem.WithUnavailableRetryAfter(2*time.Second), httpidem.WithWriteRefusedStatus(422),
			httpidem.WithMaxKeyLength(httpMaxKeyLength))
	}
	// The handler's behaviour rides in headers; its response names the
	// caller it was made for, so a client that gets another caller's
	// stored response sees it.
	handle := func(ctx context.Context, h map[string]string) (int, string, error) {
		var rq request
		rq.Key = strings.Trim(strings.TrimSpace(h["idempotency-key"]), `"`)
		rq.Fail, _ = strconv.Atoi(h["x-fail"])
		rq.Slow, _ = strconv.Atoi(h["x-slow"])
		rq.Honour = h["x-honour"] == "1"
		rq.Caller = h["x-caller"]
		rq.Late = h["x-late"] == "1"
		rq.Bad = h["x-bad"]
		if _, keyed := lambdaidem.LeaseFromContext(ctx); !keyed {
			// A request without a key (WithKeyOptional) runs without
			// idempotency: nothing of it is the checker's.
			if rq.Bad != "missing" || !c.KeyOptional {
				s.violate(InvProgress, "request %s (key header %s) ran without a key", rq.id(), rq.Bad)
			}
			return 200, unkeyed, nil
		}
		if rq.Bad != "" {
			s.violate(InvProgress, "request %s with a bad Idempotency-Key (%s) ran under a lease: it has no key", rq.id(), rq.Bad)
		}
		out, err := s.wrapped(ctx, rq)
		switch {
		case errors.Is(err, errTransient) && h["x-503"] == "1":
			// The downstream is down: a 5xx, which is never stored.
			return 503, "downstream unavailable", nil
		case err != nil:
			return 0, "", err
		}
		return 201, rq.Caller + "|" + fmt.Sprint(out["n"]), nil
	}
	var call func(ctx context.Context, rq request, headers map[string]string) (events.APIGatewayV2HTTPResponse, error)
	if !c.REST {
		if !c.AuthCaller {
			hopts = append(hopts, httpidem.WithCaller(func(r events.APIGatewayV2HTTPRequest) string { return r.Headers["x-caller"] }))
		}
		h := httpidem.HTTP(store, func(ctx context.Context, r events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			status, body, err := handle(ctx, r.Headers)
			return events.APIGatewayV2HTTPResponse{StatusCode: status, Body: body}, err
		}, hopts...)
		call = func(ctx context.Context, rq request, headers map[string]string) (events.APIGatewayV2HTTPResponse, error) {
			req := events.APIGatewayV2HTTPRequest{RouteKey: "POST /pay", RawPath: "/pay", Body: `{"amount":` + strconv.Itoa(rq.Amount) + `}`, Headers: headers}
			req.RequestContext.HTTP.Method = "POST"
			if c.AuthCaller && rq.Caller != "" {
				req.RequestContext.Authorizer = httpAuthorizer(rq.Caller)
			}
			return h(ctx, req)
		}
	} else {
		if !c.AuthCaller {
			hopts = append(hopts, httpidem.WithCaller(func(r events.APIGatewayProxyRequest) string { return r.Headers["x-caller"] }))
		}
		h := httpidem.REST(store, func(ctx context.Context, r events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
			status, body, err := handle(ctx, r.Headers)
			return events.APIGatewayProxyResponse{StatusCode: status, Body: body}, err
		}, hopts...)
		call = func(ctx context.Context, rq request, headers map[string]string) (events.APIGatewayV2HTTPResponse, error) {
			req := events.APIGatewayProxyRequest{Resource: "/pay", Path: "/pay", HTTPMethod: "POST", Body: `{"amount":` + strconv.Itoa(rq.Amount) + `}`, Headers: headers}
			if rq.Bad == `"r1", "r2"` {
				// A REST API sends each occurrence of a header given twice.
				delete(req.Headers, "idempotency-key")
				req.MultiValueHeaders = map[string][]string{"Idempotency-Key": {`"r1"`, `"r2"`}}
			}
			if c.AuthCaller && rq.Caller != "" {
				restAuthorizer(&req, rq.Caller)
			}
			resp, err := h(ctx, req)
			return events.APIGatewayV2HTTPResponse{StatusCode: resp.StatusCode, Headers: resp.Headers, Body: resp.Body}, err
		}
	}
	return func(ctx context.Context, rq request) (reply, error) {
		headers := map[string]string{
			"x-caller": rq.Caller, "x-fail": strconv.Itoa(rq.Fail),
			"x-slow": strconv.Itoa(rq.Slow), "x-honour": map[bool]string{true: "1", false: "0"}[rq.Honour],
		}
		switch rq.Bad {
		case "":
			headers["idempotency-key"] = httpKeyForms[s.w.rng.IntN(len(httpKeyForms))](rq.Key)
		case "missing":
		case "long":
			headers["idempotency-key"] = strings.Repeat("k", httpMaxKeyLength+1)
			if !c.HTTPOptions {
				headers["idempotency-key"] = strings.Repeat("k", httpidem.DefaultMaxKeyLength+1)
			}
		default:
			headers["idempotency-key"] = rq.Bad
		}
		if rq.Bad != "" {
			headers["x-bad"] = rq.Bad
		}
		if rq.Late {
			headers["x-late"] = "1"
		}
		if rq.Fail503 {
			headers["x-503"] = "1"
		}
		resp, err := call(ctx, rq, headers)
		if err == nil {
			s.waiterAnswer(s.w.cur.owner, rq, nil, &resp, nil)
		}
		switch {
		case err != nil:
			return nil, err
		case rq.Bad != "":
			return nil, s.badKeyAnswer(rq, resp)
		case resp.StatusCode/100 != 2:
			return nil, &httpError{status: resp.StatusCode, body: resp.Body}
		}
		who, n, _ := strings.Cut(resp.Body, "|")
		if who != rq.Caller {
			s.violate(InvCallers, "caller isolation: request %q of caller %q got the response stored for caller %q", rq.Key, rq.Caller, who)
		}
		return reply{"n": n, "replayed": resp.Headers[httpidem.HeaderReplayed] == "true"}, nil
	}
}

// badKeyAnswer checks the answer to a request whose Idempotency-Key is not
// a key: 400, saying the key is missing or invalid; or, missing under
// WithKeyOptional, the unkeyed run's answer. It returns what the client
// makes of it (never a success: the checker holds nothing of it).
func (s *Scenario) badKeyAnswer(rq request, resp events.APIGatewayV2HTTPResponse) error {
	want := `"idempotency-key-invalid"`
	if rq.Bad == "missing" {
		want = `"idempotency-key-missing"`
	}
	switch {
	case rq.Bad == "missing" && s.Cfg.KeyOptional:
		if resp.StatusCode != 200 || resp.Body != unkeyed {
			s.violate(InvProgress, "request %s without an Idempotency-Key, on a route where the key is optional, answered %d %q: it must run without idempotency", rq.id(), resp.StatusCode, resp.Body)
		}
	case resp.StatusCode != 400 || !strings.Contains(resp.Body, want):
		s.violate(InvProgress, "request %s with the Idempotency-Key %q answered %d %q: want 400 with code %s", rq.id(), rq.Bad, resp.StatusCode, resp.Body, want)
	}
	return &httpError{status: resp.StatusCode, body: resp.Body}
}

// form is the authorizer form a caller's identity always comes in.
func form(caller string, forms int) int {
	h := fnv.New32a()
	h.Write([]byte(caller))
	return int(h.Sum32() % uint32(forms))
}

// httpAuthorizer carries caller in one of the forms HTTPCaller reads.
func httpAuthorizer(caller string) *events.APIGatewayV2HTTPRequestContextAuthorizerDescription {
	a := &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{}
	switch form(caller, 5) {
	case 0:
		a.JWT = &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": caller}}
	case 1:
		a.IAM = &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::000000000000:user/" + caller}
	case 2:
		a.IAM = &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{}
		a.IAM.CognitoIdentity.IdentityID = "us-east-1:" + caller
	case 3:
		a.Lambda = map[string]any{"principalId": caller}
	default:
		a.Lambda = map[string]any{"sub": caller}
	}
	return a
}

// restAuthorizer carries caller in one of the forms RESTCaller reads.
func restAuthorizer(r *events.APIGatewayProxyRequest, caller string) {
	switch form(caller, 5) {
	case 0:
		r.RequestContext.Authorizer = map[string]any{"principalId": caller}
	case 1:
		r.RequestContext.Authorizer = map[string]any{"claims": map[string]any{"sub": caller}}
	case 2:
		r.RequestContext.Identity.UserArn = "arn:aws:iam::000000000000:user/" + caller
	case 3:
		r.RequestContext.Identity.CognitoIdentityID = "us-east-1:" + caller
	default:
		r.RequestContext.Identity.APIKeyID = caller
	}
}
