package httpidem_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/httpidem"
)

func TestParseKey(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("k", httpidem.DefaultMaxKeyLength)
	tests := []struct {
		in, want string
		err      error
	}{
		{in: `"8e03978e-40d5-43e8-bc93-6894a57f9324"`, want: "8e03978e-40d5-43e8-bc93-6894a57f9324"},
		{in: `8e03978e-40d5-43e8-bc93-6894a57f9324`, want: "8e03978e-40d5-43e8-bc93-6894a57f9324"},
		{in: `  "a b"  `, want: "a b"},
		{in: `"a\"b\\c"`, want: `a"b\c`},
		{in: `"a,b"`, want: "a,b"},
		{in: long, want: long},
		{in: long + "k", err: httpidem.ErrInvalidKey},
		{in: ``, err: httpidem.ErrInvalidKey},
		{in: `   `, err: httpidem.ErrInvalidKey},
		{in: `""`, err: httpidem.ErrInvalidKey},
		{in: `"abc`, err: httpidem.ErrInvalidKey},
		{in: `"a\nb"`, err: httpidem.ErrInvalidKey},
		{in: `"a", "b"`, err: httpidem.ErrInvalidKey},
		{in: `a, b`, err: httpidem.ErrInvalidKey},
		{in: `a b`, err: httpidem.ErrInvalidKey},
		{in: "caf\u00e9", err: httpidem.ErrInvalidKey},
		{in: "\"caf\u00e9\"", err: httpidem.ErrInvalidKey},
	}
	for _, tt := range tests {
		got, err := httpidem.ParseKey(tt.in, httpidem.DefaultMaxKeyLength)
		if !errors.Is(err, tt.err) || got != tt.want {
			t.Errorf("ParseKey(%q) = %q, %v; want %q, %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestRESTCaller(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ctx  events.APIGatewayProxyRequestContext
		want string
	}{
		{"none", events.APIGatewayProxyRequestContext{}, ""},
		{"lambda authorizer", events.APIGatewayProxyRequestContext{Authorizer: map[string]any{"principalId": "u1"}}, "principal:u1"},
		{"cognito user pool", events.APIGatewayProxyRequestContext{Authorizer: map[string]any{"claims": map[string]any{"sub": "s1"}}}, "sub:s1"},
		{"iam", events.APIGatewayProxyRequestContext{Identity: events.APIGatewayRequestIdentity{UserArn: "arn:aws:iam::1:user/a", APIKeyID: "k"}}, "iam:arn:aws:iam::1:user/a"},
		{"api key", events.APIGatewayProxyRequestContext{Identity: events.APIGatewayRequestIdentity{APIKeyID: "k1"}}, "apikey:k1"},
	}
	for _, tt := range tests {
		if got := httpidem.RESTCaller(events.APIGatewayProxyRequest{RequestContext: tt.ctx}); got != tt.want {
			t.Errorf("%s: RESTCaller = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestHTTPCaller(t *testing.T) {
	t.Parallel()
	type auth = events.APIGatewayV2HTTPRequestContextAuthorizerDescription
	tests := []struct {
		name string
		a    *auth
		want string
	}{
		{"none", nil, ""},
		{"empty", &auth{}, ""},
		{"jwt", &auth{JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": "s1"}}}, "sub:s1"},
		{"iam", &auth{IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "arn:x"}}, "iam:arn:x"},
		{"lambda", &auth{Lambda: map[string]any{"principalId": "p"}}, "principal:p"},
		{"lambda sub", &auth{Lambda: map[string]any{"sub": "s"}}, "lambda-sub:s"},
	}
	for _, tt := range tests {
		req := events.APIGatewayV2HTTPRequest{RequestContext: events.APIGatewayV2HTTPRequestContext{Authorizer: tt.a}}
		if got := httpidem.HTTPCaller(req); got != tt.want {
			t.Errorf("%s: HTTPCaller = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestStoreKeyKeepsCallersApart(t *testing.T) {
	t.Parallel()
	// A caller name that looks like "caller + separator + more" must not
	// collide with another caller's key.
	a := httpidem.StoreKey("POST /x", `a" "b`, "k")
	b := httpidem.StoreKey("POST /x", "a", `b" k`)
	if a == b {
		t.Fatalf("stored keys collide: %q", a)
	}
}
