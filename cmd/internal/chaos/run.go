package chaos

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/cmd/internal/harness"
	"github.com/lambdaidem/go-lambdaidem/internal/faultproxy"
	"github.com/lambdaidem/go-lambdaidem/localrun"
)

// Namespace is the idempotency namespace of the chaos function.
const Namespace = "chaos"

// FunctionPackage is the chaos function's package, relative to the module
// root.
const FunctionPackage = "./cmd/lambdaidem-chaos/fn"

// backstopReceives is the source queue's redrive threshold. The library
// dead-letters with a reason long before; a message SQS moves on its own
// shows up in the DLQ without one, which the run reports as a violation.
const backstopReceives = 100

// Run runs one chaos run and checks its invariants. The Report is
// returned whenever the run got as far as reading its results; the error
// wraps ErrInvariant when an invariant broke, and is something else when
// the run could not be carried out (a service unreachable, a build error,
// the drain deadline).
//
// The run is a scenario on the shared harness (internal/harness): the
// chaos function under Pollers event source mappings on one queue, its
// DynamoDB (or Redis) requests through a fault proxy, and one phase that
// sends the seeded workload within Backlog and waits for the queue to
// drain.
func Run(ctx context.Context, cfg Config) (Report, error) {
	cfg.applyDefaults()
	if err := cfg.validate(); err != nil {
		return Report{}, err
	}
	if cfg.Mode.chain() {
		return Report{}, fmt.Errorf("%w: mode %q runs with RunChain", ErrInvalidConfig, cfg.Mode)
	}
	start := time.Now()
	h, bootstrap, err := harness.Open(ctx, harness.Config{
		Stack: harness.Stack{DynamoDBEndpoint: cfg.DynamoDBEndpoint, SQSEndpoint: cfg.SQSEndpoint, Region: cfg.Region, RedisAddr: cfg.RedisAddr},
		Name:  "lambdaidem-chaos-" + cfg.name(),
		// The harness talks to DynamoDB directly: faults are for the
		// function.
		Log:         &harness.Log{Out: cfg.Progress, Prefix: "chaos: "},
		FunctionLog: cfg.FunctionLog,
		WaitTimeout: cfg.DrainTimeout,
		Keep:        cfg.Keep,
	}, FunctionPackage, cfg.Bootstrap)
	if err != nil {
		return Report{}, err
	}
	defer func() { _ = h.Close() }()
	r := &run{cfg: cfg, h: h, obs: newObserver(h.Obs), plan: &faultPlan{seed: cfg.Seed, rate: cfg.FaultRate}}
	r.workload = NewWorkload(cfg)

	proxy, err := faultproxy.New(cfg.DynamoDBEndpoint)
	if err != nil {
		return Report{}, err
	}
	defer proxy.Close()
	r.plan.install(proxy)
	env := []string{
		harness.DynamoDBEndpointVar + "=" + proxy.URL(),
		"CHAOS_MODE=" + string(cfg.Mode),
		"IDEMPOTENCY_NAMESPACE=" + Namespace,
		"MAX_ATTEMPTS=" + strconv.Itoa(cfg.MaxAttempts),
	}
	if cfg.Batched {
		env = append(env, "CHAOS_BATCHED=1")
	}
	var resp *faultproxy.RESP
	if cfg.Store == StoreRedis {
		if resp, err = faultproxy.NewRESP(cfg.RedisAddr); err != nil {
			return Report{}, err
		}
		defer resp.Close()
		r.plan.installRESP(resp)
		env = append(env, "CHAOS_STORE=redis", "REDIS_ENDPOINT="+resp.Addr(), "REDIS_PREFIX="+h.Prefix)
		if !cfg.Keep {
			h.OnClose(func() error { return deleteRedisKeys(cfg.RedisAddr, h.Prefix) })
		}
	}

	err = h.Start(ctx, bootstrap, harness.Function{
		Name:        "chaos",
		KeyField:    KeyField,
		Env:         env,
		Effects:     true,
		Visibility:  cfg.Visibility,
		MaxReceives: backstopReceives,
		// "processed" is logged at debug; the run needs it to tell
		// recorded completions from unrecorded ones.
		Debug:           true,
		Pollers:         cfg.Pollers,
		BatchSize:       cfg.BatchSize,
		MaxConcurrency:  cfg.Concurrency,
		FunctionTimeout: cfg.FunctionTimeout,
		PollWait:        time.Second,
	})
	if err != nil {
		return Report{}, err
	}
	h.Log.Printf("mode %s, seed %d: %d messages in %d sends to %d pollers × %d processes",
		cfg.name(), cfg.Seed, cfg.Messages, r.workload.Sends(), cfg.Pollers, cfg.Concurrency)

	stopProgress := harness.Every(cfg.ProgressEvery, r.progress)
	driveErr := h.Play(ctx, r.workload, harness.Phase{Name: "send", Sends: r.workload.Order, Backlog: cfg.Backlog})
	stopErr := h.Stop(ctx)
	stopProgress()
	drained := time.Since(start)
	_ = proxy.Close()
	if driveErr != nil {
		return Report{}, fmt.Errorf("%w (seed %d)", driveErr, cfg.Seed)
	}
	if stopErr != nil {
		return Report{}, stopErr
	}

	rep, err := r.collect(ctx)
	if err != nil {
		return Report{}, err
	}
	rep.StoreRequests = proxy.Total()
	if resp != nil {
		// The DynamoDB requests are the effects' alone: count the store's.
		rep.StoreRequests = redisStoreCommands(resp)
	}
	rep.Drained = drained
	rep.Duration = time.Since(start)
	rep.Deliveries = int(h.Stats().Records)
	if len(rep.Violations) > 0 {
		return rep, fmt.Errorf("%w: %s", ErrInvariant, strings.Join(rep.Violations, "; "))
	}
	return rep, nil
}

// name is the run's mode as the report and the logs name it: the mode,
// and "-batched" with batched writes.
func (c Config) name() string {
	if c.Batched {
		return string(c.Mode) + "-batched"
	}
	return string(c.Mode)
}

// run is the state of one Run.
type run struct {
	cfg      Config
	h        *harness.Harness
	workload Workload
	obs      *observer
	plan     *faultPlan
}

// progress prints a progress line.
func (r *run) progress(final bool) {
	if final {
		return
	}
	o := r.h.Obs.Snapshot()
	depth := "?"
	if n, err := r.h.QueueDepth(context.Background()); err == nil {
		depth = strconv.Itoa(n)
	}
	r.h.Log.Printf("mode %s: sent %d/%d, deleted %d, queue %s, in flight %d | processed %d, held back %d, process restarts %d",
		r.cfg.name(), r.h.Sent(), r.workload.Sends(), r.h.Obs.Deleted(), depth, r.h.Obs.InFlight(),
		o.Outcomes["processed"], o.Outcomes["in_progress"], o.Restarts)
}

// deleteRedisKeys deletes the run's keys, by their prefix: a harness's
// clean-up on a test server, not something the store ever does.
func deleteRedisKeys(addr, prefix string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	iter := client.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		client.Del(ctx, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("delete redis keys %s:*: %w", prefix, err)
	}
	return nil
}

// BuildFunction builds the chaos function (FunctionPackage) for this
// machine into dir, as a provided.al2023 bootstrap is built apart from the
// OS (static, without the RPC transport), and returns the binary's path.
// It needs the go command and this module's source.
func BuildFunction(ctx context.Context, dir string) (string, error) {
	return localrun.Build(ctx, FunctionPackage, dir)
}
