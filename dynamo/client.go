package dynamo

import (
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
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
// quickly (DESIGN §3a.7). Zero fields take the defaults above.
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
//   - an HTTP transport keeping Concurrency idle connections per host.
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
	}
}
