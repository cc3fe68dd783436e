package dynamo_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/logging"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
)

// logLines collects what the SDK logs.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Logf(_ logging.Classification, format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, v...))
}

func (l *logLines) mentioning(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

// badChecksumServer answers every request as DynamoDB Local answers a
// refused conditional write, with an X-Amz-Crc32 header that does not match
// the body.
func badChecksumServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("X-Amz-Crc32", "1")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"The conditional request failed"}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// conditionalPut sends one conditional PutItem to endpoint through a client built
// with opts, whose connections all go to the test server whatever the host,
// and returns what the SDK logged.
func conditionalPut(t *testing.T, srv *httptest.Server, endpoint string, opts ...func(*dynamodb.Options)) *logLines {
	t.Helper()
	logs := &logLines{}
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, srv.Listener.Addr().String())
	}
	base := func(o *dynamodb.Options) {
		o.Region = "us-east-1"
		o.Credentials = credentials.NewStaticCredentialsProvider("test", "test", "")
		o.Logger = logs
	}
	transport := func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.HTTPClient = &http.Client{Transport: &http.Transport{DialContext: dial}}
	}
	client := dynamodb.New(dynamodb.Options{}, append(append([]func(*dynamodb.Options){base}, opts...), transport)...)
	_, err := client.PutItem(t.Context(), &dynamodb.PutItemInput{
		TableName:           aws.String("t"),
		Item:                map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}},
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Fatalf("PutItem: %v, want ConditionalCheckFailedException", err)
	}
	return logs
}

const checksumLine = "did not match expected checksum"

func TestChecksumsSkippedOffAWS(t *testing.T) {
	srv := badChecksumServer(t)
	// The case is real: without the option the SDK logs the warning.
	if got := conditionalPut(t, srv, srv.URL).mentioning(checksumLine); len(got) == 0 {
		t.Fatal("the plain SDK client logged no checksum warning; the test no longer forces the case")
	}
	// The option and ClientOptions silence it for a local endpoint, set
	// after them (conditionalPut sets BaseEndpoint last).
	for name, opt := range map[string]func(*dynamodb.Options){
		"ChecksumsOnAWSOnly": dynamo.ChecksumsOnAWSOnly(),
		"ClientOptions":      dynamo.ClientOptions(dynamo.Tuning{MaxAttempts: 1}),
	} {
		if got := conditionalPut(t, srv, srv.URL, opt).mentioning(checksumLine); len(got) != 0 {
			t.Errorf("%s: the SDK still logged %q", name, got)
		}
	}
}

func TestChecksumsKeptOnAWS(t *testing.T) {
	srv := badChecksumServer(t)
	logs := conditionalPut(t, srv, "http://dynamodb.us-east-1.amazonaws.com", dynamo.ClientOptions(dynamo.Tuning{MaxAttempts: 1}))
	if got := logs.mentioning(checksumLine); len(got) == 0 {
		t.Error("a request to an AWS host was not checked: no checksum warning for a bad CRC32")
	}
}

func TestIsAWSHost(t *testing.T) {
	for host, want := range map[string]bool{
		"dynamodb.us-east-1.amazonaws.com":     true,
		"dynamodb.cn-north-1.amazonaws.com.cn": true,
		"dynamodb.us-east-1.api.aws":           true,
		"DynamoDB.EU-West-1.AmazonAWS.com.":    true,
		"127.0.0.1":                            false,
		"localhost":                            false,
		"amazonaws.com.example.org":            false,
		"notamazonaws.com":                     false,
	} {
		if got := dynamo.IsAWSHost(host); got != want {
			t.Errorf("IsAWSHost(%q) = %v, want %v", host, got, want)
		}
	}
}
