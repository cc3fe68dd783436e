package sqsqueue

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

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

// Limits of a queue ARN's parts that ParseARN enforces.
const (
	// MaxQueueNameLength is SQS's limit on a queue name, ".fifo" included.
	MaxQueueNameLength = 80
	maxPartLength      = 32
)

// ParseARN parses an SQS queue ARN such as an SQS record's eventSourceARN,
// strictly, because an ARN often comes from outside (a dead-letter copy's
// metadata can be written by anyone allowed to send to the DLQ): the
// partition is "aws" or "aws-" and lowercase words; the Region lowercase
// letters and digits in hyphen-separated words (us-east-1, eu-isoe-west-1);
// the account ID exactly 12 digits; the queue name 1 to 80 letters, digits,
// hyphens and underscores, optionally ending in ".fifo" (counted in the
// 80). Anything else is ErrInvalidARN.
func ParseARN(s string) (ARN, error) {
	parts := strings.SplitN(s, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" {
		return ARN{}, fmt.Errorf("%w: %q is not arn:PARTITION:sqs:REGION:ACCOUNT:NAME", ErrInvalidARN, s)
	}
	a := ARN{Partition: parts[1], Region: parts[3], Account: parts[4], Name: parts[5]}
	var why string
	switch {
	case !validPartition(a.Partition):
		why = "partition"
	case !validRegion(a.Region):
		why = "Region"
	case !validAccount(a.Account):
		why = "account ID (12 digits)"
	case !ValidQueueName(a.Name):
		why = "queue name"
	default:
		return a, nil
	}
	return ARN{}, fmt.Errorf("%w: bad %s in %q", ErrInvalidARN, why, s)
}

func validPartition(p string) bool {
	if p == "aws" {
		return true
	}
	rest, ok := strings.CutPrefix(p, "aws-")
	return ok && len(p) <= maxPartLength && hyphenWords(rest, false)
}

func validRegion(r string) bool {
	return len(r) <= maxPartLength && hyphenWords(r, true)
}

// hyphenWords reports whether s is one or more non-empty words of
// lowercase letters (and digits, with digits) joined by single hyphens.
func hyphenWords(s string, digits bool) bool {
	if s == "" {
		return false
	}
	for w := range strings.SplitSeq(s, "-") {
		if w == "" {
			return false
		}
		for _, c := range w {
			if !('a' <= c && c <= 'z' || digits && '0' <= c && c <= '9') {
				return false
			}
		}
	}
	return true
}

func validAccount(a string) bool {
	if len(a) != 12 {
		return false
	}
	for _, c := range a {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// ValidQueueName reports whether name is a queue name SQS accepts: 1 to 80
// characters, letters, digits, hyphens and underscores, with an optional
// ".fifo" suffix (FIFO queues) counted in the 80.
func ValidQueueName(name string) bool {
	base := strings.TrimSuffix(name, ".fifo")
	if base == "" || len(name) > MaxQueueNameLength {
		return false
	}
	for _, c := range base {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
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

// QueueURL derives a queue's URL from its ARN without calling SQS, for
// clients that cannot call GetQueueUrl (Redrive and VisibilityChanger ask
// SQS itself when the client can, which also works on emulators whose URLs
// look different). The ARN is validated by ParseARN first. With an
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

// QueueURLGetter is the part of *sqs.Client that resolves a queue's URL
// from its name and owner account.
type QueueURLGetter interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
}

// resolver turns queue ARNs into URLs: explicit overrides first, then SQS's
// own answer to GetQueueUrl (name and owner account, asked once per ARN and
// cached), and only for a client that cannot ask, derivation against the
// configured endpoint. Every ARN is validated strictly before any of these.
// It is safe for concurrent use.
type resolver struct {
	endpoint string
	urls     map[string]string
	fn       func(arn string) (string, error)
	getter   QueueURLGetter
	region   string // the client's Region, when it shows its options

	mu    sync.Mutex
	cache map[string]string
}

// newResolver picks the endpoint: an explicit one wins; else the client's
// own BaseEndpoint when the client exposes its options (*sqs.Client does,
// and it already reflects AWS_ENDPOINT_URL_SQS and AWS_ENDPOINT_URL); else,
// for clients that hide their options (wrappers), the SDK's environment
// variables; else none, meaning AWS's public endpoints. The endpoint is
// only used when the client cannot call GetQueueUrl.
func newResolver(client any, endpoint string, urls map[string]string, fn func(string) (string, error)) *resolver {
	if endpoint == "" {
		endpoint = clientEndpoint(client)
	}
	r := &resolver{endpoint: endpoint, urls: urls, fn: fn, cache: map[string]string{}}
	r.getter, _ = client.(QueueURLGetter)
	if c, ok := client.(interface{ Options() sqs.Options }); ok {
		r.region = c.Options().Region
	}
	return r
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

func (r *resolver) queueURL(ctx context.Context, arn string) (string, error) {
	a, err := ParseARN(arn)
	if err != nil {
		return "", err
	}
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
	if r.getter == nil {
		return QueueURL(arn, r.endpoint)
	}
	r.mu.Lock()
	u, ok := r.cache[arn]
	r.mu.Unlock()
	if ok {
		return u, nil
	}
	if r.region != "" && a.Region != r.region {
		return "", fmt.Errorf("%w: queue %q is in Region %s, the SQS client in %s: configure its URL", ErrInvalidARN, arn, a.Region, r.region)
	}
	out, err := r.getter.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: &a.Name, QueueOwnerAWSAccountId: &a.Account})
	if err != nil {
		return "", wrap(err, "resolve the URL of queue %s", arn)
	}
	u = deref(out.QueueUrl)
	if !urlNames(u, a) {
		return "", fmt.Errorf("%w: SQS answered %q for queue %s, which names another queue or account", ErrInvalidARN, u, arn)
	}
	r.mu.Lock()
	r.cache[arn] = u
	r.mu.Unlock()
	return u, nil
}

// urlNames reports whether a queue URL from GetQueueUrl names the ARN's
// queue: its last path segment is the queue name and, when the segment
// before it is an account ID (as in SQS's own URLs), it is the ARN's. Some
// emulators ignore the owner account in GetQueueUrl; this keeps a queue of
// one account from standing in for another's.
func urlNames(u string, a ARN) bool {
	rest, name, ok := cutLast(u)
	if !ok || name != a.Name {
		return false
	}
	if _, acct, ok := cutLast(rest); ok && validAccount(acct) && acct != a.Account {
		return false
	}
	return true
}

func cutLast(s string) (before, last string, ok bool) {
	i := strings.LastIndexByte(s, '/')
	if i < 0 {
		return "", "", false
	}
	return s[:i], s[i+1:], true
}

// isFIFO reports whether a queue URL (or name) is a FIFO queue's: SQS
// requires FIFO queue names to end in ".fifo".
func isFIFO(queueURL string) bool { return strings.HasSuffix(queueURL, ".fifo") }
