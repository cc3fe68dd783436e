package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/localrun"
)

// Namespace is the idempotency namespace of the plain function (the
// orders example's default); NamespaceTransactional that of the
// transactional one. The demo reads the records back under them.
const (
	Namespace              = "orders"
	NamespaceTransactional = "orders-tx"
)

// namespaceOf returns the namespace of a mode's function.
func namespaceOf(m Mode) string {
	if m == ModeTransactional {
		return NamespaceTransactional
	}
	return Namespace
}

// maxReceiveCount is the source queue's redrive threshold: well above the
// library's default of 5 attempts, because deliveries that the library
// holds back (in progress) count as receives too. SQS's redrive is only the
// backstop; the library dead-letters with a reason first.
const maxReceiveCount = 10

// Options configure one run of the demo. DefaultOptions gives the values
// `make demo` uses.
type Options struct {
	// DynamoDBEndpoint and SQSEndpoint are the local services. Required:
	// the demo never talks to AWS itself.
	DynamoDBEndpoint string
	SQSEndpoint      string
	// Region is the services' region. Default us-east-1.
	Region string

	// Bootstrap is a prebuilt orders function. Empty: build
	// examples/orders for this machine into a temporary directory.
	Bootstrap string

	Workload Workload

	// Visibility is the source queue's visibility timeout, in whole
	// seconds. Short on purpose: the slow order outlives it.
	Visibility time.Duration
	// FunctionTimeout is the function's timeout; the library's lease, and
	// so how long a crashed attempt blocks its key, follows from it.
	FunctionTimeout time.Duration
	// BatchSize, BatchingWindow and MaxConcurrency configure the event
	// source mapping of the plain function; the transactional one, with
	// far fewer orders, runs one process.
	BatchSize      int
	BatchingWindow time.Duration
	MaxConcurrency int

	// WaitTimeout bounds each wait for the queue to drain (and for the
	// crash to happen). It is a deadline, not an expectation.
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

// DefaultOptions returns the options of `make demo`, endpoints excepted.
func DefaultOptions() Options {
	return Options{
		Region:          "us-east-1",
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

// resources are the tables and queues of one run: one source queue and
// one effects table per function; the idempotency table (under two
// namespaces) and the DLQ are shared.
type resources struct {
	idempotencyTable string
	effectsTables    map[Mode]string
	queueURLs        map[Mode]string
	dlqURL           string
}

// demo is one run.
type demo struct {
	opts  Options
	ddb   *dynamodb.Client
	sqs   *sqs.Client
	res   resources
	obs   *observer
	start time.Time
	phase atomic.Value // string

	outMu sync.Mutex

	sentMu   sync.Mutex
	msgOrder map[string]string // message ID -> order ID
	sent     int
}

// Run runs the demo and returns its summary. An error means the demo
// could not run (a service unreachable, a build failure, a deadline); a
// broken invariant is reported in Summary.Violations instead.
func Run(ctx context.Context, opts Options) (*Summary, error) {
	if opts.DynamoDBEndpoint == "" || opts.SQSEndpoint == "" {
		return nil, errors.New("both the DynamoDB and the SQS endpoint are required")
	}
	if opts.Region == "" {
		opts.Region = "us-east-1"
	}
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if opts.Visibility < time.Second || opts.Visibility%time.Second != 0 {
		return nil, fmt.Errorf("visibility timeout %s is not a whole number of seconds", opts.Visibility)
	}
	d := &demo{opts: opts, start: time.Now(), msgOrder: map[string]string{},
		res: resources{effectsTables: map[Mode]string{}, queueURLs: map[Mode]string{}}}
	d.phase.Store("setup")
	var notable []string
	for _, o := range opts.Workload.Orders {
		if o.Scenario != ScenarioPlain && o.Scenario != ScenarioDuplicate {
			notable = append(notable, o.ID)
		}
	}
	d.obs = newObserver(notable)

	// Static test credentials: whatever this shell holds, the demo and its
	// function only ever reach the local endpoints.
	cfg := aws.Config{
		Region:      opts.Region,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
	}
	d.ddb = dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(opts.DynamoDBEndpoint) }, dynamo.ChecksumsOnAWSOnly())
	d.sqs = sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(opts.SQSEndpoint) })

	bootstrap := opts.Bootstrap
	if bootstrap == "" {
		dir, err := os.MkdirTemp("", "lambdaidem-demo-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		d.printf("building examples/orders (go build -tags lambda.norpc) ...")
		t0 := time.Now()
		if bootstrap, err = buildBootstrap(ctx, dir); err != nil {
			return nil, err
		}
		d.printf("built %s in %.1fs", "bootstrap", time.Since(t0).Seconds())
	}

	if err := d.createResources(ctx); err != nil {
		return nil, errors.Join(err, d.deleteResources())
	}
	if !opts.Keep {
		defer func() {
			if err := d.deleteResources(); err != nil {
				d.printf("cleanup: %v", err)
			}
		}()
	}

	var runners []*localrun.Runner
	for _, m := range Modes {
		r, err := d.newRunner(bootstrap, m)
		if err != nil {
			return nil, errors.Join(err, stopAll(runners, time.Second))
		}
		if err := r.Start(ctx); err != nil {
			return nil, errors.Join(err, stopAll(runners, time.Second))
		}
		runners = append(runners, r)
	}
	d.printf("plain function: %d concurrent processes; transactional function: 1; batches of %d, window %s, timeout %s, queue visibility %s",
		opts.MaxConcurrency, opts.BatchSize, opts.BatchingWindow, opts.FunctionTimeout, opts.Visibility)

	stopProgress := d.progress()
	runErr := d.drive(ctx)
	// Stop waits for invocations in flight, so that nothing writes an
	// effect after the tables are read; a function timeout bounds each.
	// After an interrupt nobody reads them: kill what still runs.
	stopWait := opts.FunctionTimeout + 10*time.Second
	if ctx.Err() != nil {
		stopWait = time.Second
	}
	stopErr := stopAll(runners, stopWait)
	stopProgress()
	if runErr != nil {
		return nil, runErr // stopErr is only the consequence
	}
	if stopErr != nil {
		return nil, fmt.Errorf("stop the runner: %w", stopErr)
	}

	d.setPhase("summary")
	var stats localrun.Stats
	for _, r := range runners {
		st := r.Stats()
		stats.Records += st.Records
		stats.Batches += st.Batches
		stats.Crashes += st.Crashes
		stats.Timeouts += st.Timeouts
	}
	return d.summarize(ctx, stats)
}

// newRunner runs the orders bootstrap for one effect mode on its queue.
func (d *demo) newRunner(bootstrap string, m Mode) (*localrun.Runner, error) {
	opts := d.opts
	conc, name := opts.MaxConcurrency, "orders"
	if m == ModeTransactional {
		conc, name = 1, "orders-tx"
	}
	return localrun.New(localrun.Config{
		Bootstrap:               bootstrap,
		QueueURL:                d.res.queueURLs[m],
		SQS:                     countingSQS{SQSAPI: d.sqs, o: d.obs},
		BatchSize:               opts.BatchSize,
		BatchingWindow:          opts.BatchingWindow,
		MaxConcurrency:          conc,
		ReportBatchItemFailures: true,
		FunctionTimeout:         opts.FunctionTimeout,
		FunctionName:            name,
		Region:                  opts.Region,
		PollWait:                2 * time.Second,
		Env: []string{
			"AWS_ACCESS_KEY_ID=test",
			"AWS_SECRET_ACCESS_KEY=test",
			"AWS_ENDPOINT_URL_DYNAMODB=" + opts.DynamoDBEndpoint,
			"AWS_ENDPOINT_URL_SQS=" + opts.SQSEndpoint,
			"IDEMPOTENCY_TABLE=" + d.res.idempotencyTable,
			"EFFECTS_TABLE=" + d.res.effectsTables[m],
			"IDEMPOTENCY_NAMESPACE=" + namespaceOf(m),
			"DLQ_URL=" + d.res.dlqURL,
			"EFFECT_MODE=" + string(m),
			// The demo counts outcomes from the library's one line per
			// record; "processed" and "duplicate" are logged at debug.
			// The function's EMF metric lines share the output; the
			// observer skips them.
			"AWS_LAMBDA_LOG_FORMAT=JSON",
			"AWS_LAMBDA_LOG_LEVEL=DEBUG",
		},
		Output:    &localrun.LineWriter{Line: d.obs.line, Forward: opts.FunctionLog},
		OnInvoke:  d.obs.onInvoke,
		OnProcess: d.obs.onProcess,
	})
}

// stopAll stops the runners, waiting up to wait for invocations in flight.
func stopAll(runners []*localrun.Runner, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var errs []error
	for _, r := range runners {
		errs = append(errs, r.Stop(ctx))
	}
	return errors.Join(errs...)
}

// drive sends the workload in three phases and waits for each to settle.
func (d *demo) drive(ctx context.Context) error {
	w := d.opts.Workload

	// The crashes go first, each alone on its function: a process exit
	// takes down every record of its batch, and in plain mode a batch mate
	// that had already written its effect but not recorded completion
	// would run again. That is the crash-after-effect case, which only
	// transactional completion prevents: the plain function crashes before
	// the effect, the transactional one after it.
	crash := append(w.ordersOf(ScenarioCrash), w.ordersOf(ScenarioCrashAfter)...)
	if len(crash) > 0 {
		d.announce("crash", "phase 1: the plain function exits before the effect (%d order), the transactional one after the effect and before completion (%d order)",
			len(w.ordersOf(ScenarioCrash)), len(w.ordersOf(ScenarioCrashAfter)))
		ids, err := d.send(ctx, crash, func(o Order) int { return o.Copies })
		if err != nil {
			return err
		}
		err = d.waitFor(ctx, "the crash", func(context.Context) (bool, error) {
			for _, id := range ids {
				if !d.obs.crashed(id) {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			return err
		}
	}

	var rest []Order
	for _, o := range w.Orders {
		if o.Scenario != ScenarioCrash && o.Scenario != ScenarioCrashAfter {
			rest = append(rest, o)
		}
	}
	d.announce("main", "phase 2: %d orders, producer duplicates sent back to back, a slow, a poison and a flaky order (plain); duplicates (transactional)", len(rest))
	if _, err := d.send(ctx, rest, func(o Order) int { return o.Copies }); err != nil {
		return err
	}
	if err := d.waitDrained(ctx); err != nil {
		return err
	}

	late := 0
	for _, o := range w.Orders {
		late += o.LateCopies
	}
	if late > 0 {
		d.announce("late", "phase 3: %d late producer retries of orders already done", late)
		if _, err := d.send(ctx, w.Orders, func(o Order) int { return o.LateCopies }); err != nil {
			return err
		}
		if err := d.waitDrained(ctx); err != nil {
			return err
		}
	}
	return nil
}

// send sends copies(o) messages per order to its function's queue, in
// order, ten per request, and returns their message IDs.
func (d *demo) send(ctx context.Context, orders []Order, copies func(Order) int) ([]string, error) {
	var ids []string
	for _, m := range Modes {
		var mine []Order
		for _, o := range orders {
			if o.Mode == m {
				mine = append(mine, o)
			}
		}
		got, err := d.sendTo(ctx, d.res.queueURLs[m], mine, copies)
		if err != nil {
			return nil, err
		}
		ids = append(ids, got...)
	}
	return ids, nil
}

func (d *demo) sendTo(ctx context.Context, queueURL string, orders []Order, copies func(Order) int) ([]string, error) {
	var bodies, owners []string
	for _, o := range orders {
		for range copies(o) {
			bodies = append(bodies, o.Body())
			owners = append(owners, o.ID)
		}
	}
	var ids []string
	for start := 0; start < len(bodies); start += 10 {
		end := min(start+10, len(bodies))
		entries := make([]types.SendMessageBatchRequestEntry, 0, end-start)
		for i := start; i < end; i++ {
			entries = append(entries, types.SendMessageBatchRequestEntry{
				Id:          aws.String(strconv.Itoa(i - start)),
				MessageBody: aws.String(bodies[i]),
			})
		}
		out, err := d.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
		if err != nil {
			return nil, fmt.Errorf("send orders: %w", err)
		}
		if len(out.Failed) > 0 {
			f := out.Failed[0]
			return nil, fmt.Errorf("send orders: %d of %d refused: %s: %s", len(out.Failed), len(entries), aws.ToString(f.Code), aws.ToString(f.Message))
		}
		d.sentMu.Lock()
		for _, s := range out.Successful {
			i, err := strconv.Atoi(aws.ToString(s.Id))
			if err != nil || i < 0 || i >= len(entries) {
				d.sentMu.Unlock()
				return nil, fmt.Errorf("send orders: unexpected entry ID %q", aws.ToString(s.Id))
			}
			id := aws.ToString(s.MessageId)
			d.msgOrder[id] = owners[start+i]
			ids = append(ids, id)
			d.sent++
		}
		d.sentMu.Unlock()
	}
	return ids, nil
}

// waitDrained waits until the source queues hold no message (visible,
// in flight or delayed) and no invocation holds a record.
func (d *demo) waitDrained(ctx context.Context) error {
	return d.waitFor(ctx, "the queue to drain", func(ctx context.Context) (bool, error) {
		if d.obs.inFlight() > 0 {
			return false, nil
		}
		n, err := d.queueDepth(ctx)
		return err == nil && n == 0 && d.obs.inFlight() == 0, err
	})
}

// waitFor polls cond, an external condition, until it holds or
// WaitTimeout passes; the observer's nudges make it check early.
func (d *demo) waitFor(ctx context.Context, what string, cond func(context.Context) (bool, error)) error {
	deadline := time.NewTimer(d.opts.WaitTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := cond(ctx)
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, context.Cause(ctx))
		case <-deadline.C:
			return fmt.Errorf("waiting for %s: not within %s", what, d.opts.WaitTimeout)
		case <-d.obs.changed:
		case <-tick.C:
		}
	}
}

// queueDepth is the number of messages in the source queues, visible or
// not.
func (d *demo) queueDepth(ctx context.Context) (int, error) {
	total := 0
	for _, m := range Modes {
		n, err := d.oneQueueDepth(ctx, d.res.queueURLs[m])
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

func (d *demo) oneQueueDepth(ctx context.Context, url string) (int, error) {
	return localrun.QueueDepth(ctx, d.sqs, url)
}

// progress prints a line every Progress interval, and the notable events
// gathered in between, until the returned function is called.
func (d *demo) progress() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	if d.opts.Progress <= 0 {
		return func() {}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(d.opts.Progress)
		defer t.Stop()
		for {
			select {
			case <-done:
				d.flushEvents()
				return
			case <-t.C:
				d.flushEvents()
				d.printProgress()
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

func (d *demo) flushEvents() {
	for _, ev := range d.obs.takeEvents() {
		d.printAt(ev.at, "  %s", ev.text)
	}
}

func (d *demo) printProgress() {
	outcomes, _, _, _ := d.obs.snapshot()
	d.sentMu.Lock()
	sent := d.sent
	d.sentMu.Unlock()
	d.printf("%-5s sent %d  received %d  in flight %d  | processed %d  duplicates %d  held back %d  failed %d  dead-lettered %d",
		d.phase.Load().(string), sent, d.obs.received.Load(), d.obs.inFlight(),
		outcomes["processed"], outcomes["duplicate"]+outcomes["duplicate_cached"], outcomes["in_progress"],
		outcomes["failed"], outcomes["dead_lettered"])
}

func (d *demo) setPhase(p string) { d.phase.Store(p) }

// printf writes one line prefixed with the time since the start.
func (d *demo) printf(format string, args ...any) { d.printAt(time.Now(), format, args...) }

// announce starts a phase: the events that led up to it come first.
func (d *demo) announce(phase, format string, args ...any) {
	d.flushEvents()
	d.setPhase(phase)
	d.printf(format, args...)
}

// printAt writes one line prefixed with at's time since the start.
func (d *demo) printAt(at time.Time, format string, args ...any) {
	d.outMu.Lock()
	defer d.outMu.Unlock()
	fmt.Fprintf(d.opts.Out, "[%5.1fs] %s\n", at.Sub(d.start).Seconds(), fmt.Sprintf(format, args...))
}

// buildBootstrap builds examples/orders for this machine, as the
// provided.al2023 runtime expects it apart from the OS: without the RPC
// transport (lambda.norpc), named bootstrap.
func buildBootstrap(ctx context.Context, dir string) (string, error) {
	return localrun.Build(ctx, "./examples/orders", dir)
}

// createResources creates this run's tables and queues under unique
// names, so the demo can share services with tests and other runs.
func (d *demo) createResources(ctx context.Context) error {
	var b [4]byte
	_, _ = rand.Read(b[:])
	prefix := "lambdaidem-demo-" + hex.EncodeToString(b[:])
	d.res.idempotencyTable = prefix + "-idempotency"
	d.printf("creating tables %s-{idempotency,effects,tx-effects} and queues %s{,-tx,-dlq}", prefix, prefix)

	// TTL off: DynamoDB Local would delete expired items within seconds;
	// the library enforces expiry itself and the demo's records never
	// expire during a run anyway.
	if err := dynamo.CreateTable(ctx, d.ddb, d.res.idempotencyTable, dynamo.TableOptions{NoTTL: true}); err != nil {
		return fmt.Errorf("create idempotency table: %w", err)
	}
	for _, m := range Modes {
		name := prefix + "-effects"
		if m == ModeTransactional {
			name = prefix + "-tx-effects"
		}
		d.res.effectsTables[m] = name
		_, err := d.ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName:            aws.String(name),
			BillingMode:          dbtypes.BillingModePayPerRequest,
			AttributeDefinitions: []dbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: dbtypes.ScalarAttributeTypeS}},
			KeySchema:            []dbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: dbtypes.KeyTypeHash}},
		})
		if err != nil {
			return fmt.Errorf("create effects table: %w", err)
		}
		err = dynamodb.NewTableExistsWaiter(d.ddb).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, d.opts.WaitTimeout)
		if err != nil {
			return fmt.Errorf("effects table: %w", err)
		}
	}

	dlq, err := d.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(prefix + "-dlq")})
	if err != nil {
		return fmt.Errorf("create DLQ: %w", err)
	}
	d.res.dlqURL = aws.ToString(dlq.QueueUrl)
	attrs, err := d.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       dlq.QueueUrl,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return fmt.Errorf("DLQ ARN: %w", err)
	}
	redrive := fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"%d"}`,
		attrs.Attributes[string(types.QueueAttributeNameQueueArn)], maxReceiveCount)
	for _, m := range Modes {
		name := prefix
		if m == ModeTransactional {
			name = prefix + "-tx"
		}
		q, err := d.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{
			QueueName: aws.String(name),
			Attributes: map[string]string{
				string(types.QueueAttributeNameVisibilityTimeout): strconv.Itoa(int(d.opts.Visibility / time.Second)),
				string(types.QueueAttributeNameRedrivePolicy):     redrive,
			},
		})
		if err != nil {
			return fmt.Errorf("create queue: %w", err)
		}
		d.res.queueURLs[m] = aws.ToString(q.QueueUrl)
	}
	return nil
}

// deleteResources deletes what createResources made, as far as it got.
func (d *demo) deleteResources() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for _, t := range []string{d.res.idempotencyTable, d.res.effectsTables[ModePlain], d.res.effectsTables[ModeTransactional]} {
		if t == "" {
			continue
		}
		_, err := d.ddb.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(t)})
		var nf *dbtypes.ResourceNotFoundException
		if err != nil && !errors.As(err, &nf) {
			errs = append(errs, fmt.Errorf("delete table %s: %w", t, err))
		}
	}
	for _, u := range []string{d.res.queueURLs[ModePlain], d.res.queueURLs[ModeTransactional], d.res.dlqURL} {
		if u == "" {
			continue
		}
		if _, err := d.sqs.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(u)}); err != nil {
			errs = append(errs, fmt.Errorf("delete queue %s: %w", u, err))
		}
	}
	return errors.Join(errs...)
}
