package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/lambdaidem/go-lambdaidem/cmd/internal/chaos"
	"github.com/lambdaidem/go-lambdaidem/cmd/internal/harness"
)

const usage = `lambdaidem-chaos sends many messages through the chaos function's real
bootstrap under two local event source mappings, with duplicate sends,
process crashes, store faults, slow handlers and poison messages, then
checks from the effects table, the DLQ and the idempotency records that
nothing was lost and no effect repeated beyond what at-least-once allows.

It needs the local services (AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_SQS):

  make chaos
  localstack/stack.sh run -- go run ./cmd/lambdaidem-chaos -messages 1000

Modes (-mode): plain (the effect written by the handler, at-least-once),
tx (the effect committed with the completion, exactly once), optimistic
(tx's handler under WithOptimisticCommit: no claim on a first delivery,
the commit decides), both (plain and tx, the default) or all three.
chain-amo, chain-keyed and chain-plain (or chain, all three) run the chain
example (examples/chain) instead: its orders stage sends a notification
per order to a second queue, its notify stage sends the email through a
fake email API; crashes strike after the send and after the email, and the
API answers some first requests 504 after sending, some 503 without. Every
chain mode is checked for lost 0 and for notifications keyed by their
order's effect key; chain-amo (at most once, the API without keys) and
chain-keyed (the API honouring Idempotency-Key) for one email per order;
chain-plain measures the duplicates.
-batched runs plain and tx with WithBatchedWrites (a batch's claims and
its completions in batched requests, two lanes side by side); optimistic
has no claim to batch and is refused with it. Every mode is checked for lost 0, and tx and
optimistic for duplicate effects 0:

  localstack/stack.sh run -- go run ./cmd/lambdaidem-chaos -mode optimistic -messages 1500
  localstack/stack.sh run -- go run ./cmd/lambdaidem-chaos -batched -messages 1500 -store redis

Replay a run with the seed it printed: -seed N.

Flags:
`

func main() { harness.Main(run) }

// run is main without the process: 0 when every invariant held, 1 when
// one broke, 2 when a run could not be carried out.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := harness.Flags("lambdaidem-chaos", usage, stderr)
	def := chaos.DefaultConfig(chaos.ModePlain)
	messages := fs.Int("messages", def.Messages, "distinct `number` of messages per mode (duplicates come on top)")
	seed := fs.Uint64("seed", 0, "random `seed` (default: from the clock; always printed)")
	mode := fs.String("mode", "both", "`mode`: plain, tx, optimistic, both (plain and tx), all, chain-amo, chain-keyed, chain-plain or chain (the three)")
	batched := fs.Bool("batched", false, "run with lambdaidem.WithBatchedWrites (plain and tx only)")
	bootstrap := fs.String("bootstrap", "", "a prebuilt chaos function `binary` (default: build ./cmd/lambdaidem-chaos/fn)")
	drain := fs.Duration("drain", def.DrainTimeout, "give up waiting for the queue to drain when nothing has moved for this long, per mode")
	verbose := fs.Bool("v", false, "copy the function's log lines (JSON) to stderr")
	keep := fs.Bool("keep", false, "keep the tables and queues after the run, for inspection")
	store := fs.String("store", string(chaos.StoreDynamoDB), "idempotency `store`: dynamodb, or redis (LAMBDAIDEM_REDIS_ADDR); on redis, tx mode commits each effect as a command of the completion's own script")
	tune := def
	fs.Float64Var(&tune.DuplicateRate, "duplicates", def.DuplicateRate, "share of messages sent twice (negative: none)")
	fs.Float64Var(&tune.CrashRate, "crashes", def.CrashRate, "share of messages that crash their first attempt (negative: none)")
	fs.Float64Var(&tune.PoisonRate, "poison", def.PoisonRate, "share of poison messages, at least 3 (negative: none)")
	fs.Float64Var(&tune.SlowRate, "slow", def.SlowRate, "share of messages that outlive the visibility timeout (negative: none)")
	fs.Float64Var(&tune.FaultRate, "faults", def.FaultRate, "share of the function's DynamoDB requests that fail (negative: none)")
	fs.Float64Var(&tune.EmailFaultRate, "email-faults", def.EmailFaultRate, "chain modes: share of orders whose first email request fails, half 504 after sending, half 503 without (negative: none)")
	fs.IntVar(&tune.Pollers, "pollers", def.Pollers, "event source mappings polling the queue")
	fs.IntVar(&tune.Concurrency, "concurrency", def.Concurrency, "processes per mapping")
	fs.IntVar(&tune.Backlog, "backlog", def.Backlog, "most messages sent and not yet deleted")
	fs.IntVar(&tune.BatchSize, "batch", def.BatchSize, "batch size (1..10)")
	fs.DurationVar(&tune.Visibility, "visibility", def.Visibility, "the queue's visibility timeout (whole seconds)")
	fs.DurationVar(&tune.FunctionTimeout, "timeout", def.FunctionTimeout, "the function's timeout")
	if code, ok := harness.Parse(fs, args); !ok {
		return code
	}
	var modes []chaos.Mode
	switch *mode {
	case "both":
		modes = []chaos.Mode{chaos.ModePlain, chaos.ModeTx}
	case "all":
		modes = []chaos.Mode{chaos.ModePlain, chaos.ModeTx, chaos.ModeOptimistic}
	case "chain":
		modes = chaos.ChainModes
	case string(chaos.ModePlain), string(chaos.ModeTx), string(chaos.ModeOptimistic), string(chaos.ModeChainAMO), string(chaos.ModeChainKeyed), string(chaos.ModeChainPlain):
		modes = []chaos.Mode{chaos.Mode(*mode)}
	default:
		fmt.Fprintf(stderr, "lambdaidem-chaos: -mode %q is not plain, tx, optimistic, both, all, chain-amo, chain-keyed, chain-plain or chain\n", *mode)
		return 2
	}
	chain := slices.ContainsFunc(modes, func(m chaos.Mode) bool { return slices.Contains(chaos.ChainModes, m) })
	if *batched && slices.Contains(modes, chaos.ModeOptimistic) {
		fmt.Fprintln(stderr, "lambdaidem-chaos: -batched with -mode optimistic: the library refuses WithBatchedWrites with WithOptimisticCommit (no claim to batch)")
		return 2
	}
	stack := harness.StackFromEnv()
	redisAddr := ""
	switch chaos.Store(*store) {
	case chaos.StoreDynamoDB:
	case chaos.StoreRedis:
		if redisAddr = stack.RedisAddr; redisAddr == "" {
			fmt.Fprintln(stderr, "lambdaidem-chaos: -store redis needs LAMBDAIDEM_REDIS_ADDR (localstack/stack.sh sets it)")
			return 2
		}
	default:
		fmt.Fprintf(stderr, "lambdaidem-chaos: -store %q is not dynamodb or redis\n", *store)
		return 2
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	if err := stack.Check(true, "lambdaidem-chaos", "chaos", "./cmd/lambdaidem-chaos"); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	fmt.Fprintf(stdout, "lambdaidem chaos: seed %d (replay with -seed %d), %d messages per mode, modes %v, batched %v, store %s\n", *seed, *seed, *messages, modes, *batched, *store)

	if *bootstrap == "" {
		// One build for both modes.
		var remove func() error
		var err error
		pkg := chaos.FunctionPackage
		if chain {
			pkg = chaos.ChainPackage
		}
		*bootstrap, remove, err = harness.Build(ctx, pkg, harness.NewLog(stdout, "chaos: "))
		defer func() { _ = remove() }()
		if err != nil {
			fmt.Fprintf(stderr, "lambdaidem-chaos: %v\n", err)
			return 2
		}
	}

	var reports []chaos.Report
	var chains []chaos.ChainReport
	code := 0
	for _, m := range modes {
		cfg := tune
		cfg.Mode = m
		cfg.Batched = *batched
		if cfg.SlowFor == def.SlowFor && cfg.Visibility != def.Visibility {
			cfg.SlowFor = 0 // follows the visibility timeout
		}
		cfg.Messages = *messages
		cfg.Seed = *seed
		cfg.Bootstrap = *bootstrap
		cfg.DynamoDBEndpoint, cfg.SQSEndpoint, cfg.Region = stack.DynamoDBEndpoint, stack.SQSEndpoint, stack.Region
		cfg.Store, cfg.RedisAddr = chaos.Store(*store), redisAddr
		cfg.DrainTimeout = *drain
		cfg.Keep = *keep
		cfg.Progress = stdout
		if *verbose {
			cfg.FunctionLog = stderr
		}
		var err error
		if chain {
			var rep chaos.ChainReport
			rep, err = chaos.RunChain(ctx, cfg)
			chains = append(chains, rep)
		} else {
			var rep chaos.Report
			rep, err = chaos.Run(ctx, cfg)
			reports = append(reports, rep)
		}
		switch {
		case errors.Is(err, chaos.ErrInvariant):
			code = 1
		case err != nil:
			fmt.Fprintf(stderr, "lambdaidem-chaos: mode %s, seed %d: %v\n", m, *seed, err)
			return 2
		}
	}
	fmt.Fprintln(stdout)
	if chain {
		chaos.PrintChain(stdout, chains...)
	} else {
		chaos.Print(stdout, reports...)
	}
	return code
}
