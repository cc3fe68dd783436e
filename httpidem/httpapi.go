package httpidem

import (
	"context"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// HTTPHandler is an API Gateway HTTP API (payload 2.0) handler.
type HTTPHandler = func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// HTTP makes an API Gateway HTTP API handler honour the Idempotency-Key
// header, storing responses in store through lambdaidem.Wrap. The route is
// the method and the route key's path ("POST /payments"; "POST $default"
// for the default route). The result is accepted by lambda.Start.
func HTTP(store lambdaidem.Store, h HTTPHandler, opts ...Option) HTTPHandler {
	return newHandler(store, h, httpAdapter, opts)
}

var httpAdapter = adapter[events.APIGatewayV2HTTPRequest, events.APIGatewayV2HTTPResponse]{
	name: "httpidem.HTTP",
	keyValues: func(r events.APIGatewayV2HTTPRequest) []string {
		// HTTP APIs lower-case header names and join repeated fields with
		// commas, which ParseKey refuses outside quotes.
		if v, ok := lookup(r.Headers, HeaderKey); ok {
			return []string{v}
		}
		return nil
	},
	route: func(r events.APIGatewayV2HTTPRequest) string {
		rk := r.RouteKey
		if i := strings.IndexByte(rk, ' '); i >= 0 {
			rk = rk[i+1:] // "ANY /x" serves several methods: keep the request's
		}
		return r.RequestContext.HTTP.Method + " " + rk
	},
	caller: HTTPCaller,
	fingerprint: func(r events.APIGatewayV2HTTPRequest) fingerprint {
		return newFingerprint(r.RequestContext.HTTP.Method, r.RawPath, r.Body, r.IsBase64Encoded)
	},
	status: func(r events.APIGatewayV2HTTPResponse) int { return r.StatusCode },
	markReplay: func(r *events.APIGatewayV2HTTPResponse) {
		if r.Headers == nil {
			r.Headers = map[string]string{}
		}
		r.Headers[HeaderReplayed] = "true"
	},
	response: func(status int, headers map[string]string, body string) events.APIGatewayV2HTTPResponse {
		return events.APIGatewayV2HTTPResponse{StatusCode: status, Headers: headers, Body: body}
	},
}

// HTTPCaller is the default caller of an HTTP API request: the JWT
// authorizer's "sub" claim, else the IAM caller's ARN, else the Cognito
// identity, else a Lambda authorizer context's "principalId" or "sub", each
// prefixed with its kind ("sub:", "iam:", "cognito:", "principal:",
// "lambda-sub:"); "" (Anonymous) when the request carries none. HTTP APIs
// have no API keys.
func HTTPCaller(r events.APIGatewayV2HTTPRequest) string {
	a := r.RequestContext.Authorizer
	if a == nil {
		return ""
	}
	if a.JWT != nil && a.JWT.Claims["sub"] != "" {
		return "sub:" + a.JWT.Claims["sub"]
	}
	if a.IAM != nil {
		switch {
		case a.IAM.UserARN != "":
			return "iam:" + a.IAM.UserARN
		case a.IAM.CognitoIdentity.IdentityID != "":
			return "cognito:" + a.IAM.CognitoIdentity.IdentityID
		}
	}
	if s, ok := a.Lambda["principalId"].(string); ok && s != "" {
		return "principal:" + s
	}
	if s, ok := a.Lambda["sub"].(string); ok && s != "" {
		return "lambda-sub:" + s
	}
	return ""
}
