package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/localrun"
)

// E2EConfig configures RunE2E.
type E2EConfig struct {
	// DynamoDBEndpoint and SQSEndpoint are the local services. Required.
	DynamoDBEndpoint string
	SQSEndpoint      string
	// Region is the services' region. Default us-east-1.
	Region string
	// Messages is how many orders go through. Default 10,000.
	Messages int
	// Bootstrap is a prebuilt examples/orders binary. Empty: build it
	// (go build -tags lambda.norpc) into a temporary directory.
	Bootstrap string
	// BatchSize and MaxConcurrency configure the event source mapping.
	// Defaults 10 and 4.
	BatchSize      int
	MaxConcurrency int
	// Timeout bounds the whole run after the queue is filled. Default 10
	// minutes.
	Timeout time.Duration
	// Progress receives one line per phase. Default: discarded.
	Progress io.Writer
}

// E2EResult is the outcome of RunE2E.
type E2EResult struct {
	Messages       int
	BatchSize      int
	MaxConcurrency int
	// Send is how long sending took; it overlaps Elapsed.
	Send time.Duration
	// Elapsed runs from the first send to the end of the invocation that
	// deleted the last message.
	Elapsed time.Duration
	// Invocations are the batches handled; Latency their durations.
	Invocations int
	Latency     Dist
	// Effects is the number of effect rows written: one per message when
	// nothing was done twice.
	Effects int
	Stats   localrun.Stats
}

// Busy is the share of the elapsed time the function's slots spent in
// invocations: well below 1, the rate is bound by the queue (the SQS
// emulator), not by the function.
func (r *E2EResult) Busy() float64 {
	var sum time.Duration
	for _, d := range r.Latency.Samples {
		sum += d
	}
	if r.Elapsed <= 0 || r.MaxConcurrency == 0 {
		return 0
	}
	return float64(sum) / float64(r.Elapsed*time.Duration(r.MaxConcurrency))
}

// Rate is messages per second.
func (r *E2EResult) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Messages) / r.Elapsed.Seconds()
}

// Write writes the end-to-end table as Markdown.
func (r *E2EResult) Write(w io.Writer) {
	fmt.Fprintf(w, "| messages | batch size | max concurrency | invocations | elapsed s | messages / s | invocation p50 ms | p99 ms | slots busy | effect rows |\n")
	fmt.Fprintf(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	fmt.Fprintf(w, "| %d | %d | %d | %d | %.1f | %.0f | %s | %s | %.0f%% | %d |\n",
		r.Messages, r.BatchSize, r.MaxConcurrency, r.Invocations, r.Elapsed.Seconds(), r.Rate(),
		ms(r.Latency.P50()), ms(r.Latency.P99()), 100*r.Busy(), r.Effects)
}

// BuildOrders builds examples/orders for this machine into dir, as the
// provided.al2023 runtime runs it apart from the OS (without the RPC
// transport), and returns the binary's path. It must run inside the
// module.
func BuildOrders(ctx context.Context, dir string) (string, error) {
	return localrun.Build(ctx, "./examples/orders", dir)
}

// RunE2E starts the orders example's real bootstrap under localrun on a
// fresh queue, sends Messages orders to it, and measures messages per
// second from the first send until every message is deleted; then it
// checks that every order has exactly one effect row. It creates its
// own tables and queue and deletes them.
func RunE2E(ctx context.Context, cfg E2EConfig) (*E2EResult, error) {
	if cfg.DynamoDBEndpoint == "" || cfg.SQSEndpoint == "" {
		return nil, errors.New("bench: both the DynamoDB and the SQS endpoint are required")
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.Messages <= 0 {
		cfg.Messages = 10000
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 10
	}
	if cfg.MaxConcurrency <= 0 {
		cfg.MaxConcurrency = 4
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Minute
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	bootstrap, cleanup, err := ordersBootstrap(ctx, cfg.Bootstrap, cfg.Progress)
	if err != nil {
		return nil, err
	}
	defer cleanup()

	awsCfg := ClientConfig(cfg.Region)
	ddb := NewClient(cfg.DynamoDBEndpoint, cfg.Region, 10)
	q := sqs.NewFromConfig(awsCfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(cfg.SQSEndpoint) })

	prefix := uniqueName("lambdaidem-bench-e2e")
	idemTable, effectsTable := prefix+"-idempotency", prefix+"-effects"
	fmt.Fprintf(cfg.Progress, "creating tables %s-{idempotency,effects} and queue %s\n", prefix, prefix)
	if err := dynamo.CreateTable(ctx, ddb, idemTable, dynamo.TableOptions{NoTTL: true, PollInterval: 50 * time.Millisecond}); err != nil {
		return nil, err
	}
	defer func() { _ = deleteTable(ddb, idemTable) }()
	_, err = ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(effectsTable),
		BillingMode:          dbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []dbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: dbtypes.ScalarAttributeTypeS}},
		KeySchema:            []dbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: dbtypes.KeyTypeHash}},
	})
	if err != nil {
		return nil, fmt.Errorf("bench: create effects table: %w", err)
	}
	defer func() { _ = deleteTable(ddb, effectsTable) }()
	// A visibility timeout well above any invocation: a redelivery here
	// would be a measurement artefact, not the library's work.
	qo, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName:  aws.String(prefix),
		Attributes: map[string]string{string(types.QueueAttributeNameVisibilityTimeout): "120"},
	})
	if err != nil {
		return nil, fmt.Errorf("bench: create queue: %w", err)
	}
	queueURL := aws.ToString(qo.QueueUrl)
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = q.DeleteQueue(dctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(queueURL)})
	}()

	res := &E2EResult{Messages: cfg.Messages, BatchSize: cfg.BatchSize, MaxConcurrency: cfg.MaxConcurrency}
	var (
		mu       sync.Mutex
		deleted  = map[string]bool{}
		last     time.Time
		drained  = make(chan struct{})
		fnErrors []string
	)
	onInvoke := func(inv localrun.Invocation) {
		mu.Lock()
		defer mu.Unlock()
		res.Invocations++
		res.Latency.Add(inv.Duration)
		if inv.Outcome != localrun.OutcomeSuccess && len(fnErrors) < 5 {
			fnErrors = append(fnErrors, fmt.Sprintf("%s: %v", inv.Outcome, inv.Err))
		}
		before := len(deleted)
		for _, id := range inv.Deleted {
			deleted[id] = true
		}
		if end := inv.Started.Add(inv.Duration); end.After(last) {
			last = end
		}
		if before < cfg.Messages && len(deleted) >= cfg.Messages {
			close(drained)
		}
	}
	runner, err := localrun.New(localrun.Config{
		Bootstrap:               bootstrap,
		QueueURL:                queueURL,
		SQS:                     q,
		BatchSize:               cfg.BatchSize,
		MaxConcurrency:          cfg.MaxConcurrency,
		ReportBatchItemFailures: true,
		FunctionTimeout:         30 * time.Second,
		FunctionName:            "orders",
		Region:                  cfg.Region,
		PollWait:                time.Second,
		Env: []string{
			"AWS_ACCESS_KEY_ID=test",
			"AWS_SECRET_ACCESS_KEY=test",
			"AWS_ENDPOINT_URL_DYNAMODB=" + cfg.DynamoDBEndpoint,
			"AWS_ENDPOINT_URL_SQS=" + cfg.SQSEndpoint,
			"IDEMPOTENCY_TABLE=" + idemTable,
			"EFFECTS_TABLE=" + effectsTable,
			"IDEMPOTENCY_NAMESPACE=orders",
			"AWS_LAMBDA_LOG_FORMAT=JSON",
		},
		OnInvoke: onInvoke,
	})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.Progress, "draining through the orders bootstrap under localrun: batches of %d, %d concurrent\n", cfg.BatchSize, cfg.MaxConcurrency)
	if err := runner.Start(ctx); err != nil {
		return nil, err
	}
	// The orders are sent while the function drains the queue, as a
	// producer would: a queue kept short keeps the SQS emulator fast (its
	// receive walks every stored message), and the clock starts with the
	// first send.
	fmt.Fprintf(cfg.Progress, "sending %d orders\n", cfg.Messages)
	sendStart := time.Now()
	sent := make(chan error, 1)
	go func() {
		err := fill(ctx, q, queueURL, cfg.Messages)
		res.Send = time.Since(sendStart)
		sent <- err
	}()
	wait := time.NewTimer(cfg.Timeout)
	defer wait.Stop()
	// A progress line every 10 seconds: this part runs for minutes.
	stopProgress := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stopProgress:
				return
			case <-tick.C:
				mu.Lock()
				n, inv := len(deleted), res.Invocations
				mu.Unlock()
				fmt.Fprintf(cfg.Progress, "end to end: %d of %d messages deleted in %d invocations, %s\n",
					n, cfg.Messages, inv, time.Since(sendStart).Round(time.Second))
			}
		}
	}()
	defer func() {
		close(stopProgress)
		<-progressDone
	}()
	var runErr error
	select {
	case <-drained:
	case err := <-sent:
		if err != nil {
			runErr = err
			break
		}
		select {
		case <-drained:
		case <-ctx.Done():
			runErr = context.Cause(ctx)
		case <-wait.C:
			mu.Lock()
			runErr = fmt.Errorf("bench: %d of %d messages deleted within %s; function errors: %v", len(deleted), cfg.Messages, cfg.Timeout, fnErrors)
			mu.Unlock()
		}
	case <-ctx.Done():
		runErr = context.Cause(ctx)
	case <-wait.C:
		mu.Lock()
		runErr = fmt.Errorf("bench: %d of %d messages deleted within %s; function errors: %v", len(deleted), cfg.Messages, cfg.Timeout, fnErrors)
		mu.Unlock()
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	stopErr := runner.Stop(stopCtx)
	cancel()
	if runErr != nil {
		return nil, runErr
	}
	if stopErr != nil {
		return nil, fmt.Errorf("bench: stop the runner: %w", stopErr)
	}
	res.Stats = runner.Stats()
	mu.Lock()
	res.Elapsed = last.Sub(sendStart)
	mu.Unlock()
	if res.Effects, err = countItems(ctx, ddb, effectsTable); err != nil {
		return nil, err
	}
	if res.Effects != cfg.Messages {
		return res, fmt.Errorf("bench: %d effect rows for %d orders", res.Effects, cfg.Messages)
	}
	return res, nil
}

// fill sends n distinct orders, ten per request, eight requests at once.
func fill(ctx context.Context, q *sqs.Client, queueURL string, n int) error {
	const senders = 8
	batches := make(chan int)
	errs := make(chan error, senders)
	var wg sync.WaitGroup
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for start := range batches {
				end := min(start+10, n)
				entries := make([]types.SendMessageBatchRequestEntry, 0, end-start)
				for i := start; i < end; i++ {
					entries = append(entries, types.SendMessageBatchRequestEntry{
						Id:          aws.String(strconv.Itoa(i - start)),
						MessageBody: aws.String(fmt.Sprintf(`{"order_id":"e-%d","amount":%d}`, i, i%100)),
					})
				}
				out, err := q.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
				if err == nil && len(out.Failed) > 0 {
					err = fmt.Errorf("%d entries refused: %s", len(out.Failed), aws.ToString(out.Failed[0].Message))
				}
				if err != nil {
					errs <- fmt.Errorf("bench: send orders: %w", err)
					return
				}
			}
		}()
	}
	var sendErr error
loop:
	for start := 0; start < n; start += 10 {
		select {
		case batches <- start:
		case sendErr = <-errs:
			break loop
		}
	}
	close(batches)
	wg.Wait()
	close(errs)
	if sendErr != nil {
		return sendErr
	}
	return <-errs
}

// countItems counts a table's items with a paginated COUNT scan.
func countItems(ctx context.Context, c *dynamodb.Client, table string) (int, error) {
	total := 0
	p := dynamodb.NewScanPaginator(c, &dynamodb.ScanInput{TableName: aws.String(table), Select: dbtypes.SelectCount, ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return 0, fmt.Errorf("bench: count %s: %w", table, err)
		}
		total += int(out.Count)
	}
	return total, nil
}
