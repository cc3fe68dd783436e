package localrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Named errors for a Config that Lambda itself would reject.
var (
	// ErrInvalidConfig is wrapped by every validation error from New.
	ErrInvalidConfig = errors.New("localrun: invalid config")
	// ErrStarted is returned when Start is called twice.
	ErrStarted = errors.New("localrun: runner already started")
	// ErrNotStarted is returned when Stop is called before Start.
	ErrNotStarted = errors.New("localrun: runner not started")
)

// SQSAPI is the part of the SQS client the runner uses. *sqs.Client
// satisfies it; tests and fault injectors may wrap it.
type SQSAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

// Lambda's limits for an SQS event source mapping and a function, used as
// validation bounds so that what works locally also deploys.
const (
	maxBatchSize      = 10000
	maxFIFOBatchSize  = 10
	maxBatchingWindow = 300 * time.Second
	maxLongPoll       = 20 * time.Second
	defaultPollWait   = 2 * time.Second
	maxFunctionTime   = 900 * time.Second
	minMemoryMB       = 128
	maxMemoryMB       = 10240
)

// Config describes one function and its SQS event source mapping.
type Config struct {
	// Bootstrap is the path of the executable to run, unmodified, as the
	// function (a provided.al2023 `bootstrap`). Required.
	Bootstrap string

	// QueueURL is the queue the mapping polls. Required.
	QueueURL string

	// SQS is the client used for the queue. Required.
	SQS SQSAPI

	// BatchSize is the most records per invocation. Default 10; 1 to 10,000,
	// at most 10 for FIFO queues. Above 10 a BatchingWindow of at least one
	// second is required, as Lambda requires.
	BatchSize int

	// BatchingWindow is how long to keep gathering records after the first
	// one arrives before invoking with fewer than BatchSize. Default 0:
	// invoke with what one ReceiveMessage returns. At most 5 minutes; not
	// allowed for FIFO queues.
	BatchingWindow time.Duration

	// MaxConcurrency is the most invocations in flight at once, and so the
	// most bootstrap processes alive at once. Default 2 (Lambda's minimum
	// for the mapping's MaximumConcurrency); at least 1.
	MaxConcurrency int

	// ProcessConcurrency is how many invocations one process runs at once,
	// as Lambda Managed Instances do (multi-concurrency): the process gets
	// AWS_LAMBDA_MAX_CONCURRENCY set to it, and that many GET /next
	// requests may wait on its Runtime API together (aws-lambda-go then
	// runs invocations in goroutines). MaxConcurrency still bounds the
	// invocations in flight in all; they share ceil(MaxConcurrency /
	// ProcessConcurrency) processes. A crash or a timeout ends the process
	// and so fails every invocation it was running. Default 1: one
	// invocation per process at a time, as on-demand Lambda.
	ProcessConcurrency int

	// ReportBatchItemFailures turns on partial batch responses
	// (FunctionResponseTypes: [ReportBatchItemFailures]). Off by default, as
	// in Lambda: then a successful invocation deletes the whole batch
	// whatever the function returned.
	ReportBatchItemFailures bool

	// FunctionTimeout is the function's timeout: an invocation without a
	// response by then is killed. Default 3s (Lambda's default); at most
	// 15 minutes.
	FunctionTimeout time.Duration

	// InitTimeout bounds the time from process start to its first request
	// for an event. Default 10s, Lambda's init limit.
	InitTimeout time.Duration

	// MemoryMB is reported to the function in
	// AWS_LAMBDA_FUNCTION_MEMORY_SIZE; nothing enforces it. Default 128.
	MemoryMB int

	// FunctionName is the function's name. Default "lambdaidem-local".
	FunctionName string

	// Handler is passed as _HANDLER. Default "bootstrap".
	Handler string

	// Region is passed as AWS_REGION and awsRegion. Default: the region in
	// the queue's ARN.
	Region string

	// Env is added to the environment Lambda defines, as "NAME=VALUE"
	// entries (later entries win). Nothing else is inherited from this
	// process except PATH; see AWSEnv for the usual passthrough.
	Env []string

	// PollWait is the long-polling wait of a ReceiveMessage that starts a
	// batch, and the longest wait of any receive. Default 2s; at most 20s,
	// the most SQS allows. Stop lets a receive in flight come back rather
	// than cancel it (a cancelled receive still takes a message on the
	// server's side, which then stays hidden for the visibility timeout),
	// so this is also how long Stop may wait for one.
	PollWait time.Duration

	// Output receives the stdout and stderr of every function process, a
	// whole line per Write, lines of different processes never mixed.
	// Default: discarded.
	Output io.Writer

	// OnInvoke, when set, is called once per invocation after its records
	// were deleted or left for redelivery. It is called from the runner's
	// goroutines, concurrently; it must be quick and must not call Stop.
	OnInvoke func(Invocation)

	// OnProcess, when set, is called when a function process starts or
	// exits, under the same rules as OnInvoke.
	OnProcess func(ProcessEvent)
}

func (c *Config) withDefaults() Config {
	d := *c
	if d.BatchSize == 0 {
		d.BatchSize = 10
	}
	if d.MaxConcurrency == 0 {
		d.MaxConcurrency = 2
	}
	if d.ProcessConcurrency == 0 {
		d.ProcessConcurrency = 1
	}
	if d.FunctionTimeout == 0 {
		d.FunctionTimeout = 3 * time.Second
	}
	if d.InitTimeout == 0 {
		d.InitTimeout = 10 * time.Second
	}
	if d.MemoryMB == 0 {
		d.MemoryMB = minMemoryMB
	}
	if d.FunctionName == "" {
		d.FunctionName = "lambdaidem-local"
	}
	if d.Handler == "" {
		d.Handler = "bootstrap"
	}
	if d.PollWait == 0 {
		d.PollWait = defaultPollWait
	}
	if d.Output == nil {
		d.Output = io.Discard
	}
	return d
}

func (c *Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Bootstrap == "":
		return bad("Bootstrap is required")
	case c.QueueURL == "":
		return bad("QueueURL is required")
	case c.SQS == nil:
		return bad("SQS client is required")
	case c.BatchSize < 1 || c.BatchSize > maxBatchSize:
		return bad("BatchSize %d outside 1..%d", c.BatchSize, maxBatchSize)
	case c.BatchingWindow < 0 || c.BatchingWindow > maxBatchingWindow:
		return bad("BatchingWindow %s outside 0..%s", c.BatchingWindow, maxBatchingWindow)
	case c.BatchSize > 10 && c.BatchingWindow < time.Second:
		return bad("BatchSize %d above 10 needs a BatchingWindow of at least 1s", c.BatchSize)
	case c.MaxConcurrency < 1:
		return bad("MaxConcurrency %d below 1", c.MaxConcurrency)
	case c.ProcessConcurrency < 1:
		return bad("ProcessConcurrency %d below 1", c.ProcessConcurrency)
	case c.FunctionTimeout < 0 || c.FunctionTimeout > maxFunctionTime:
		return bad("FunctionTimeout %s outside 0..%s", c.FunctionTimeout, maxFunctionTime)
	case c.InitTimeout < 0:
		return bad("InitTimeout %s is negative", c.InitTimeout)
	case c.MemoryMB < minMemoryMB || c.MemoryMB > maxMemoryMB:
		return bad("MemoryMB %d outside %d..%d", c.MemoryMB, minMemoryMB, maxMemoryMB)
	case c.PollWait < 0 || c.PollWait > maxLongPoll:
		return bad("PollWait %s outside 0..%s", c.PollWait, maxLongPoll)
	}
	if strings.HasSuffix(c.QueueURL, ".fifo") {
		if c.BatchSize > maxFIFOBatchSize {
			return bad("BatchSize %d above %d for a FIFO queue", c.BatchSize, maxFIFOBatchSize)
		}
		if c.BatchingWindow != 0 {
			return bad("BatchingWindow is not supported for a FIFO queue")
		}
	}
	for _, kv := range c.Env {
		if name, _, ok := strings.Cut(kv, "="); !ok || name == "" {
			return bad("Env entry %q is not NAME=VALUE", kv)
		}
	}
	return nil
}

// AWSEnv returns the variables of this process a function usually needs
// locally: AWS credentials, AWS_ENDPOINT_URL and every AWS_ENDPOINT_URL_*
// (so the function reaches the same local services), as "NAME=VALUE".
// Lambda gives a function credentials of its role; locally there is no
// role, so these are passed through instead.
func AWSEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case name == "AWS_ACCESS_KEY_ID", name == "AWS_SECRET_ACCESS_KEY", name == "AWS_SESSION_TOKEN",
			name == "AWS_ENDPOINT_URL", strings.HasPrefix(name, "AWS_ENDPOINT_URL_"):
			out = append(out, kv)
		}
	}
	return out
}
