// Command lambdaidem-local runs an unmodified Lambda bootstrap binary the
// way AWS Lambda does, fed from an SQS queue through an emulated event
// source mapping. It is a thin wrapper over package localrun; run it with
// -h for usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdaidem/go-lambdaidem/localrun"
)

const usage = `lambdaidem-local runs a Lambda function's bootstrap binary locally, fed from
an SQS queue the way Lambda's SQS event source mapping feeds it.

Usage:
  lambdaidem-local -queue-url URL [flags]

Each concurrent invocation gets its own bootstrap process talking to an
emulated Lambda Runtime API on 127.0.0.1; processes are reused warm, killed
at the function timeout, and restarted after they exit. After an invocation
the runner deletes what Lambda would delete (with -report-batch-item-failures,
every record not listed in batchItemFailures; nothing after an error, crash,
timeout or invalid response) and leaves the rest to come back after its
visibility timeout.

The SQS endpoint, region and credentials come from the usual AWS variables,
e.g. AWS_ENDPOINT_URL_SQS=http://127.0.0.1:5000. The function gets Lambda's
environment plus, by default, AWS credentials and every AWS_ENDPOINT_URL*
variable of this process, plus each -env.

Function output goes to stdout; one line per invocation and per process
start/exit goes to stderr; counters are printed on exit.

Ctrl-C (or SIGTERM) stops polling, waits for the invocations in flight and
for the receive in flight (at most -poll-wait), and hands every record it
received and did not finish back to the queue (visibility 0): restarting
the runner does not leave messages hidden for the visibility timeout. A
second Ctrl-C kills the invocations still running and hands their records
back too.

Example:
  AWS_ENDPOINT_URL_SQS=http://127.0.0.1:5000 AWS_REGION=us-east-1 \
    lambdaidem-local -bootstrap build/bootstrap \
      -queue-url http://127.0.0.1:5000/123456789012/orders \
      -batch-size 10 -max-concurrency 4 -timeout 10s -env IDEMPOTENCY_TABLE=idempotency

Flags:
`

// envFlag collects repeated -env values.
type envFlag []string

func (e *envFlag) String() string { return strings.Join(*e, ",") }

func (e *envFlag) Set(v string) error {
	if v == "" {
		return errors.New("empty -env")
	}
	if !strings.Contains(v, "=") {
		// NAME alone passes this process's value through.
		val, ok := os.LookupEnv(v)
		if !ok {
			return fmt.Errorf("-env %s: variable not set in this process", v)
		}
		v += "=" + val
	}
	*e = append(*e, v)
	return nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case err != nil:
		fmt.Fprintln(os.Stderr, "lambdaidem-local:", err)
		os.Exit(2)
	}
}

// run polls until ctx ends, then stops gracefully; a signal during that
// stop kills the invocations still in flight.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("lambdaidem-local", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	var (
		env     envFlag
		cfg     localrun.Config
		passAWS bool
		quiet   bool
	)
	fs.StringVar(&cfg.Bootstrap, "bootstrap", "bootstrap", "path of the function's `executable`")
	fs.StringVar(&cfg.QueueURL, "queue-url", "", "`URL` of the SQS queue to poll (required)")
	fs.IntVar(&cfg.BatchSize, "batch-size", 10, "most records per invocation (1-10000; at most 10 for FIFO; above 10 needs -batching-window)")
	fs.DurationVar(&cfg.BatchingWindow, "batching-window", 0, "how long to gather records after the first before invoking with a partial batch (0-5m; not for FIFO)")
	fs.IntVar(&cfg.MaxConcurrency, "max-concurrency", 2, "most invocations (and processes) at once")
	fs.IntVar(&cfg.ProcessConcurrency, "process-concurrency", 1, "invocations one process runs at once (AWS_LAMBDA_MAX_CONCURRENCY, as Lambda Managed Instances)")
	fs.DurationVar(&cfg.FunctionTimeout, "timeout", 3*time.Second, "function timeout: an invocation still running then is killed (at most 15m)")
	fs.IntVar(&cfg.MemoryMB, "memory", 128, "memory size in MB reported to the function (128-10240; not enforced)")
	fs.StringVar(&cfg.FunctionName, "function-name", "lambdaidem-local", "function `name` (AWS_LAMBDA_FUNCTION_NAME, the function ARN)")
	fs.StringVar(&cfg.Handler, "handler", "bootstrap", "handler string passed as _HANDLER")
	fs.StringVar(&cfg.Region, "region", "", "region for AWS_REGION and awsRegion (default: the queue ARN's region)")
	fs.DurationVar(&cfg.PollWait, "poll-wait", 2*time.Second, "long-polling wait of each receive (1s-20s); stopping waits for the receive in flight")
	fs.BoolVar(&cfg.ReportBatchItemFailures, "report-batch-item-failures", true, "honour partial batch responses (FunctionResponseTypes: ReportBatchItemFailures)")
	fs.Var(&env, "env", "`NAME=VALUE` to set, or NAME to pass through, in the function's environment (repeatable)")
	fs.BoolVar(&passAWS, "pass-aws-env", true, "pass AWS credentials and AWS_ENDPOINT_URL* variables to the function")
	fs.BoolVar(&quiet, "quiet", false, "do not report each invocation and process on stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if cfg.QueueURL == "" {
		fs.Usage()
		return errors.New("-queue-url is required")
	}

	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("AWS config: %w", err)
	}
	cfg.SQS = sqs.NewFromConfig(awsCfg)
	if passAWS {
		cfg.Env = localrun.AWSEnv()
	}
	cfg.Env = append(cfg.Env, env...)
	cfg.Output = stdout
	if !quiet {
		cfg.OnInvoke = func(inv localrun.Invocation) { fmt.Fprintln(stderr, describeInvocation(inv)) }
		cfg.OnProcess = func(ev localrun.ProcessEvent) { fmt.Fprintln(stderr, describeProcess(ev)) }
	}
	r, err := localrun.New(cfg)
	if err != nil {
		return err
	}
	if err := r.Start(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "lambdaidem-local: polling %s with up to %d concurrent invocations; Ctrl-C to stop\n", cfg.QueueURL, cfg.MaxConcurrency)
	<-ctx.Done()

	// A second signal ends the wait for invocations in flight.
	hard, hardStop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer hardStop()
	fmt.Fprintln(stderr, "lambdaidem-local: stopping; waiting for invocations in flight (Ctrl-C again to kill them)")
	stopErr := r.Stop(hard)
	printStats(stderr, r.Stats())
	if stopErr != nil {
		return fmt.Errorf("stopped before invocations finished: %w", stopErr)
	}
	return nil
}

func describeInvocation(inv localrun.Invocation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "invoke #%d %s slot=%d pid=%d records=%d outcome=%s deleted=%d failed=%d in %s",
		inv.Seq, inv.RequestID, inv.Instance, inv.PID, len(inv.MessageIDs), inv.Outcome,
		len(inv.Deleted), len(inv.Failed), inv.Duration.Round(time.Millisecond))
	if inv.Err != nil {
		fmt.Fprintf(&b, " error=%q", inv.Err.Error())
	}
	if inv.DeleteErr != nil {
		fmt.Fprintf(&b, " delete_error=%q", inv.DeleteErr.Error())
	}
	if len(inv.Returned) > 0 {
		fmt.Fprintf(&b, " handed_back=%d", len(inv.Returned))
	}
	if inv.ReturnErr != nil {
		fmt.Fprintf(&b, " hand_back_error=%q", inv.ReturnErr.Error())
	}
	return b.String()
}

func describeProcess(ev localrun.ProcessEvent) string {
	s := fmt.Sprintf("process %d slot=%d start=%d %s", ev.PID, ev.Instance, ev.Start, ev.Kind)
	if ev.Reason != "" {
		s += " reason=" + ev.Reason
	}
	if ev.ExitErr != nil {
		s += " status=" + ev.ExitErr.Error()
	}
	return s
}

func printStats(w io.Writer, s localrun.Stats) {
	fmt.Fprintf(w, "invocations %d (success %d, partial failure %d, invalid response %d, function error %d, crash %d, timeout %d, init error %d, stopped %d)\n",
		s.Batches, s.Successes, s.PartialFailures, s.InvalidResponses, s.FunctionErrors, s.Crashes, s.Timeouts, s.InitErrors, s.Stopped)
	fmt.Fprintf(w, "records %d: deleted %d, left for redelivery %d, handed back on stop %d; delete errors %d, receive errors %d, hand-back errors %d\n",
		s.Records, s.Deleted, s.Failed, s.Returned, s.DeleteErrors, s.ReceiveErrors, s.ReturnErrors)
	fmt.Fprintf(w, "processes started %d, exited %d; most in flight %d, most processes %d\n",
		s.ProcessStarts, s.ProcessExits, s.MaxInFlight, s.MaxProcesses)
}
