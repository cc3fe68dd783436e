package harness

import (
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
)

// The variables localstack/stack.sh exports for the commands it runs.
const (
	DynamoDBEndpointVar = "AWS_ENDPOINT_URL_DYNAMODB"
	SQSEndpointVar      = "AWS_ENDPOINT_URL_SQS"
	RegionVar           = "AWS_REGION"
	RedisAddrVar        = "LAMBDAIDEM_REDIS_ADDR"
	SQSEmulatorVar      = "LAMBDAIDEM_SQS_EMULATOR"
)

// DefaultRegion is the region of the local services when AWS_REGION is
// unset.
const DefaultRegion = "us-east-1"

// Stack is the local services a run talks to. The harness never talks to
// AWS: its clients carry fixed test credentials, and so do its functions.
type Stack struct {
	// DynamoDBEndpoint and SQSEndpoint are DynamoDB Local's and the SQS
	// emulator's URLs.
	DynamoDBEndpoint string
	SQSEndpoint      string
	// Region of the services. Default DefaultRegion.
	Region string
	// RedisAddr is the redis-server's host:port, when the stack has one.
	RedisAddr string
	// SQSEmulator names the SQS emulator ("moto", "fauxqs"), when the
	// stack says: a measurement depends on it.
	SQSEmulator string
}

// StackFromEnv reads the stack's endpoints from the variables
// localstack/stack.sh exports.
func StackFromEnv() Stack {
	s := Stack{
		DynamoDBEndpoint: os.Getenv(DynamoDBEndpointVar),
		SQSEndpoint:      os.Getenv(SQSEndpointVar),
		Region:           os.Getenv(RegionVar),
		RedisAddr:        os.Getenv(RedisAddrVar),
		SQSEmulator:      os.Getenv(SQSEmulatorVar),
	}
	return s.withDefaults()
}

func (s Stack) withDefaults() Stack {
	if s.Region == "" {
		s.Region = DefaultRegion
	}
	return s
}

// Check says how to start the stack when an endpoint a program needs is
// missing: DynamoDB's always, SQS's when needSQS. program is the command's
// name, target the make target that runs it and pkg its package, for the
// message.
func (s Stack) Check(needSQS bool, program, target, pkg string) error {
	if s.DynamoDBEndpoint != "" && (s.SQSEndpoint != "" || !needSQS) {
		return nil
	}
	return fmt.Errorf("%s: %s and %s must point at the local services;\nrun `make %s`, or: localstack/stack.sh run -- go run %s",
		program, DynamoDBEndpointVar, SQSEndpointVar, target, pkg)
}

// Config is the SDK configuration of the harness's clients: the stack's
// region and fixed test credentials, whatever this shell holds.
func (s Stack) Config() aws.Config {
	return aws.Config{
		Region:      s.withDefaults().Region,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
	}
}

// DynamoDB returns a client for DynamoDB Local, response checksums checked
// only against AWS (dynamo.ChecksumsOnAWSOnly); opts apply after those.
// Its HTTP client, whichever opts choose, goes through testenv.HTTPClient:
// on a loaded machine the SDK alone may retry a request the local service
// already carried out.
func (s Stack) DynamoDB(opts ...func(*dynamodb.Options)) *dynamodb.Client {
	opts = append([]func(*dynamodb.Options){
		func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(s.DynamoDBEndpoint) },
		dynamo.ChecksumsOnAWSOnly(),
	}, opts...)
	opts = append(opts, func(o *dynamodb.Options) { o.HTTPClient = testenv.HTTPClient(o.HTTPClient) })
	return dynamodb.NewFromConfig(s.Config(), opts...)
}

// SQS returns a client for the SQS emulator, through testenv.HTTPClient as
// DynamoDB's.
func (s Stack) SQS() *sqs.Client {
	return sqs.NewFromConfig(s.Config(), func(o *sqs.Options) {
		o.BaseEndpoint = aws.String(s.SQSEndpoint)
		o.HTTPClient = testenv.HTTPClient(o.HTTPClient)
	})
}

// FunctionEnv is what a function process needs to reach the stack: test
// credentials and the endpoints, as "NAME=VALUE", and
// DYNAMODB_ATTEMPT_TIMEOUT (read by examples/orders) of
// StoreAttemptTimeout. (localrun passes the region itself.)
func (s Stack) FunctionEnv() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=test",
		"AWS_SECRET_ACCESS_KEY=test",
		DynamoDBEndpointVar + "=" + s.DynamoDBEndpoint,
		SQSEndpointVar + "=" + s.SQSEndpoint,
		StoreAttemptTimeoutVar + "=" + StoreAttemptTimeout.String(),
	}
}

// StoreAttemptTimeoutVar is the orders example's per-attempt timeout of
// its DynamoDB client. Its default, a second, suits DynamoDB; DynamoDB
// Local on a loaded two-core machine answers later than that now and then,
// and the function then reports a store error for a store that is only
// slow: an attempt ends before its handler runs, a crash set for it never
// happens, a batch fails. StoreAttemptTimeout only bounds a hang.
const (
	StoreAttemptTimeoutVar = "DYNAMODB_ATTEMPT_TIMEOUT"
	StoreAttemptTimeout    = 10 * time.Second
)
