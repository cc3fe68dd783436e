// Command lambdaidem-bench runs lambdaidem's benchmarks against the local
// services and prints Markdown tables for BENCHMARKS.md: DynamoDB Local
// latency per path next to its floor and next to Powertools for AWS Lambda
// (TypeScript), requests per message by path, the requests of a call that
// waits for a run in progress (WithWaitForCompletion), and messages per
// second end to end through the orders example's bootstrap under the local
// runner.
//
// It needs DynamoDB Local and an SQS emulator, found through the SDK's
// endpoint variables; localstack/stack.sh provides both:
//
//	localstack/stack.sh run -- go run ./cmd/lambdaidem-bench
//
// See cmd/internal/bench/README.md for the flags and what each number means.
package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/lambdaidem/go-lambdaidem/cmd/internal/bench"
	"github.com/lambdaidem/go-lambdaidem/cmd/internal/harness"
)

const usage = `lambdaidem-bench runs lambdaidem's benchmarks against the local services and
prints Markdown tables (cmd/internal/bench/README.md says what each number means).

  make bench
  localstack/stack.sh run -- go run ./cmd/lambdaidem-bench

Flags:
`

func main() { harness.Main(run) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := harness.Flags("lambdaidem-bench", usage, stderr)
	n := fs.Int("n", 1000, "measured `iterations` per path and implementation")
	warmup := fs.Int("warmup", 0, "unmeasured warm-up `iterations` (default max(n/10, 20))")
	concurrency := fs.Int("concurrency", 10, "record `concurrency` of the decorator and the bare batch")
	ptDir := fs.String("powertools-dir", ".tools/powertools", "`directory` the Powertools harness is installed in")
	pt := fs.Bool("powertools", true, "measure Powertools for AWS Lambda (TypeScript) side by side")
	install := fs.Bool("install", true, "install the Powertools harness (npm ci --ignore-scripts) when it is missing")
	e2e := fs.Int("e2e", 10000, "`messages` for the end-to-end run through the local runner; 0 skips it")
	e2eConc := fs.Int("e2e-concurrency", 4, "MaxConcurrency of the end-to-end run's event source mapping")
	cold := fs.Int("cold", 20, "cold `starts` of the orders bootstrap and its Powertools counterpart; 0 skips them")
	coldMessages := fs.Int("cold-messages", 1000, "`messages` each function handles before its memory is read")
	bootstrap := fs.String("bootstrap", "", "a prebuilt examples/orders `binary` (default: build it)")
	withDynamo := fs.Bool("dynamodb", true, "run the DynamoDB Local latency and request benchmarks")
	withRedis := fs.Bool("redis", true, "run the Redis store's benchmarks when LAMBDAIDEM_REDIS_ADDR is set")
	waitN := fs.Int("wait-n", 10, "waiting `requests` per store and run length for the wait-for-completion benchmark; 0 skips it")
	if code, ok := harness.Parse(fs, args); !ok {
		return code
	}
	stack := harness.StackFromEnv()
	if err := stack.Check(*e2e > 0, "lambdaidem-bench", "bench", "./cmd/lambdaidem-bench"); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	ddbEndpoint, sqsEndpoint, region := stack.DynamoDBEndpoint, stack.SQSEndpoint, stack.Region
	fail := func(err error) int {
		fmt.Fprintf(stderr, "lambdaidem-bench: %v\n", err)
		return 1
	}

	started := time.Now()
	progress := &stamped{w: stderr, start: started}
	cfg := bench.DynamoConfig{Endpoint: ddbEndpoint, Region: region, N: *n, Warmup: *warmup, Concurrency: *concurrency, Progress: progress}
	if *pt {
		if !bench.PowertoolsInstalled(*ptDir) {
			if !*install {
				return fail(fmt.Errorf("%w in %s; rerun with -install or -powertools=false", bench.ErrPowertoolsNotInstalled, *ptDir))
			}
			fmt.Fprintf(stderr, "installing the Powertools harness into %s (npm ci --ignore-scripts)\n", *ptDir)
			if err := bench.InstallPowertools(ctx, *ptDir, stderr); err != nil {
				return fail(err)
			}
		}
		cfg.PowertoolsDir = *ptDir
	}

	var res *bench.DynamoResult
	var dynamoTook time.Duration
	if *withDynamo {
		var err error
		if res, err = bench.RunDynamo(ctx, cfg); err != nil {
			return fail(err)
		}
		dynamoTook = time.Since(started)
	}
	var redisRes *bench.DynamoResult
	if addr := stack.RedisAddr; *withRedis && addr != "" {
		var err error
		redisRes, err = bench.RunRedis(ctx, bench.RedisConfig{
			Addr: addr, N: *n, Warmup: *warmup, Concurrency: *concurrency, PowertoolsDir: cfg.PowertoolsDir, Progress: progress,
		})
		if err != nil {
			return fail(err)
		}
	}
	var waitRes *bench.WaitResult
	if *waitN > 0 {
		// On every store the stack has, whatever -dynamodb and -redis say.
		wc := bench.WaitConfig{DynamoDBEndpoint: ddbEndpoint, Region: region, RedisAddr: stack.RedisAddr, N: *waitN, Progress: progress}
		if wc.DynamoDBEndpoint != "" || wc.RedisAddr != "" {
			var err error
			if waitRes, err = bench.RunWait(ctx, wc); err != nil {
				return fail(err)
			}
		}
	}
	if *bootstrap == "" && (*cold > 0 || *e2e > 0) {
		// One build for the cold starts and the end-to-end run.
		var remove func() error
		var err error
		*bootstrap, remove, err = harness.Build(ctx, harness.OrdersPackage, &harness.Log{Out: progress})
		defer func() { _ = remove() }()
		if err != nil {
			return fail(err)
		}
	}
	var coldRes *bench.ColdResult
	if *cold > 0 {
		coldCfg := bench.ColdConfig{DynamoDBEndpoint: ddbEndpoint, Region: region, Starts: *cold, Messages: *coldMessages,
			Bootstrap: *bootstrap, Progress: progress}
		if *pt {
			coldCfg.PowertoolsDir = *ptDir
		}
		var err error
		if coldRes, err = bench.RunColdStart(ctx, coldCfg); err != nil {
			return fail(err)
		}
	}
	var e2eRes *bench.E2EResult
	if *e2e > 0 {
		var err error
		e2eRes, err = bench.RunE2E(ctx, bench.E2EConfig{
			DynamoDBEndpoint: ddbEndpoint, SQSEndpoint: sqsEndpoint, Region: region,
			Messages: *e2e, MaxConcurrency: *e2eConc, Bootstrap: *bootstrap, Progress: progress,
		})
		if err != nil {
			return fail(err)
		}
	}

	w := stdout
	if res != nil {
		fmt.Fprintf(w, "## DynamoDB Local: latency per path (N=%d per implementation, interleaved, record concurrency %d)\n\n", res.N, res.Concurrency)
		fmt.Fprintf(w, "%s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
		if res.NodeVersion != "" {
			fmt.Fprintf(w, ", Node.js %s, @aws-lambda-powertools/idempotency and /batch 2.35.0", res.NodeVersion)
		}
		fmt.Fprintf(w, "; this part took %s.\n\n", dynamoTook.Round(time.Second))
		res.WriteLatency(w)
		fmt.Fprintf(w, "\n### Where a first delivery's time goes (p50 per phase)\n\n")
		res.WriteBreakdown(w)
		if res.NodeVersion != "" {
			fmt.Fprintf(w, "\n### What the previous variant leaves behind\n\n")
			res.WriteCarryOver(w)
		}
		fmt.Fprintf(w, "\n### Targets\n\n")
		res.WriteTargets(w)
		fmt.Fprintf(w, "\n## DynamoDB requests per message, by path\n\n")
		res.WriteRequests(w)
	}
	if redisRes != nil {
		fmt.Fprintf(w, "\n## Redis store (local redis-server): latency per path (N=%d per implementation, interleaved)\n\n", redisRes.N)
		fmt.Fprintf(w, "%s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
		if redisRes.NodeVersion != "" {
			fmt.Fprintf(w, ", Node.js %s, @aws-lambda-powertools/idempotency 2.35.0 (cache layer) on @redis/client 6.3.1", redisRes.NodeVersion)
		}
		fmt.Fprintf(w, ".\n\n")
		redisRes.WriteLatency(w)
		if redisRes.NodeVersion != "" {
			fmt.Fprintf(w, "\n### What the previous variant leaves behind\n\n")
			redisRes.WriteCarryOver(w)
		}
		fmt.Fprintf(w, "\n### Targets\n\n")
		redisRes.WriteTargets(w)
		fmt.Fprintf(w, "\n## Redis round trips and commands per message, by path\n\n")
		redisRes.WriteRequests(w)
	}
	if waitRes != nil {
		fmt.Fprintf(w, "\n## Wait for completion: requests per waiting request (N=%d per store and run length)\n\n", waitRes.N)
		waitRes.Write(w)
	}
	if coldRes != nil {
		fmt.Fprintf(w, "\n## Cold start and memory (the orders job, under a local Runtime API)\n\n")
		coldRes.Write(w)
	}
	if e2eRes != nil {
		fmt.Fprintf(w, "\n## End to end: the orders bootstrap under the local runner\n\n")
		// localstack/stack.sh names the SQS emulator; the rate depends on it.
		if emu := stack.SQSEmulator; emu != "" {
			fmt.Fprintf(w, "SQS emulator: %s.\n\n", emu)
		}
		e2eRes.Write(w)
		fmt.Fprintf(w, "\nSending took %.1fs of the elapsed time (the clock starts at the first send). Runner: %d processes started, %d partial failures, %d crashes, %d timeouts.\n",
			e2eRes.Send.Seconds(), e2eRes.Stats.ProcessStarts, e2eRes.Stats.PartialFailures, e2eRes.Stats.Crashes, e2eRes.Stats.Timeouts)
	}
	return 0
}

// stamped prefixes each progress line with the time since the start.
type stamped struct {
	w     io.Writer
	start time.Time
}

func (s *stamped) Write(p []byte) (int, error) {
	if _, err := fmt.Fprintf(s.w, "[%6.1fs] %s", time.Since(s.start).Seconds(), p); err != nil {
		return 0, err
	}
	return len(p), nil
}
