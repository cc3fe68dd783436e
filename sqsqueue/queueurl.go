package sqsqueue

import (
	"fmt"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// ARN is a parsed SQS queue ARN: arn:PARTITION:sqs:REGION:ACCOUNT:NAME.
type ARN struct {
	Partition string
	Region    string
	Account   string
	Name      string
}

// String returns the ARN in its usual form.
func (a ARN) String() string {
	return "arn:" + a.Partition + ":sqs:" + a.Region + ":" + a.Account + ":" + a.Name
}

// ParseARN parses an SQS queue ARN such as an SQS record's eventSourceARN.
func ParseARN(s string) (ARN, error) {
	parts := strings.SplitN(s, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" {
		return ARN{}, fmt.Errorf("%w: %q", ErrInvalidARN, s)
	}
	a := ARN{Partition: parts[1], Region: parts[3], Account: parts[4], Name: parts[5]}
	if a.Partition == "" || a.Region == "" || a.Account == "" || a.Name == "" ||
		strings.ContainsAny(a.Name, ":/") || strings.ContainsAny(a.Account, "/") {
		return ARN{}, fmt.Errorf("%w: %q", ErrInvalidARN, s)
	}
	return a, nil
}

// partitionDomains maps partitions to the DNS suffix of their public SQS
// endpoints, so a queue URL is derived without a network call.
var partitionDomains = map[string]string{
	"aws":        "amazonaws.com",
	"aws-cn":     "amazonaws.com.cn",
	"aws-us-gov": "amazonaws.com",
	"aws-iso":    "c2s.ic.gov",
	"aws-iso-b":  "sc2s.sgov.gov",
}

// QueueURL derives a queue's URL from its ARN without calling SQS. With an
// endpoint (an emulator, LocalStack, a VPC endpoint) the URL is
// ENDPOINT/ACCOUNT/NAME; without one it is the public endpoint of the ARN's
// Region, https://sqs.REGION.amazonaws.com/ACCOUNT/NAME (or the partition's
// own domain). SQS accepts any URL that names the right account and queue on
// an endpoint of the queue's Region.
func QueueURL(arn, endpoint string) (string, error) {
	a, err := ParseARN(arn)
	if err != nil {
		return "", err
	}
	if endpoint != "" {
		return strings.TrimRight(endpoint, "/") + "/" + a.Account + "/" + a.Name, nil
	}
	domain, ok := partitionDomains[a.Partition]
	if !ok {
		return "", fmt.Errorf("%w: unknown partition %q in %q: configure an endpoint or a queue URL override", ErrInvalidARN, a.Partition, arn)
	}
	return "https://sqs." + a.Region + "." + domain + "/" + a.Account + "/" + a.Name, nil
}

// resolver turns source queue ARNs into URLs: explicit overrides first,
// then derivation against the configured endpoint.
type resolver struct {
	endpoint string
	urls     map[string]string
	fn       func(arn string) (string, error)
}

// newResolver picks the endpoint: an explicit one wins; else the client's
// own BaseEndpoint when the client exposes its options (*sqs.Client does,
// and it already reflects AWS_ENDPOINT_URL_SQS and AWS_ENDPOINT_URL); else,
// for clients that hide their options (wrappers), the SDK's environment
// variables; else none, meaning AWS's public endpoints.
func newResolver(client any, endpoint string, urls map[string]string, fn func(string) (string, error)) resolver {
	if endpoint == "" {
		endpoint = clientEndpoint(client)
	}
	return resolver{endpoint: endpoint, urls: urls, fn: fn}
}

func clientEndpoint(client any) string {
	if c, ok := client.(interface{ Options() sqs.Options }); ok {
		if ep := c.Options().BaseEndpoint; ep != nil {
			return *ep
		}
		return ""
	}
	if strings.EqualFold(os.Getenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"), "true") {
		return ""
	}
	if ep := os.Getenv("AWS_ENDPOINT_URL_SQS"); ep != "" {
		return ep
	}
	return os.Getenv("AWS_ENDPOINT_URL")
}

func (r resolver) queueURL(arn string) (string, error) {
	if u, ok := r.urls[arn]; ok && u != "" {
		return u, nil
	}
	if r.fn != nil {
		u, err := r.fn(arn)
		if err != nil {
			return "", fmt.Errorf("sqsqueue: queue URL for %q: %w", arn, err)
		}
		if u != "" {
			return u, nil
		}
	}
	return QueueURL(arn, r.endpoint)
}

// isFIFO reports whether a queue URL (or name) is a FIFO queue's: SQS
// requires FIFO queue names to end in ".fifo".
func isFIFO(queueURL string) bool { return strings.HasSuffix(queueURL, ".fifo") }
