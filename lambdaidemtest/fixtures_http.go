package lambdaidemtest

import (
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// HTTPRequest builds an API Gateway HTTP API request (payload format 2.0)
// the way Lambda hands it to a function, for handlers behind httpidem:
// method and path, the route key "METHOD path", the headers with their
// names in lower case (as API Gateway passes them), the request context
// (stage $default, a request ID derived from the request, FixtureTime) and
// body as text.
func HTTPRequest(method, path, body string, headers map[string]string) events.APIGatewayV2HTTPRequest {
	h := make(map[string]string, len(headers))
	for k, v := range headers {
		h[strings.ToLower(k)] = v
	}
	return events.APIGatewayV2HTTPRequest{
		Version:  "2.0",
		RouteKey: method + " " + path,
		RawPath:  path,
		Headers:  h,
		Body:     body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:     method + " " + path,
			AccountID:    Account,
			Stage:        "$default",
			RequestID:    uuidOf("http:" + method + " " + path + "\n" + body),
			APIID:        "fixture",
			DomainName:   "fixture.execute-api." + Region + ".amazonaws.com",
			DomainPrefix: "fixture",
			Time:         FixtureTime.Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:    FixtureTime.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method: method, Path: path, Protocol: "HTTP/1.1", SourceIP: "192.0.2.1", UserAgent: "lambdaidemtest",
			},
		},
	}
}
