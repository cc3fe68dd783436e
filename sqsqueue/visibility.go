package sqsqueue

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// MaxVisibility is the longest visibility timeout SQS accepts (12 hours).
const MaxVisibility = 12 * time.Hour

// ChangeMessageVisibilityAPI is the part of *sqs.Client that
// VisibilityChanger uses.
type ChangeMessageVisibilityAPI interface {
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

// VisibilityChanger changes the visibility of SQS records delivered to a
// Lambda function. It implements lambdaidem.VisibilityChanger and is safe
// for concurrent use.
type VisibilityChanger struct {
	client   ChangeMessageVisibilityAPI
	resolver *resolver
}

var _ lambdaidem.VisibilityChanger = (*VisibilityChanger)(nil)

// VisibilityOption configures a VisibilityChanger.
type VisibilityOption func(*visibilityConfig)

type visibilityConfig struct {
	endpoint string
	urls     map[string]string
	fn       func(arn string) (string, error)
}

// WithEndpoint sets the base endpoint queue URLs are derived against
// (ENDPOINT/ACCOUNT/NAME) when the client cannot call GetQueueUrl. Without
// it the client's own BaseEndpoint is used (which reflects
// AWS_ENDPOINT_URL_SQS for clients built with sqs.NewFromConfig), and
// without that AWS's public endpoint of the ARN's Region. A client that has
// GetQueueUrl (*sqs.Client does) never needs it: SQS itself says the URL.
func WithEndpoint(url string) VisibilityOption {
	return func(c *visibilityConfig) { c.endpoint = url }
}

// WithQueueURLs sets explicit queue URLs by queue ARN. They win over every
// other rule.
func WithQueueURLs(byARN map[string]string) VisibilityOption {
	return func(c *visibilityConfig) { c.urls = byARN }
}

// WithQueueURLFunc sets a function that maps a queue ARN to its URL. It is
// asked after WithQueueURLs; an empty URL with a nil error falls through to
// GetQueueUrl (or derivation).
func WithQueueURLFunc(f func(arn string) (string, error)) VisibilityOption {
	return func(c *visibilityConfig) { c.fn = f }
}

// NewVisibilityChanger returns a VisibilityChanger using client. When
// client also has GetQueueUrl (*sqs.Client does; see QueueURLGetter), each
// source queue's URL is asked of SQS once, by name and owner account, and
// cached; otherwise it is derived from the ARN (see WithEndpoint).
//
// A nil client, a WithEndpoint that is not an http(s) URL, and a
// WithQueueURLs entry whose key is not a queue ARN (ParseARN) or whose URL
// is not that queue's URL (CheckQueueURL, naming the ARN's queue) are
// refused at once: NewVisibilityChanger panics with a
// *idemstore.ConfigError wrapping ErrInvalidARN, ErrInvalidQueueURL or
// idemstore.ErrInvalidOption, rather than fail each message.
func NewVisibilityChanger(client ChangeMessageVisibilityAPI, opts ...VisibilityOption) *VisibilityChanger {
	const handler = "sqsqueue.NewVisibilityChanger"
	var c visibilityConfig
	for _, o := range opts {
		o(&c)
	}
	if nilClient(client) {
		refuse(handler, "client", fmt.Errorf("%w: the SQS client is nil", idemstore.ErrInvalidOption))
	}
	if c.endpoint != "" {
		if err := checkEndpoint(c.endpoint); err != nil {
			refuse(handler, "WithEndpoint", err)
		}
	}
	for arn, u := range c.urls {
		a, err := ParseARN(arn)
		if err == nil {
			err = CheckQueueURL(u)
		}
		if err == nil && !urlNames(u, a) {
			err = fmt.Errorf("%w: %q does not name the queue %s", ErrInvalidQueueURL, u, arn)
		}
		if err != nil {
			refuse(handler, "WithQueueURLs", fmt.Errorf("%w: %w", idemstore.ErrInvalidOption, err))
		}
	}
	return &VisibilityChanger{client: client, resolver: newResolver(client, c.endpoint, c.urls, c.fn)}
}

// ChangeVisibility makes msg visible again after timeout, counted from now.
// The timeout is clamped to SQS's range (ClampVisibility). The queue URL
// comes from msg.EventSourceARN, validated strictly (ParseARN) and resolved
// as NewVisibilityChanger says.
//
// Errors: ErrInvalidARN for an unusable eventSourceARN (or one in another
// Region than the client's); ErrNotInFlight for
// a missing, invalid or expired receipt handle; ErrVisibilityLimit when SQS
// refuses because the message would stay invisible more than 12 hours in
// total; ErrQueueNotFound, ErrAccessDenied and ErrUnreachable as for Send.
func (v *VisibilityChanger) ChangeVisibility(ctx context.Context, msg events.SQSMessage, timeout time.Duration) error {
	if msg.ReceiptHandle == "" {
		return fmt.Errorf("%w: message %s has no receipt handle", ErrNotInFlight, msg.MessageId)
	}
	url, err := v.resolver.queueURL(ctx, msg.EventSourceARN)
	if err != nil {
		return err
	}
	secs := int32(ClampVisibility(timeout) / time.Second)
	_, err = v.client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl:          &url,
		ReceiptHandle:     &msg.ReceiptHandle,
		VisibilityTimeout: secs,
	})
	if err != nil {
		return wrap(err, "change visibility of message %s on %s to %ds", msg.MessageId, url, secs)
	}
	return nil
}

// ClampVisibility returns the visibility timeout that will be sent for d:
// rounded up to whole seconds (SQS's unit; never shorter than asked), and
// within 0..MaxVisibility.
func ClampVisibility(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	if d >= MaxVisibility {
		return MaxVisibility
	}
	return ((d + time.Second - 1) / time.Second) * time.Second
}

// Jitter returns a duration drawn uniformly from [d, d+spread*d], so that
// messages waiting for the same event (a lease ending) do not all come back
// at the same second. Spread is a fraction (0.2 adds up to 20%); d <= 0 or
// spread <= 0 return d unchanged.
func Jitter(d time.Duration, spread float64) time.Duration {
	if d <= 0 || spread <= 0 {
		return d
	}
	extra := time.Duration(float64(d) * spread * rand.Float64())
	return d + extra
}
