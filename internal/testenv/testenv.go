// Package testenv gives tests clients for the local AWS services that
// `make test` starts (DynamoDB Local and the SQS emulator), found through the
// SDK's standard endpoint variables.
//
// A test that needs a service calls DynamoDB(t) or SQS(t). When the endpoint
// variable is unset the test is skipped, unless LAMBDAIDEM_REQUIRE_SERVICES=1
// (set by `make test` and CI), in which case it fails: under `make test` no
// service test skips silently.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Endpoint variables, as the AWS SDKs read them.
const (
	DynamoDBEndpointVar = "AWS_ENDPOINT_URL_DYNAMODB"
	SQSEndpointVar      = "AWS_ENDPOINT_URL_SQS"
	RequireVar          = "LAMBDAIDEM_REQUIRE_SERVICES"
)

// Endpoint returns the value of the endpoint variable, skipping or failing
// the test when it is unset.
func Endpoint(t testing.TB, variable string) string {
	t.Helper()
	v := os.Getenv(variable)
	if v != "" {
		return v
	}
	if os.Getenv(RequireVar) == "1" {
		t.Fatalf("%s is not set but %s=1: start the local stack (make test does)", variable, RequireVar)
	}
	t.Skipf("%s is not set; run under `make test` to use the local stack", variable)
	return ""
}

// Config returns an SDK config for local services: fixed test credentials
// and region, so no real AWS account is ever reached.
func Config(t testing.TB) aws.Config {
	t.Helper()
	region := os.Getenv("AWS_REGION")
	if region == "" {
		region = "us-east-1"
	}
	cfg, err := config.LoadDefaultConfig(context.Background(),
		config.WithRegion(region),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")),
	)
	if err != nil {
		t.Fatalf("load AWS config: %v", err)
	}
	return cfg
}

// DynamoDB returns a client for DynamoDB Local. Response checksums are not
// checked: DynamoDB Local sends a CRC32 that does not match some error
// responses (package dynamo's ChecksumsOnAWSOnly explains it), and a test
// client never talks to AWS. Its HTTP client, whichever opts choose, goes
// through HTTPClient.
func DynamoDB(t testing.TB, opts ...func(*dynamodb.Options)) *dynamodb.Client {
	t.Helper()
	ep := Endpoint(t, DynamoDBEndpointVar)
	opts = append([]func(*dynamodb.Options){func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(ep); o.DisableValidateResponseChecksum = true }}, opts...)
	// Last, so that it wraps whatever HTTP client the options chose.
	opts = append(opts, func(o *dynamodb.Options) { o.HTTPClient = HTTPClient(o.HTTPClient) })
	return dynamodb.NewFromConfig(Config(t), opts...)
}

// SQS returns a client for the SQS emulator; its HTTP client goes through
// HTTPClient.
func SQS(t testing.TB, opts ...func(*sqs.Options)) *sqs.Client {
	t.Helper()
	ep := Endpoint(t, SQSEndpointVar)
	opts = append([]func(*sqs.Options){func(o *sqs.Options) { o.BaseEndpoint = aws.String(ep) }}, opts...)
	opts = append(opts, func(o *sqs.Options) { o.HTTPClient = HTTPClient(o.HTTPClient) })
	return sqs.NewFromConfig(Config(t), opts...)
}

// Name returns prefix plus a random suffix, for tables and queues that
// must not collide with parallel tests sharing one local service.
func Name(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// RedisAddrVar holds the local redis-server's host:port (set by
// localstack/stack.sh). RedisOffVar=0 says the environment has no Redis on
// purpose (the LocalStack target): Redis tests then skip even when
// RequireVar=1.
const (
	RedisAddrVar = "LAMBDAIDEM_REDIS_ADDR"
	RedisOffVar  = "LAMBDAIDEM_REDIS"
)

// RedisAddr returns the local redis-server's address, skipping or failing
// the test like Endpoint when it is unset.
func RedisAddr(t testing.TB) string {
	t.Helper()
	if os.Getenv(RedisAddrVar) == "" && os.Getenv(RedisOffVar) == "0" {
		t.Skipf("%s=0: this environment has no Redis", RedisOffVar)
	}
	return Endpoint(t, RedisAddrVar)
}

// SQSEmulatorVar names the SQS emulator behind SQSEndpointVar: "moto" or
// "fauxqs" (set by localstack/stack.sh, from LAMBDAIDEM_SQS), "localstack"
// (set by make test-localstack). Empty for other environments, such as AWS.
const SQSEmulatorVar = "LAMBDAIDEM_SQS_EMULATOR"

// Difference is a known way an SQS emulator differs from SQS that a test
// observes. Each one has a row in localstack/README.md's table of known
// differences, under the same name.
type Difference struct {
	// Emulator is the emulator's name, as in SQSEmulatorVar.
	Emulator string
	// Name is the row's name in localstack/README.md.
	Name string
	// Behaviour says what the emulator does where SQS does otherwise.
	Behaviour string
}

// Known differences of fauxqs 1.9.2 that some test observes.
var (
	// FauxqsOneMessagePerFIFOGroup: a receive hands out at most one message
	// of a FIFO group, so a batch never holds two records of one group.
	FauxqsOneMessagePerFIFOGroup = Difference{"fauxqs", "one message per FIFO group per receive",
		"a receive returns at most one message of a FIFO group; SQS returns several of one group, in order, in one batch"}
	// FauxqsNoFairQueues: the MessageGroupId of a message sent to a
	// standard queue is dropped, so receives do not return it.
	FauxqsNoFairQueues = Difference{"fauxqs", "no fair queues",
		"a MessageGroupId sent to a standard queue is dropped; SQS keeps it and returns it as the MessageGroupId attribute"}
	// FauxqsNoVisibilityTotalLimit: ChangeMessageVisibility does not
	// enforce the 12 hours a message may stay invisible in total.
	FauxqsNoVisibilityTotalLimit = Difference{"fauxqs", "no 12-hour visibility total",
		"ChangeMessageVisibility accepts a timeout that keeps a message invisible past 12 hours since it was received; SQS refuses it"}
	// FauxqsBinarySizeAsBase64: a Binary attribute counts towards the
	// message size with its base64 text, a third more than its bytes.
	FauxqsBinarySizeAsBase64 = Difference{"fauxqs", "Binary attributes sized as base64",
		"a Binary attribute counts with the length of its base64 text; SQS counts its bytes, so a message at the size limit is refused"}
	// LocalStackNoVisibilityTotalLimit: as FauxqsNoVisibilityTotalLimit,
	// on LocalStack's SQS.
	LocalStackNoVisibilityTotalLimit = Difference{"localstack", "no 12-hour visibility total",
		"ChangeMessageVisibility accepts a timeout that keeps a message invisible past 12 hours since it was received; SQS refuses it"}
)

// SkipOn skips the test when the SQS emulator in use is d's, with d's name
// and behaviour as the reason. The test runs everywhere else.
func SkipOn(t testing.TB, d Difference) {
	t.Helper()
	if os.Getenv(SQSEmulatorVar) == d.Emulator {
		t.Skipf("known difference of %s (localstack/README.md, %q): %s", d.Emulator, d.Name, d.Behaviour)
	}
}
