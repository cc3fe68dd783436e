package httpidem

import (
	"context"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// RESTHandler is an API Gateway REST API (payload 1.0) proxy handler.
type RESTHandler = func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error)

// REST makes an API Gateway REST API handler honour the Idempotency-Key
// header, storing responses in store through lambdaidem.Wrap. The route is
// the method and the resource ("POST /payments/{id}"). The result is
// accepted by lambda.Start.
func REST(store lambdaidem.Store, h RESTHandler, opts ...Option) RESTHandler {
	return newHandler(store, h, restAdapter, opts)
}

var restAdapter = adapter[events.APIGatewayProxyRequest, events.APIGatewayProxyResponse]{
	name: "httpidem.REST",
	keyValues: func(r events.APIGatewayProxyRequest) []string {
		// MultiValueHeaders holds every occurrence when API Gateway sends
		// it; Headers keeps only the last one.
		if vs := lookupMulti(r.MultiValueHeaders, HeaderKey); vs != nil {
			return vs
		}
		if v, ok := lookup(r.Headers, HeaderKey); ok {
			return []string{v}
		}
		return nil
	},
	route: func(r events.APIGatewayProxyRequest) string {
		return r.HTTPMethod + " " + r.Resource
	},
	caller: RESTCaller,
	fingerprint: func(r events.APIGatewayProxyRequest) fingerprint {
		return newFingerprint(r.HTTPMethod, r.Path, r.Body, r.IsBase64Encoded)
	},
	status: func(r events.APIGatewayProxyResponse) int { return r.StatusCode },
	markReplay: func(r *events.APIGatewayProxyResponse) {
		if r.Headers == nil {
			r.Headers = map[string]string{}
		}
		r.Headers[HeaderReplayed] = "true"
	},
	response: func(status int, headers map[string]string, body string) events.APIGatewayProxyResponse {
		return events.APIGatewayProxyResponse{StatusCode: status, Headers: headers, Body: body}
	},
}

// RESTCaller is the default caller of a REST API request: the Lambda
// authorizer's principalId, else the Cognito user pool authorizer's "sub"
// claim, else the IAM caller's ARN, else the Cognito identity, else the API
// key's ID, each prefixed with its kind ("principal:", "sub:", "iam:",
// "cognito:", "apikey:"); "" (Anonymous) when the request carries none.
func RESTCaller(r events.APIGatewayProxyRequest) string {
	auth := r.RequestContext.Authorizer
	if s, ok := auth["principalId"].(string); ok && s != "" {
		return "principal:" + s
	}
	if claims, ok := auth["claims"].(map[string]any); ok {
		if s, ok := claims["sub"].(string); ok && s != "" {
			return "sub:" + s
		}
	}
	id := r.RequestContext.Identity
	switch {
	case id.UserArn != "":
		return "iam:" + id.UserArn
	case id.CognitoIdentityID != "":
		return "cognito:" + id.CognitoIdentityID
	case id.APIKeyID != "":
		return "apikey:" + id.APIKeyID
	}
	return ""
}

// lookup finds a header case-insensitively (REST API events keep the
// client's spelling).
func lookup(h map[string]string, name string) (string, bool) {
	if v, ok := h[name]; ok {
		return v, true
	}
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

func lookupMulti(h map[string][]string, name string) []string {
	var out []string
	for k, vs := range h {
		if strings.EqualFold(k, name) {
			out = append(out, vs...)
		}
	}
	return out
}
