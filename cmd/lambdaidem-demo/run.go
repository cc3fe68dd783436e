package main

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/lambdaidem/go-lambdaidem/cmd/internal/harness"
)

// Options configure one run of the demo. DefaultOptions gives the values
// `make demo` uses.
type Options struct {
	// Stack is the local services. Required: the demo never talks to AWS.
	Stack harness.Stack

	// Bootstrap is a prebuilt orders function. Empty: build
	// examples/orders for this machine into a temporary directory.
	Bootstrap string

	Workload harness.Workload

	// Visibility is the source queues' visibility timeout, in whole
	// seconds. Short on purpose: the slow order outlives it.
	Visibility time.Duration
	// FunctionTimeout is the functions' timeout; the library's lease, and
	// so how long a crashed attempt blocks its key, follows from it.
	FunctionTimeout time.Duration
	// BatchSize, BatchingWindow and MaxConcurrency configure the event
	// source mapping of the plain function; the transactional one runs
	// one process.
	BatchSize      int
	BatchingWindow time.Duration
	MaxConcurrency int

	// WaitTimeout is how long a wait for a phase to end goes on while
	// nothing moves (no record received, no invocation ended, no process
	// started): a bound on a stall. A run that keeps moving, however
	// slowly, is waited for.
	WaitTimeout time.Duration
	// Progress is the interval of progress lines; 0 prints none.
	Progress time.Duration

	// Keep leaves the tables and queues in place after the run.
	Keep bool

	// Out receives progress and the summary. Default io.Discard.
	Out io.Writer
	// FunctionLog, when set, receives the function processes' output.
	FunctionLog io.Writer
}

// DefaultOptions returns the options of `make demo`, the stack excepted.
func DefaultOptions() Options {
	return Options{
		Workload:        NewWorkload(48, 5*time.Second),
		Visibility:      2 * time.Second,
		FunctionTimeout: 10 * time.Second,
		BatchSize:       10,
		BatchingWindow:  300 * time.Millisecond,
		MaxConcurrency:  3,
		WaitTimeout:     60 * time.Second,
		Progress:        time.Second,
	}
}

// Run runs the demo and returns its summary. An error means the demo
// could not run (a service unreachable, a build failure, a deadline); a
// broken invariant is reported in Summary.Violations instead.
func Run(ctx context.Context, opts Options) (*Summary, error) {
	if opts.Stack.DynamoDBEndpoint == "" || opts.Stack.SQSEndpoint == "" {
		return nil, errors.New("both the DynamoDB and the SQS endpoint are required")
	}
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	log := harness.NewLog(opts.Out, "")
	h, bootstrap, err := harness.Open(ctx, harness.Config{
		Stack: opts.Stack, Name: "lambdaidem-demo", Log: log, FunctionLog: opts.FunctionLog,
		WaitTimeout: opts.WaitTimeout, Keep: opts.Keep,
	}, harness.OrdersPackage, opts.Bootstrap)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := h.Close(); err != nil {
			log.Printf("cleanup: %v", err)
		}
	}()
	n := narrate(h, opts.Workload)
	if err := h.Start(ctx, bootstrap, function(ModePlain, opts), function(ModeTransactional, opts)); err != nil {
		return nil, err
	}
	log.Printf("plain function: %d concurrent processes; transactional function: 1; batches of %d, window %s, timeout %s, queue visibility %s",
		opts.MaxConcurrency, opts.BatchSize, opts.BatchingWindow, opts.FunctionTimeout, opts.Visibility)

	stopProgress := harness.Every(opts.Progress, n.tick)
	runErr := h.Play(ctx, opts.Workload, phases(opts.Workload)...)
	stopErr := h.Stop(ctx)
	stopProgress()
	if runErr != nil {
		return nil, runErr // stopErr is only the consequence
	}
	if stopErr != nil {
		return nil, stopErr
	}
	return summarize(ctx, h, opts.Workload, log.Start)
}
