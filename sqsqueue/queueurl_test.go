package sqsqueue

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

func TestQueueURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, arn, endpoint, want string
		err                       error
	}{
		{name: "aws", arn: "arn:aws:sqs:eu-west-1:111122223333:orders", want: "https://sqs.eu-west-1.amazonaws.com/111122223333/orders"},
		{name: "fifo", arn: "arn:aws:sqs:us-east-1:111122223333:orders.fifo", want: "https://sqs.us-east-1.amazonaws.com/111122223333/orders.fifo"},
		{name: "china", arn: "arn:aws-cn:sqs:cn-north-1:111122223333:q", want: "https://sqs.cn-north-1.amazonaws.com.cn/111122223333/q"},
		{name: "govcloud", arn: "arn:aws-us-gov:sqs:us-gov-west-1:111122223333:q", want: "https://sqs.us-gov-west-1.amazonaws.com/111122223333/q"},
		{name: "emulator", arn: "arn:aws:sqs:us-east-1:123456789012:q", endpoint: "http://127.0.0.1:5000", want: "http://127.0.0.1:5000/123456789012/q"},
		{name: "endpoint trailing slash", arn: "arn:aws:sqs:us-east-1:000000000000:q", endpoint: "http://localhost:4566/", want: "http://localhost:4566/000000000000/q"},
		{name: "unknown partition with endpoint", arn: "arn:aws-xx:sqs:xx-1:111122223333:q", endpoint: "http://e", want: "http://e/111122223333/q"},
		{name: "unknown partition", arn: "arn:aws-xx:sqs:xx-1:111122223333:q", err: ErrInvalidARN},
		{name: "host in region", arn: "arn:aws:sqs:evil.example/x:1:q", err: ErrInvalidARN},
		{name: "fragment account", arn: "arn:aws:sqs:us-east-1:#:q", err: ErrInvalidARN},
		{name: "short account", arn: "arn:aws:sqs:us-east-1:1:q", err: ErrInvalidARN},
		{name: "slash in name", arn: "arn:aws:sqs:us-east-1:111122223333:a/../b", err: ErrInvalidARN},
		{name: "query in name", arn: "arn:aws:sqs:us-east-1:111122223333:q?x=1", err: ErrInvalidARN},
		{name: "name too long", arn: "arn:aws:sqs:us-east-1:111122223333:" + strings.Repeat("q", 81), err: ErrInvalidARN},
		{name: "fifo only", arn: "arn:aws:sqs:us-east-1:111122223333:.fifo", err: ErrInvalidARN},
		{name: "upper region", arn: "arn:aws:sqs:US-EAST-1:111122223333:q", err: ErrInvalidARN},
		{name: "partition with dot", arn: "arn:aws.evil:sqs:us-east-1:111122223333:q", err: ErrInvalidARN},
		{name: "not sqs", arn: "arn:aws:sns:us-east-1:1:topic", err: ErrInvalidARN},
		{name: "empty", arn: "", err: ErrInvalidARN},
		{name: "missing name", arn: "arn:aws:sqs:us-east-1:111122223333:", err: ErrInvalidARN},
		{name: "colon in name", arn: "arn:aws:sqs:us-east-1:111122223333:a:b", err: ErrInvalidARN},
		{name: "longest name", arn: "arn:aws:sqs:us-east-1:111122223333:" + strings.Repeat("q", 75) + ".fifo", want: "https://sqs.us-east-1.amazonaws.com/111122223333/" + strings.Repeat("q", 75) + ".fifo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := QueueURL(tt.arn, tt.endpoint)
			if !errors.Is(err, tt.err) {
				t.Fatalf("QueueURL(%q, %q) error = %v, want %v", tt.arn, tt.endpoint, err, tt.err)
			}
			if got != tt.want {
				t.Errorf("QueueURL(%q, %q) = %q, want %q", tt.arn, tt.endpoint, got, tt.want)
			}
		})
	}
}

func TestParseARNRoundTrip(t *testing.T) {
	t.Parallel()
	const s = "arn:aws:sqs:us-east-1:123456789012:q.fifo"
	a, err := ParseARN(s)
	if err != nil {
		t.Fatal(err)
	}
	if a.String() != s || a.Account != "123456789012" || a.Name != "q.fifo" || a.Region != "us-east-1" {
		t.Errorf("ParseARN(%q) = %+v", s, a)
	}
}

// hiddenClient hides the *sqs.Client's options, like a user's wrapper.
type hiddenClient struct{ ChangeMessageVisibilityAPI }

// noGetter shows the client's options but cannot call GetQueueUrl, so the
// resolver derives URLs.
type noGetter struct{ c *sqs.Client }

func (n noGetter) Options() sqs.Options { return n.c.Options() }

func TestResolverPrecedence(t *testing.T) {
	const arn = "arn:aws:sqs:us-east-1:123456789012:q"
	withEndpoint := noGetter{sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://from-client:1")})}
	plainClient := sqs.New(sqs.Options{Region: "us-east-1"})
	plain := noGetter{plainClient}

	t.Setenv("AWS_ENDPOINT_URL_SQS", "http://from-env:2")
	tests := []struct {
		name string
		r    *resolver
		want string
	}{
		{"explicit map wins", newResolver(withEndpoint, "http://explicit:3", map[string]string{arn: "http://mapped/q"}, nil), "http://mapped/q"},
		{"func after map", newResolver(withEndpoint, "", nil, func(string) (string, error) { return "http://func/q", nil }), "http://func/q"},
		{"func falls through on empty", newResolver(withEndpoint, "", nil, func(string) (string, error) { return "", nil }), "http://from-client:1/123456789012/q"},
		{"explicit endpoint over client", newResolver(withEndpoint, "http://explicit:3", nil, nil), "http://explicit:3/123456789012/q"},
		{"client endpoint", newResolver(withEndpoint, "", nil, nil), "http://from-client:1/123456789012/q"},
		// A client that shows its options and has no endpoint talks to AWS:
		// the environment must not redirect it.
		{"client without endpoint ignores env", newResolver(plain, "", nil, nil), "https://sqs.us-east-1.amazonaws.com/123456789012/q"},
		{"hidden client uses env", newResolver(hiddenClient{plainClient}, "", nil, nil), "http://from-env:2/123456789012/q"},
	}
	for _, tt := range tests {
		got, err := tt.r.queueURL(t.Context(), arn)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}

	t.Setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true")
	got, err := newResolver(hiddenClient{plainClient}, "", nil, nil).queueURL(t.Context(), arn)
	if err != nil || got != "https://sqs.us-east-1.amazonaws.com/123456789012/q" {
		t.Errorf("with AWS_IGNORE_CONFIGURED_ENDPOINT_URLS: got %q, %v", got, err)
	}

	boom := errors.New("boom")
	_, err = newResolver(plain, "", nil, func(string) (string, error) { return "", boom }).queueURL(t.Context(), arn)
	if !errors.Is(err, boom) {
		t.Errorf("func error = %v, want %v", err, boom)
	}
}
