package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/cmd/internal/harness"
	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/internal/faultproxy"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// Paths of the latency benchmark.
const (
	PathFirst     = "first delivery"
	PathDuplicate = "duplicate"
	PathBatch     = "10-record batch"
)

// Variants of a path: the implementations measured side by side.
const (
	VariantLambdaidem = "lambdaidem (Go)"
	VariantFloor      = "bare floor (Go SDK)"
	// VariantFloorTwin runs the floor's code again as a variant of its
	// own: an A/A check that the order the variants run in favours none.
	VariantFloorTwin      = "bare floor again (A/A: the same code as a variant of its own)"
	VariantPowertools     = "Powertools (TypeScript)"
	VariantPowertoolsBare = "bare floor (JS SDK)"
)

// Namespace is the idempotency namespace of the benchmark's records.
const Namespace = "bench"

// batchSize is the records per batch of PathBatch: SQS's default batch.
const batchSize = 10

// body is every benchmark message's body; the Node harness sends the same.
var body = `{"order_id":"o-bench","amount":42,"note":"` + strings.Repeat("x", 64) + `"}`

// DynamoConfig configures RunDynamo.
type DynamoConfig struct {
	// Endpoint is DynamoDB Local's URL. Required.
	Endpoint string
	// Region is the region the clients sign for. Default us-east-1.
	Region string
	// N is the measured iterations per path and variant. Default 1000.
	N int
	// Warmup is the unmeasured iterations per path and variant first.
	// Default max(N/10, 20).
	Warmup int
	// Concurrency is the decorator's record concurrency, and the bare
	// batch's. Default lambdaidem.DefaultConcurrency (10).
	Concurrency int
	// PowertoolsDir is where the Powertools harness is installed (see
	// InstallPowertools). Empty: Powertools is not measured.
	PowertoolsDir string
	// CountRuns is how often each path runs for the request counts.
	// Default 10.
	CountRuns int
	// Progress receives one line per phase. Default: discarded.
	Progress io.Writer
}

func (c *DynamoConfig) defaults() {
	if c.Region == "" {
		c.Region = "us-east-1"
	}
	if c.N <= 0 {
		c.N = 1000
	}
	if c.Warmup <= 0 {
		c.Warmup = max(c.N/10, 20)
	}
	if c.Concurrency <= 0 {
		c.Concurrency = lambdaidem.DefaultConcurrency
	}
	if c.CountRuns <= 0 {
		c.CountRuns = 10
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
}

// PathResult is one path's latency per variant.
type PathResult struct {
	Path     string
	Variants []string // in display order
	Dists    map[string]*Dist
	// carry holds the samples by predecessor (WriteCarryOver).
	carry carry
}

// DynamoResult is the outcome of RunDynamo.
type DynamoResult struct {
	N           int
	Concurrency int
	Paths       []PathResult
	Requests    []RequestRow
	// NodeVersion is the harness's Node.js version; empty without
	// Powertools.
	NodeVersion string
	// Store is "redis" for RunRedis's result, "" for DynamoDB's.
	Store string
	// Breakdown splits the first deliveries of lambdaidem and its floor
	// into phases (breakdown.go), by variant; DynamoDB only.
	Breakdown map[string]*Breakdown
}

// Path returns the result of the named path, or nil.
func (r *DynamoResult) Path(name string) *PathResult {
	for i := range r.Paths {
		if r.Paths[i].Path == name {
			return &r.Paths[i]
		}
	}
	return nil
}

// ClientConfig is the SDK configuration of a benchmark client: static test
// credentials, so nothing ever reaches a real account.
func ClientConfig(region string) aws.Config {
	return aws.Config{Region: region, Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}
}

// NewClient returns the DynamoDB client every Go measurement shares: the
// store's tuning (dynamo.ClientOptions) with concurrency idle connections,
// and a per-attempt timeout long enough that a busy machine does not turn
// slow answers into retries (a retry would be measured, not hidden, but it
// is noise).
//
// Further options apply after those.
func NewClient(endpoint, region string, concurrency int, opts ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynamodb.NewFromConfig(ClientConfig(region), append([]func(*dynamodb.Options){
		dynamo.ClientOptions(dynamo.Tuning{Concurrency: concurrency, AttemptTimeout: 10 * time.Second}),
		func(o *dynamodb.Options) {
			o.BaseEndpoint = aws.String(endpoint)
		}}, opts...)...)
}

// quietLogger drops the decorator's per-record lines below WARN, as a
// production function at INFO would not log processed records either.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func newID() string { return rand.Text() }

func message(id string) events.SQSMessage {
	return events.SQSMessage{
		MessageId:      id,
		ReceiptHandle:  "rh-" + id,
		Body:           body,
		Attributes:     map[string]string{"ApproximateReceiveCount": "1", "SentTimestamp": "1700000000000"},
		EventSource:    "aws:sqs",
		EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:bench",
		AWSRegion:      "us-east-1",
	}
}

func event(ids ...string) events.SQSEvent {
	recs := make([]events.SQSMessage, len(ids))
	for i, id := range ids {
		recs[i] = message(id)
	}
	return events.SQSEvent{Records: recs}
}

func freshIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = newID()
	}
	return ids
}

// invocation is a Lambda-like context: a deadline, as the runtime sets one.
// It is made outside the timed section, as the runtime makes it.
func invocation(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, 30*time.Second)
}

type sqsHandler = func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)

// outcomes checks that every record of a measured path took the path it
// was meant to: a benchmark of the wrong path is worse than none.
type outcomes struct {
	mu   sync.Mutex
	last []lambdaidem.RecordReport
	// started is when run last started its clock.
	started time.Time
}

func (o *outcomes) hook(r *lambdaidem.InvocationReport) {
	o.mu.Lock()
	o.last = append(o.last[:0], r.Records...)
	o.mu.Unlock()
}

// expect fails unless every record of the last invocation ended in want
// (and, for a takeover, took an abandoned lease over).
func (o *outcomes) expect(want lambdaidem.Outcome, takeover bool) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.last) == 0 {
		return errors.New("bench: no invocation report")
	}
	for _, r := range o.last {
		if r.Outcome != want || r.Takeover != takeover {
			return fmt.Errorf("bench: record %s ended %q (takeover %v, err %v), want %q (takeover %v)",
				r.MessageID, r.Outcome, r.Takeover, r.Err, want, takeover)
		}
	}
	return nil
}

// run invokes h with ev and checks the outcome of every record.
func (o *outcomes) run(ctx context.Context, h sqsHandler, ev events.SQSEvent, want lambdaidem.Outcome) (time.Duration, error) {
	ictx, cancel := invocation(ctx)
	defer cancel()
	t0 := time.Now()
	o.started = t0
	resp, err := h(ictx, ev)
	d := time.Since(t0)
	var be *lambdaidem.BatchError
	if err != nil && !(want == lambdaidem.OutcomeFailed && errors.As(err, &be)) {
		return d, fmt.Errorf("bench: handler: %w", err)
	}
	if want != lambdaidem.OutcomeFailed && len(resp.BatchItemFailures) > 0 {
		return d, fmt.Errorf("bench: %d batch item failures", len(resp.BatchItemFailures))
	}
	return d, o.expect(want, false)
}

// createPowertoolsTable creates the table Powertools' DynamoDB persistence
// layer expects by default: a string partition key "id".
func createPowertoolsTable(ctx context.Context, c *dynamodb.Client, table string) error {
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
	})
	if err != nil {
		return fmt.Errorf("bench: create Powertools table: %w", err)
	}
	return dynamodb.NewTableExistsWaiter(c).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, time.Minute)
}

func deleteTable(c *dynamodb.Client, table string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	var nf *types.ResourceNotFoundException
	if err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("bench: delete table %s: %w", table, err)
	}
	return nil
}

// RunDynamo runs the DynamoDB Local benchmarks: latency per path next to
// its floor (and Powertools, when PowertoolsDir is set), interleaved
// iteration by iteration in one run on one client, then the requests per
// message by path through a counting proxy. It creates its own tables and
// deletes them.
func RunDynamo(ctx context.Context, cfg DynamoConfig) (*DynamoResult, error) {
	cfg.defaults()
	if cfg.Endpoint == "" {
		return nil, errors.New("bench: the DynamoDB endpoint is required")
	}
	rec := &wire{}
	client := NewClient(cfg.Endpoint, cfg.Region, cfg.Concurrency, rec.option())
	table := harness.UniqueName("lambdaidem-bench")
	fmt.Fprintf(cfg.Progress, "creating table %s\n", table)
	if err := dynamo.CreateTable(ctx, client, table, dynamo.TableOptions{NoTTL: true, PollInterval: 50 * time.Millisecond}); err != nil {
		return nil, err
	}
	defer func() { _ = deleteTable(client, table) }()

	res := &DynamoResult{N: cfg.N, Concurrency: cfg.Concurrency}
	b := &dynamoBench{cfg: cfg, client: client, table: table, wire: rec, breakdown: map[string]*Breakdown{}}
	res.Breakdown = b.breakdown
	b.flr = &floor{client: client, table: table, ns: Namespace + "-floor", hash: lambdaidem.MessageIDHash}
	b.store = dynamo.New(client, table)
	b.h = lambdaidem.SQS(b.store, func(context.Context, events.SQSMessage) error { return nil },
		lambdaidem.WithNamespace(Namespace), lambdaidem.WithLogger(quietLogger()),
		lambdaidem.WithConcurrency(cfg.Concurrency), lambdaidem.WithInvocationHook(b.out.hook))
	b.hBatched = lambdaidem.SQS(b.store, func(context.Context, events.SQSMessage) error { return nil }, lambdaidem.WithBatchedWrites(),
		lambdaidem.WithNamespace(Namespace), lambdaidem.WithLogger(quietLogger()),
		lambdaidem.WithConcurrency(cfg.Concurrency), lambdaidem.WithInvocationHook(b.out.hook))
	b.effects = harness.UniqueName("lambdaidem-bench-effects")
	fmt.Fprintf(cfg.Progress, "creating table %s (the transactional handler's effects)\n", b.effects)
	if err := createEffectsTable(ctx, client, b.effects); err != nil {
		return nil, err
	}
	defer func() { _ = deleteTable(client, b.effects) }()
	b.hTx = lambdaidem.SQS(b.store, txHandler(b.effects),
		lambdaidem.WithNamespace(Namespace), lambdaidem.WithLogger(quietLogger()),
		lambdaidem.WithConcurrency(cfg.Concurrency), lambdaidem.WithInvocationHook(b.out.hook))
	b.hOpt = lambdaidem.SQS(b.store, txHandler(b.effects), lambdaidem.WithOptimisticCommit(),
		lambdaidem.WithNamespace(Namespace), lambdaidem.WithLogger(quietLogger()),
		lambdaidem.WithConcurrency(cfg.Concurrency), lambdaidem.WithInvocationHook(b.out.hook))

	var countProxy string
	if cfg.PowertoolsDir != "" {
		ptTable := harness.UniqueName("lambdaidem-bench-powertools")
		fmt.Fprintf(cfg.Progress, "creating table %s (Powertools' layout: partition key id)\n", ptTable)
		if err := createPowertoolsTable(ctx, client, ptTable); err != nil {
			return nil, err
		}
		defer func() { _ = deleteTable(client, ptTable) }()
		p, err := faultproxy.New(cfg.Endpoint)
		if err != nil {
			return nil, err
		}
		defer p.Close()
		b.ptProxy, countProxy = p, p.URL()
		nd, err := startNode(ctx, cfg.PowertoolsDir, cfg.Region, ptTable, cfg.Endpoint, countProxy)
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

	for _, path := range []string{PathFirst, PathDuplicate, PathBatch, PathFIFO, PathTxFirst} {
		pr, err := b.latency(ctx, path)
		if err != nil {
			return nil, err
		}
		res.Paths = append(res.Paths, pr)
	}
	rows, err := b.requests(ctx)
	if err != nil {
		return nil, err
	}
	res.Requests = rows
	return res, nil
}

type dynamoBench struct {
	cfg    DynamoConfig
	client *dynamodb.Client
	table  string
	store  *dynamo.Store
	h      sqsHandler
	// hBatched is h with WithBatchedWrites.
	hBatched sqsHandler
	// effects is the transactional handler's table; hTx and hOpt are
	// that handler in lease mode and in the optimistic mode.
	effects   string
	hTx, hOpt sqsHandler
	out       outcomes
	flr       *floor
	node      *node
	// wire records the first-delivery path's HTTP attempts; breakdown
	// holds them split into phases, per variant.
	wire      *wire
	breakdown map[string]*Breakdown
	ptProxy   *faultproxy.Proxy

	// Keys completed on each side, for duplicates.
	doneIDs      []string
	doneFloorIDs []string
}

// variant is one measured implementation of a path: it runs one
// iteration and returns its latency.
type variant struct {
	name string
	run  func(ctx context.Context) (time.Duration, error)
}

func (b *dynamoBench) variants(path string) []variant {
	var vs []variant
	switch path {
	case PathFirst:
		// The floor's twin is not split into phases: the breakdown table
		// compares lambdaidem with the floor.
		floor := func(name string) variant {
			return variant{name, func(ctx context.Context) (time.Duration, error) {
				id := newID()
				ictx, cancel := invocation(ctx)
				defer cancel()
				if name == VariantFloor {
					b.wire.arm()
				}
				t0 := time.Now()
				err := b.flr.first(ictx, id)
				d := time.Since(t0)
				b.doneFloorIDs = append(b.doneFloorIDs, id)
				if name != VariantFloor {
					return d, err
				}
				return d, b.split(VariantFloor, t0, d, err)
			}}
		}
		vs = []variant{b.splitFirst(decoratorFirst(&b.out, b.h, &b.doneIDs)), floor(VariantFloor), floor(VariantFloorTwin)}
	case PathDuplicate:
		j := 0
		floor := func(name string) variant {
			return variant{name, func(ctx context.Context) (time.Duration, error) {
				id := b.doneFloorIDs[j%len(b.doneFloorIDs)]
				j++
				ictx, cancel := invocation(ctx)
				defer cancel()
				t0 := time.Now()
				err := b.flr.duplicate(ictx, id)
				return time.Since(t0), err
			}}
		}
		vs = []variant{decoratorDuplicate(&b.out, b.h, b.doneIDs), floor(VariantFloor), floor(VariantFloorTwin)}
	case PathFIFO:
		vs = b.fifoVariants()
	case PathTxFirst:
		vs = b.txVariants()
	case PathBatch:
		floor := func(name string) variant {
			return variant{name, func(ctx context.Context) (time.Duration, error) {
				ids := freshIDs(batchSize)
				ictx, cancel := invocation(ctx)
				defer cancel()
				t0 := time.Now()
				err := b.bareBatch(ictx, ids)
				return time.Since(t0), err
			}}
		}
		vs = []variant{
			{VariantLambdaidem, func(ctx context.Context) (time.Duration, error) {
				return b.out.run(ctx, b.h, event(freshIDs(batchSize)...), lambdaidem.OutcomeProcessed)
			}},
			{VariantBatched, func(ctx context.Context) (time.Duration, error) {
				return b.out.run(ctx, b.hBatched, event(freshIDs(batchSize)...), lambdaidem.OutcomeProcessed)
			}},
			floor(VariantFloor), floor(VariantFloorTwin),
		}
	}
	if op := map[string]string{PathFirst: "first", PathDuplicate: "duplicate", PathBatch: "batch", PathFIFO: "fifo"}[path]; b.node != nil && op != "" {
		vs = append(vs, b.nodeVariant(VariantPowertools, op))
		if path == PathFirst {
			vs = append(vs, b.nodeVariant(VariantPowertoolsBare, "floor"))
		}
	}
	return vs
}

// splitFirst wraps the decorator's first delivery so that its HTTP
// attempts are recorded and split into phases.
func (b *dynamoBench) splitFirst(v variant) variant {
	run := v.run
	v.run = func(ctx context.Context) (time.Duration, error) {
		b.wire.arm()
		d, err := run(ctx)
		return d, b.split(v.name, b.out.started, d, err)
	}
	return v
}

// split files one first delivery's recorded HTTP attempts into its
// variant's breakdown.
func (b *dynamoBench) split(variant string, t0 time.Time, d time.Duration, err error) error {
	evs := b.wire.take()
	if err != nil {
		return err
	}
	bd := b.breakdown[variant]
	if bd == nil {
		bd = &Breakdown{}
		b.breakdown[variant] = bd
	}
	if bd.Deliveries >= b.cfg.N {
		return nil // past the measured samples (latency keeps N)
	}
	return bd.add(evs, t0, d)
}

func (b *dynamoBench) nodeVariant(name, op string) variant {
	return nodeVariant(b.node, name, op)
}

// nodeVariant is one iteration of op in the Node harness.
func nodeVariant(nd *node, name, op string) variant {
	return variant{name, func(context.Context) (time.Duration, error) {
		s, err := nd.samples(op, 1)
		if err != nil {
			return 0, err
		}
		return s[0], nil
	}}
}

// bareBatch is the floor of a batch: each record's claim and complete,
// the records concurrently, at most Concurrency at once, as the decorator
// runs them.
func (b *dynamoBench) bareBatch(ctx context.Context, ids []string) error {
	return concurrently(ctx, ids, b.cfg.Concurrency, b.flr.first)
}

// concurrently calls f for each id, at most limit at once, and joins
// their errors.
func concurrently(ctx context.Context, ids []string, limit int, f func(context.Context, string) error) error {
	sem := make(chan struct{}, limit)
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = f(ctx, id)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// latency warms a path up, then measures it (measure); a first delivery's
// breakdown keeps only the measured runs.
func (b *dynamoBench) latency(ctx context.Context, path string) (PathResult, error) {
	var warmedUp func()
	if path == PathFirst {
		warmedUp = func() { clear(b.breakdown) }
	}
	return measure(ctx, b.cfg, path, b.variants(path), warmedUp)
}

// measure warms up and measures the variants of one path, interleaved:
// each cycle runs every variant once, in a fresh random order
// (cycleOrders, order.go), so that machine noise, any advantage of going
// first or last, and whatever earlier variants leave behind fall on all of
// them alike. Each variant runs cfg.Warmup unmeasured times, then cfg.N
// measured ones. warmedUp, if not nil, is called once between the warm-up
// and the measured runs.
func measure(ctx context.Context, cfg DynamoConfig, path string, vs []variant, warmedUp func()) (PathResult, error) {
	pr := PathResult{Path: path, Dists: map[string]*Dist{}}
	for _, v := range vs {
		pr.Variants = append(pr.Variants, v.name)
		pr.Dists[v.name] = &Dist{}
	}
	fmt.Fprintf(cfg.Progress, "%s: %d warm-up and %d measured runs of each of %d variants, interleaved\n", path, cfg.Warmup, cfg.N, len(vs))
	order := cycleOrders(len(vs))
	warm := cfg.Warmup
	cycles := warm + cfg.N
	started, prev := time.Now(), ""
	for c := range cycles {
		if c == warm && warmedUp != nil {
			warmedUp() // what the warm-up recorded is not measured
		}
		for _, k := range order() {
			v := vs[k]
			d, err := v.run(ctx)
			if err != nil {
				return pr, fmt.Errorf("%s, %s: %w", path, v.name, err)
			}
			if c >= warm && pr.Dists[v.name].N() < cfg.N {
				pr.Dists[v.name].Add(d)
				pr.carry.add(v.name, prev, d)
			}
			prev = v.name
		}
		if err := ctx.Err(); err != nil {
			return pr, err
		}
		if done := c + 1; done%max(cycles/10, 1) == 0 && done < cycles {
			fmt.Fprintf(cfg.Progress, "%s: %d%% done, %s\n", path, 100*done/cycles, time.Since(started).Round(time.Second))
		}
	}
	return pr, nil
}
