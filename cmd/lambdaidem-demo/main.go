package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/lambdaidem/go-lambdaidem/cmd/internal/harness"
)

const usage = `lambdaidem-demo runs the orders example, in its plain and its transactional
effect mode side by side, under a scripted workload of duplicates,
redeliveries, a poison message, a flaky handler and crashes (before the effect
in plain mode, after it in transactional mode), and checks that every order
has exactly one effect or a DLQ message.

It needs the local services (AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_SQS);
the usual way to run it is

  make demo
  localstack/stack.sh run -- go run ./cmd/lambdaidem-demo

Flags:
`

func main() { harness.Main(run) }

// run is main without the process: it returns the exit status, 0 when
// every invariant held, 1 when one broke, 2 when the demo could not run.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts := DefaultOptions()
	fs := harness.Flags("lambdaidem-demo", usage, stderr)
	fs.StringVar(&opts.Bootstrap, "bootstrap", "", "a prebuilt orders `binary` (default: build examples/orders)")
	fs.BoolVar(&opts.Keep, "keep", false, "keep the tables and queues after the run, for inspection")
	verbose := fs.Bool("v", false, "show the function's log lines (JSON) on stderr")
	plain := fs.Int("orders", 48, "`number` of plain-mode orders besides the four special ones")
	fs.DurationVar(&opts.WaitTimeout, "wait", opts.WaitTimeout, "give up a wait for a phase to end when nothing has moved for this long")
	readme := fs.Bool("update-readme", false, "after a passing run, write its summary into README.md's demo sample and "+readmeSummaryFile+" (run from the repository root; `make demo-readme`)")
	if code, ok := harness.Parse(fs, args); !ok {
		return code
	}
	if *plain < 0 {
		fmt.Fprintln(stderr, "lambdaidem-demo: -orders must not be negative")
		return 2
	}
	opts.Workload = NewWorkload(*plain, 5*time.Second)
	opts.Stack = harness.StackFromEnv()
	if err := opts.Stack.Check(true, "lambdaidem-demo", "demo", "./cmd/lambdaidem-demo"); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	opts.Out = stdout
	if *verbose {
		opts.FunctionLog = stderr
	}

	fmt.Fprintf(stdout, "lambdaidem demo: %d orders in %d messages; DynamoDB %s, SQS %s\n",
		len(opts.Workload.Messages), opts.Workload.Sends(), opts.Stack.DynamoDBEndpoint, opts.Stack.SQSEndpoint)
	s, err := Run(ctx, opts)
	if err != nil {
		fmt.Fprintf(stderr, "lambdaidem-demo: %v\n", err)
		return 2
	}
	s.Print(stdout)
	if !s.OK() {
		return 1
	}
	if *readme {
		if err := updateReadme("README.md", readmeSummaryFile, s); err != nil {
			fmt.Fprintf(stderr, "lambdaidem-demo: %v\n", err)
			return 2
		}
		fmt.Fprintf(stdout, "wrote the summary into README.md and %s\n", readmeSummaryFile)
	}
	return 0
}
