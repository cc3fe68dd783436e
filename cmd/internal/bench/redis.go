package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/cmd/internal/harness"
	"github.com/lambdaidem/go-lambdaidem/internal/faultproxy"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
)

// Variants of the Redis benchmark's paths.
const (
	VariantRedisFloor          = "bare floor (the store's scripts, no decorator)"
	VariantPowertoolsRedis     = "Powertools (TypeScript), cache layer"
	VariantPowertoolsRedisBare = "bare floor (@redis/client, Powertools' SETs)"
)

// Targets of the Redis store (p50).
const (
	TargetRedisVsFloor      = 1.10
	TargetRedisVsPowertools = 0.5
)

// RedisConfig configures RunRedis.
type RedisConfig struct {
	// Addr is the redis-server's host:port. Required.
	Addr string
	// N, Warmup, Concurrency, PowertoolsDir, CountRuns and Progress are as
	// in DynamoConfig.
	N             int
	Warmup        int
	Concurrency   int
	PowertoolsDir string
	CountRuns     int
	Progress      io.Writer
}

// RunRedis times the first delivery and the duplicate through
// lambdaidem.SQS with the Redis store, next to its floor (the store's Claim
// and Complete called directly: the same two scripts without the
// decorator) and, with PowertoolsDir, next to Powertools for AWS Lambda
// (TypeScript) with its cache persistence layer on the same server,
// interleaved iteration by iteration. It then counts the store's commands
// per message through a counting RESP proxy. Its keys carry a prefix of
// their own.
func RunRedis(ctx context.Context, cfg RedisConfig) (*DynamoResult, error) {
	dc := DynamoConfig{N: cfg.N, Warmup: cfg.Warmup, Concurrency: cfg.Concurrency, CountRuns: cfg.CountRuns, Progress: cfg.Progress}
	dc.defaults()
	if cfg.Addr == "" {
		return nil, errors.New("bench: the redis-server address is required")
	}
	client := redis.NewClient(&redis.Options{Addr: cfg.Addr, PoolSize: dc.Concurrency, MinIdleConns: 1})
	defer client.Close()
	prefix := harness.UniqueName("lambdaidem-bench")
	b := &redisBench{cfg: dc, store: redisstore.New(client, prefix)}
	if err := b.store.LoadScripts(ctx); err != nil {
		return nil, err
	}
	opts := []lambdaidem.Option{
		lambdaidem.WithNamespace(Namespace), lambdaidem.WithLogger(quietLogger()),
		lambdaidem.WithConcurrency(dc.Concurrency), lambdaidem.WithInvocationHook(b.out.hook),
	}
	ok := func(context.Context, events.SQSMessage) error { return nil }
	b.h = lambdaidem.SQS(b.store, ok, opts...)
	b.hBatched = lambdaidem.SQS(b.store, ok, append(slices.Clone(opts), lambdaidem.WithBatchedWrites())...)
	b.hTx = lambdaidem.SQS(b.store, b.txHandler(b.store), opts...)
	b.hOpt = lambdaidem.SQS(b.store, b.txHandler(b.store), append(slices.Clone(opts), lambdaidem.WithOptimisticCommit())...)
	res := &DynamoResult{N: dc.N, Concurrency: dc.Concurrency, Store: "redis"}

	if cfg.PowertoolsDir != "" {
		p, err := faultproxy.NewRESP(cfg.Addr)
		if err != nil {
			return nil, err
		}
		defer p.Close()
		b.ptProxy = p
		nd, err := startHarness(ctx, cfg.PowertoolsDir, "BENCH_STORE=redis",
			"BENCH_REDIS_URL=redis://"+cfg.Addr, "BENCH_REDIS_COUNT_URL=redis://"+p.Addr())
		if err != nil {
			return nil, err
		}
		defer nd.close()
		b.node = nd
		r, err := nd.call(map[string]any{"op": "versions"})
		if err != nil {
			return nil, err
		}
		res.NodeVersion = r.Node
	}
	for _, path := range []string{PathFirst, PathDuplicate, PathBatch, PathTxFirst} {
		pr, err := b.latency(ctx, path)
		if err != nil {
			return nil, err
		}
		res.Paths = append(res.Paths, pr)
	}
	rows, err := b.requests(ctx, cfg.Addr, prefix)
	if err != nil {
		return nil, err
	}
	res.Requests = rows
	return res, nil
}

type redisBench struct {
	cfg   DynamoConfig
	store *redisstore.Store
	h     sqsHandler
	// hBatched is h WithBatchedWrites; hTx and hOpt run the transactional
	// handler (txHandler) in lease mode and in the optimistic mode.
	hBatched, hTx, hOpt sqsHandler
	out                 outcomes
	node                *node
	ptProxy             *faultproxy.RESP

	doneIDs, doneFloorIDs []string
}

// floorFirst is a first delivery's two scripts, called on the store
// directly with the decorator's arguments.
func (b *redisBench) floorFirst(ctx context.Context, id string) error {
	return b.floorClaimComplete(ctx, id, nil)
}

// floorClaimComplete claims id and completes it with writes: the claim
// script, then the completion script (running writes' commands).
func (b *redisBench) floorClaimComplete(ctx context.Context, id string, writes []any) error {
	now := time.Now()
	c, err := b.store.Claim(ctx, idemstore.ClaimRequest{
		Namespace: Namespace + "-floor", Key: id, PayloadHash: lambdaidem.MessageIDHash, MessageID: id,
		Now: now, LeaseUntil: now.Add(30 * time.Second), Grace: 2 * time.Second, ExpiresAt: now.Add(24 * time.Hour),
	})
	if err != nil {
		return err
	}
	if !c.Claimed {
		return fmt.Errorf("bench: floor claim of %s refused", id)
	}
	return b.store.Complete(ctx, idemstore.CompleteRequest{Lease: c.Lease, Now: time.Now(), ExpiresAt: now.Add(24 * time.Hour), Writes: writes})
}

// txHandler is the transactional handler on Redis: its effect is one
// command the completion's script (lease mode) or the commit's
// (optimistic mode) runs.
func (b *redisBench) txHandler(store *redisstore.Store) lambdaidem.MessageHandler {
	return func(ctx context.Context, m events.SQSMessage) error {
		return lambdaidem.AddCompletionWrite(ctx, redisstore.Set(store.Key(Namespace, "fx:"+m.MessageId), "42"))
	}
}

// floorTxFirst is a transactional first delivery's two scripts, called on
// the store directly: the claim, then the completion running the effect's
// command.
func (b *redisBench) floorTxFirst(ctx context.Context, id string) error {
	return b.floorClaimComplete(ctx, id, []any{redisstore.Set(b.store.Key(Namespace+"-floor", "fx:"+id), "42")})
}

// floorBatch is a batch's floor: each record's two scripts, the records
// concurrently, at most Concurrency at once, as the decorator runs them.
func (b *redisBench) floorBatch(ctx context.Context, ids []string) error {
	return concurrently(ctx, ids, b.cfg.Concurrency, b.floorFirst)
}

// tripCounter counts a go-redis client's round trips: a command, or a
// pipeline of them, is one.
type tripCounter struct{ n atomic.Int64 }

func (c *tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() != "hello" {
			c.n.Add(1) // a new pooled connection's handshake is not a store request
		}
		return next(ctx, cmd)
	}
}

func (c *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) == 0 || (cmds[0].Name() != "hello" && cmds[0].Name() != "client") {
			c.n.Add(1) // a new pooled connection's handshake is not a store request
		}
		return next(ctx, cmds)
	}
}

// floorDuplicate is a duplicate's one script: a claim refused by the
// completed record.
func (b *redisBench) floorDuplicate(ctx context.Context, id string) error {
	now := time.Now()
	c, err := b.store.Claim(ctx, idemstore.ClaimRequest{
		Namespace: Namespace + "-floor", Key: id, PayloadHash: lambdaidem.MessageIDHash, MessageID: id,
		Now: now, LeaseUntil: now.Add(30 * time.Second), Grace: 2 * time.Second, ExpiresAt: now.Add(24 * time.Hour),
	})
	if err == nil && (c.Claimed || c.Record.Status != idemstore.StatusCompleted) {
		err = fmt.Errorf("bench: floor duplicate of %s not refused as COMPLETED", id)
	}
	return err
}

func (b *redisBench) variants(path string) []variant {
	timed := func(ctx context.Context, f func(context.Context) error) (time.Duration, error) {
		ictx, cancel := invocation(ctx)
		defer cancel()
		t0 := time.Now()
		err := f(ictx)
		return time.Since(t0), err
	}
	var vs []variant
	switch path {
	case PathFirst:
		floor := func(name string) variant {
			return variant{name, func(ctx context.Context) (time.Duration, error) {
				id := newID()
				b.doneFloorIDs = append(b.doneFloorIDs, id)
				return timed(ctx, func(ctx context.Context) error { return b.floorFirst(ctx, id) })
			}}
		}
		vs = []variant{decoratorFirst(&b.out, b.h, &b.doneIDs), floor(VariantRedisFloor), floor(VariantFloorTwin)}
	case PathDuplicate:
		j := 0
		floor := func(name string) variant {
			return variant{name, func(ctx context.Context) (time.Duration, error) {
				id := b.doneFloorIDs[j%len(b.doneFloorIDs)]
				j++
				return timed(ctx, func(ctx context.Context) error { return b.floorDuplicate(ctx, id) })
			}}
		}
		vs = []variant{decoratorDuplicate(&b.out, b.h, b.doneIDs), floor(VariantRedisFloor), floor(VariantFloorTwin)}
	case PathBatch:
		floor := func(name string) variant {
			return variant{name, func(ctx context.Context) (time.Duration, error) {
				ids := freshIDs(batchSize)
				return timed(ctx, func(ctx context.Context) error { return b.floorBatch(ctx, ids) })
			}}
		}
		through := func(name string, h sqsHandler) variant {
			return variant{name, func(ctx context.Context) (time.Duration, error) {
				return b.out.run(ctx, h, event(freshIDs(batchSize)...), lambdaidem.OutcomeProcessed)
			}}
		}
		vs = []variant{through(VariantLambdaidem, b.h), through(VariantBatched, b.hBatched), floor(VariantRedisFloor), floor(VariantFloorTwin)}
	case PathTxFirst:
		through := func(name string, h sqsHandler) variant {
			return variant{name, func(ctx context.Context) (time.Duration, error) {
				return b.out.run(ctx, h, event(newID()), lambdaidem.OutcomeProcessed)
			}}
		}
		floor := variant{VariantRedisFloor, func(ctx context.Context) (time.Duration, error) {
			id := newID()
			return timed(ctx, func(ctx context.Context) error { return b.floorTxFirst(ctx, id) })
		}}
		// Powertools has no transactional path to compare.
		return []variant{through(VariantLambdaidem, b.hTx), through(VariantOptimistic, b.hOpt), floor}
	}
	if op := map[string]string{PathFirst: "first", PathDuplicate: "duplicate"}[path]; op == "" {
		return vs
	}
	if b.node != nil {
		op := map[string]string{PathFirst: "first", PathDuplicate: "duplicate"}[path]
		vs = append(vs, nodeVariant(b.node, VariantPowertoolsRedis, op))
		if path == PathFirst {
			vs = append(vs, nodeVariant(b.node, VariantPowertoolsRedisBare, "floor"))
		}
	}
	return vs
}

// decoratorFirst is a first delivery of a fresh message through h; the
// message IDs go to done, for the duplicates.
func decoratorFirst(o *outcomes, h sqsHandler, done *[]string) variant {
	return variant{VariantLambdaidem, func(ctx context.Context) (time.Duration, error) {
		id := newID()
		d, err := o.run(ctx, h, event(id), lambdaidem.OutcomeProcessed)
		*done = append(*done, id)
		return d, err
	}}
}

// decoratorDuplicate delivers the messages of done again, in turn.
func decoratorDuplicate(o *outcomes, h sqsHandler, done []string) variant {
	i := 0
	return variant{VariantLambdaidem, func(ctx context.Context) (time.Duration, error) {
		id := done[i%len(done)]
		i++
		return o.run(ctx, h, event(id), lambdaidem.OutcomeDuplicate)
	}}
}

func (b *redisBench) latency(ctx context.Context, path string) (PathResult, error) {
	return measure(ctx, b.cfg, path, b.variants(path), nil)
}

// requests counts the store's commands per message by path through a
// counting RESP proxy.
func (b *redisBench) requests(ctx context.Context, addr, prefix string) ([]RequestRow, error) {
	fmt.Fprintf(b.cfg.Progress, "commands per message: each path %d times through a counting proxy\n", b.cfg.CountRuns)
	p, err := faultproxy.NewRESP(addr)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	client := redis.NewClient(&redis.Options{Addr: p.Addr(), PoolSize: b.cfg.Concurrency})
	defer client.Close()
	var trips tripCounter
	client.AddHook(&trips)
	store := redisstore.New(client, prefix)
	var out outcomes
	opts := []lambdaidem.Option{
		lambdaidem.WithNamespace(Namespace), lambdaidem.WithLogger(quietLogger()),
		lambdaidem.WithConcurrency(b.cfg.Concurrency), lambdaidem.WithInvocationHook(out.hook),
	}
	ok := lambdaidem.SQS(store, func(context.Context, events.SQSMessage) error { return nil }, opts...)
	cached := lambdaidem.SQS(store, func(context.Context, events.SQSMessage) error { return nil },
		append(opts, lambdaidem.WithCache(1000, time.Hour))...)
	txRedis := b.txHandler(store)
	tx := lambdaidem.SQS(store, txRedis, opts...)
	optimistic := lambdaidem.SQS(store, txRedis, append(slices.Clone(opts), lambdaidem.WithOptimisticCommit())...)
	batched := lambdaidem.SQS(store, func(context.Context, events.SQSMessage) error { return nil }, append(slices.Clone(opts), lambdaidem.WithBatchedWrites())...)
	// Connect before counting: the handshake is not a store request.
	if err := client.Ping(ctx).Err(); err != nil {
		return nil, err
	}
	type path struct {
		name     string
		want     float64
		setup    sqsHandler
		h        sqsHandler
		outcome  lambdaidem.Outcome
		messages int // 0: one
	}
	var rows []RequestRow
	for _, pth := range []path{
		{PathFirst, 2, nil, ok, lambdaidem.OutcomeProcessed, 0},
		{PathDuplicate, 1, ok, ok, lambdaidem.OutcomeDuplicate, 0},
		{"duplicate, WithCache (warm)", 0, cached, cached, lambdaidem.OutcomeCachedDuplicate, 0},
		{PathBatch + " (per message)", 2, nil, ok, lambdaidem.OutcomeProcessed, batchSize},
		{PathBatchedWrites, 4.0 / batchSize, nil, batched, lambdaidem.OutcomeProcessed, batchSize},
		{PathTxFirst, 2, nil, tx, lambdaidem.OutcomeProcessed, 0},
		{PathTxFirst + ", WithOptimisticCommit", 1, nil, optimistic, lambdaidem.OutcomeProcessed, 0},
	} {
		row := RequestRow{Impl: VariantLambdaidem, Path: pth.name, Want: pth.want, Ops: map[string]int{}, Units: -1}
		for range b.cfg.CountRuns {
			ids := freshIDs(max(pth.messages, 1))
			if pth.setup != nil {
				if _, err := out.run(ctx, pth.setup, event(ids...), lambdaidem.OutcomeProcessed); err != nil {
					return nil, fmt.Errorf("%s: setup: %w", pth.name, err)
				}
			}
			p.ResetCounts()
			trips.n.Store(0)
			if _, err := out.run(ctx, pth.h, event(ids...), pth.outcome); err != nil {
				return nil, fmt.Errorf("%s: %w", pth.name, err)
			}
			for op, c := range p.Counts() {
				if op == "HELLO" || op == "CLIENT" {
					continue // a new pooled connection's handshake, not a store request
				}
				row.Ops[op] += c
			}
			row.Trips += int(trips.n.Load())
			row.Messages += len(ids)
		}
		rows = append(rows, row)
	}
	if b.node != nil {
		for _, pth := range []struct{ name, op string }{{PathFirst, "first"}, {PathDuplicate, "duplicate"}} {
			row := RequestRow{Impl: VariantPowertoolsRedis, Path: pth.name, Want: -1, Ops: map[string]int{}, Units: -1}
			for range b.cfg.CountRuns {
				if pth.op == "duplicate" {
					if _, err := b.node.call(map[string]any{"op": "prepare-duplicate"}); err != nil {
						return nil, err
					}
				}
				b.ptProxy.ResetCounts()
				if _, err := b.node.call(map[string]any{"op": "count", "path": pth.op}); err != nil {
					return nil, err
				}
				for op, c := range b.ptProxy.Counts() {
					row.Ops[op] += c
				}
				row.Messages++
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}
