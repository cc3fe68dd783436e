package dynamo

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Defaults of Tuning.
const (
	// DefaultConcurrency matches the decorator's default record
	// concurrency.
	DefaultConcurrency = 10
	// DefaultAttemptTimeout bounds one HTTP attempt. DynamoDB answers in
	// milliseconds; an attempt that takes a second is better abandoned and
	// retried on a fresh connection.
	DefaultAttemptTimeout = time.Second
	// DefaultMaxAttempts is how many times one call is tried in all.
	DefaultMaxAttempts = 3
	// DefaultMaxBackoff caps the jittered wait between attempts.
	DefaultMaxBackoff = 200 * time.Millisecond
)

// Tuning shapes the SDK client for a Lambda function that must fail closed
// quickly (docs/design.md, rule 7). Zero fields take the defaults above.
type Tuning struct {
	// Concurrency is how many requests the function makes at once (the
	// decorator's record concurrency). The transport keeps that many idle
	// connections to DynamoDB, so a batch does not open new TLS
	// connections for every record. Default DefaultConcurrency.
	Concurrency int
	// AttemptTimeout bounds each HTTP attempt, including reading the
	// response. Default DefaultAttemptTimeout.
	AttemptTimeout time.Duration
	// MaxAttempts is the total number of tries per call. Default
	// DefaultMaxAttempts.
	MaxAttempts int
	// MaxBackoff caps the jittered delay between tries. Default
	// DefaultMaxBackoff.
	MaxBackoff time.Duration
}

// ClientOptions returns an option for dynamodb.NewFromConfig (or
// dynamodb.New) that applies t:
//
//   - a per-attempt timeout, so one hung connection costs one attempt, not
//     the invocation;
//   - the standard retryer with few attempts and a short jittered backoff,
//     and no client-side retry quota (ratelimit.None): the SDK's default
//     token bucket empties during an outage and then refuses retries for a
//     while after DynamoDB has recovered, failing records that would have
//     succeeded;
//   - an HTTP transport keeping Concurrency idle connections per host;
//   - response checksums validated against AWS only (see
//     ChecksumsOnAWSOnly), so a client pointed at DynamoDB Local or another
//     emulator does not log a checksum warning for every refused claim.
//
// The caller's context still bounds the whole call, retries included.
func ClientOptions(t Tuning) func(*dynamodb.Options) {
	if t.Concurrency <= 0 {
		t.Concurrency = DefaultConcurrency
	}
	if t.AttemptTimeout <= 0 {
		t.AttemptTimeout = DefaultAttemptTimeout
	}
	if t.MaxAttempts <= 0 {
		t.MaxAttempts = DefaultMaxAttempts
	}
	if t.MaxBackoff <= 0 {
		t.MaxBackoff = DefaultMaxBackoff
	}
	return func(o *dynamodb.Options) {
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = t.MaxAttempts
			so.MaxBackoff = t.MaxBackoff
			so.Backoff = retry.NewExponentialJitterBackoff(t.MaxBackoff)
			so.RateLimiter = ratelimit.None
		})
		// A max-attempts setting from the environment or the shared
		// config would otherwise wrap the Retryer above and override it.
		o.RetryMaxAttempts = 0
		o.RetryMode = aws.RetryModeStandard
		o.HTTPClient = awshttp.NewBuildableClient().
			WithTimeout(t.AttemptTimeout).
			WithTransportOptions(func(tr *http.Transport) {
				tr.MaxIdleConnsPerHost = max(t.Concurrency, tr.MaxIdleConnsPerHost)
				tr.MaxIdleConns = max(2*t.Concurrency, tr.MaxIdleConns)
			})
		ChecksumsOnAWSOnly()(o)
	}
}

// checksumMiddlewareID is the SDK's ID for the middleware that checks the
// CRC32 DynamoDB sends with every response.
const checksumMiddlewareID = "DynamoDB:ResponseChecksumValidation"

// ChecksumsOnAWSOnly returns an option for dynamodb.NewFromConfig (or
// dynamodb.New) that keeps the SDK's response checksum check for requests
// sent to AWS and skips it for every other host.
//
// DynamoDB Local sends a CRC32 header that does not match the body of some
// error responses (a refused conditional write among them). The SDK then
// logs "failed to close HTTP response body ... response did not match
// expected checksum" for each one: harmless, but one line per duplicate
// message drowns the output of local runs and tests. The decision is made
// for each request from the host it was actually sent to, so the option may
// come before or after the one that sets BaseEndpoint, and a client whose
// endpoint comes from AWS_ENDPOINT_URL_DYNAMODB is covered too. AWS hosts
// are those under amazonaws.com, amazonaws.com.cn and api.aws.
//
// ClientOptions includes it; use it on its own for a client built without
// ClientOptions.
func ChecksumsOnAWSOnly() func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			inner, ok := stack.Deserialize.Get(checksumMiddlewareID)
			if !ok {
				return nil // validation is off altogether
			}
			if _, done := inner.(awsOnlyChecksum); done {
				return nil // the option was given twice
			}
			_, err := stack.Deserialize.Swap(checksumMiddlewareID, awsOnlyChecksum{inner: inner})
			return err
		})
	}
}

// awsOnlyChecksum runs the SDK's checksum middleware for requests to AWS and
// passes every other request straight through.
type awsOnlyChecksum struct {
	inner middleware.DeserializeMiddleware
}

func (awsOnlyChecksum) ID() string { return checksumMiddlewareID }

func (m awsOnlyChecksum) HandleDeserialize(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
	if req, ok := in.Request.(*smithyhttp.Request); ok && req.URL != nil && !IsAWSHost(req.URL.Hostname()) {
		return next.HandleDeserialize(ctx, in)
	}
	return m.inner.HandleDeserialize(ctx, in, next)
}

// IsAWSHost reports whether host (a name without port) belongs to an AWS
// service endpoint: one under amazonaws.com, amazonaws.com.cn or api.aws.
// Anything else — 127.0.0.1, localhost, an emulator's or a proxy's name —
// is a local or third-party endpoint.
func IsAWSHost(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, suffix := range []string{".amazonaws.com", ".amazonaws.com.cn", ".api.aws"} {
		if strings.HasSuffix(host, suffix) {
			return true
		}
	}
	return false
}
