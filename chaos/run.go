package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
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
func Run(ctx context.Context, cfg Config) (Report, error) {
	cfg.applyDefaults()
	if err := cfg.validate(); err != nil {
		return Report{}, err
	}
	r := &run{cfg: cfg, obs: newObserver(), plan: &faultPlan{seed: cfg.Seed, rate: cfg.FaultRate}}
	r.workload = NewWorkload(cfg)
	start := time.Now()

	awsCfg := aws.Config{
		Region:      cfg.Region,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
	}
	// The harness talks to DynamoDB directly: faults are for the function.
	r.ddb = dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(cfg.DynamoDBEndpoint)
	}, dynamo.ChecksumsOnAWSOnly())
	r.sqs = sqs.NewFromConfig(awsCfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(cfg.SQSEndpoint) })

	bootstrap := cfg.Bootstrap
	if bootstrap == "" {
		dir, err := os.MkdirTemp("", "lambdaidem-chaos-")
		if err != nil {
			return Report{}, err
		}
		defer os.RemoveAll(dir)
		if bootstrap, err = BuildFunction(ctx, dir); err != nil {
			return Report{}, err
		}
	}

	if err := r.createResources(ctx); err != nil {
		return Report{}, errors.Join(err, r.deleteResources())
	}
	if !cfg.Keep {
		defer func() { _ = r.deleteResources() }()
	}

	proxy, err := faultproxy.New(cfg.DynamoDBEndpoint)
	if err != nil {
		return Report{}, err
	}
	defer proxy.Close()
	r.plan.install(proxy)
	var storeEnv []string
	var resp *faultproxy.RESP
	if cfg.Store == StoreRedis {
		if resp, err = faultproxy.NewRESP(cfg.RedisAddr); err != nil {
			return Report{}, err
		}
		defer resp.Close()
		r.plan.installRESP(resp)
		storeEnv = []string{"CHAOS_STORE=redis", "REDIS_ADDR=" + resp.Addr(), "REDIS_PREFIX=" + r.redisPrefix}
	}

	runners := make([]*localrun.Runner, cfg.Pollers)
	for i := range runners {
		runners[i], err = localrun.New(localrun.Config{
			Bootstrap:               bootstrap,
			QueueURL:                r.queueURL,
			SQS:                     countingSQS{SQSAPI: r.sqs, o: r.obs},
			BatchSize:               cfg.BatchSize,
			MaxConcurrency:          cfg.Concurrency,
			ReportBatchItemFailures: true,
			FunctionTimeout:         cfg.FunctionTimeout,
			FunctionName:            fmt.Sprintf("chaos-%d", i),
			Region:                  cfg.Region,
			PollWait:                time.Second,
			Env: append([]string{
				"AWS_ACCESS_KEY_ID=test",
				"AWS_SECRET_ACCESS_KEY=test",
				"AWS_ENDPOINT_URL_DYNAMODB=" + proxy.URL(),
				"AWS_ENDPOINT_URL_SQS=" + cfg.SQSEndpoint,
				"IDEMPOTENCY_TABLE=" + r.idemTable,
				"EFFECTS_TABLE=" + r.effectsTable,
				"DLQ_URL=" + r.dlqURL,
				"CHAOS_MODE=" + string(cfg.Mode),
				"CHAOS_NAMESPACE=" + Namespace,
				"MAX_ATTEMPTS=" + strconv.Itoa(cfg.MaxAttempts),
				"AWS_LAMBDA_LOG_FORMAT=JSON",
				// "processed" is logged at debug; the run needs it to tell
				// recorded completions from unrecorded ones.
				"AWS_LAMBDA_LOG_LEVEL=DEBUG",
			}, storeEnv...),
			Output:    &localrun.LineWriter{Line: r.obs.line, Forward: cfg.FunctionLog},
			OnInvoke:  r.obs.onInvoke,
			OnProcess: r.obs.onProcess,
		})
		if err != nil {
			return Report{}, err
		}
	}
	var started []*localrun.Runner
	stopAll := func(wait time.Duration) error {
		sctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		var errs []error
		for _, rn := range started {
			if err := rn.Stop(sctx); err != nil {
				errs = append(errs, err)
			}
		}
		started = nil
		return errors.Join(errs...)
	}
	for _, rn := range runners {
		if err := rn.Start(ctx); err != nil {
			return Report{}, errors.Join(err, stopAll(time.Second))
		}
		started = append(started, rn)
	}
	r.progressf("mode %s, seed %d: %d messages in %d sends to %d pollers × %d processes",
		cfg.Mode, cfg.Seed, cfg.Messages, r.workload.Sends(), cfg.Pollers, cfg.Concurrency)

	stopProgress := r.progress()
	driveErr := r.send(ctx)
	if driveErr == nil {
		driveErr = r.waitDrained(ctx)
	}
	// Stop waits for invocations in flight, so no effect is written after
	// the tables are read; after an interrupt, kill what still runs.
	stopWait := cfg.FunctionTimeout + 10*time.Second
	if ctx.Err() != nil {
		stopWait = time.Second
	}
	stopErr := stopAll(stopWait)
	stopProgress()
	drained := time.Since(start)
	_ = proxy.Close()
	if driveErr != nil {
		return Report{}, driveErr
	}
	if stopErr != nil {
		return Report{}, fmt.Errorf("stop the runners: %w", stopErr)
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
	for _, rn := range runners {
		st := rn.Stats()
		rep.Deliveries += int(st.Records)
	}
	if len(rep.Violations) > 0 {
		return rep, fmt.Errorf("%w: %s", ErrInvariant, strings.Join(rep.Violations, "; "))
	}
	return rep, nil
}

// run is the state of one Run.
type run struct {
	cfg      Config
	workload Workload
	obs      *observer
	plan     *faultPlan
	ddb      *dynamodb.Client
	sqs      *sqs.Client

	idemTable, effectsTable string
	queueURL, dlqURL        string
	redisPrefix             string // the Redis store's key prefix

	sentMu sync.Mutex
	sent   int
}

// send sends the workload in order, ten per request, keeping at most
// Backlog messages sent and not yet deleted. It gives up when no message
// has been deleted for DrainTimeout (a stall, not a slow run: a run of
// 10,000 messages per mode sends for far longer than that).
func (r *run) send(ctx context.Context) error {
	order := r.workload.Order
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastDeleted, progressAt := r.obs.deleted.Load(), time.Now()
	for start := 0; start < len(order); start += 10 {
		chunk := order[start:min(start+10, len(order))]
		for {
			deleted := r.obs.deleted.Load()
			if int64(start+len(chunk))-deleted <= int64(r.cfg.Backlog) {
				break
			}
			if deleted != lastDeleted {
				lastDeleted, progressAt = deleted, time.Now()
			} else if time.Since(progressAt) > r.cfg.DrainTimeout {
				return fmt.Errorf("sending: no message deleted for %s with %d sent and not deleted (seed %d)",
					r.cfg.DrainTimeout, int64(start)-deleted, r.cfg.Seed)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("sending: %w", context.Cause(ctx))
			case <-tick.C:
			}
		}
		if err := r.sendChunk(ctx, chunk); err != nil {
			return err
		}
	}
	return nil
}

func (r *run) sendChunk(ctx context.Context, msgs []int) error {
	entries := make([]types.SendMessageBatchRequestEntry, len(msgs))
	for i, m := range msgs {
		entries[i] = types.SendMessageBatchRequestEntry{
			Id:          aws.String(strconv.Itoa(i)),
			MessageBody: aws.String(r.workload.Messages[m].Body()),
		}
	}
	out, err := r.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(r.queueURL), Entries: entries})
	if err != nil {
		return fmt.Errorf("send: %w", err)
	}
	if len(out.Failed) > 0 {
		f := out.Failed[0]
		return fmt.Errorf("send: %d of %d refused: %s: %s", len(out.Failed), len(entries), aws.ToString(f.Code), aws.ToString(f.Message))
	}
	r.sentMu.Lock()
	r.sent += len(out.Successful)
	r.sentMu.Unlock()
	return nil
}

// waitDrained waits until the source queue holds no message (visible, in
// flight or delayed) and no invocation holds a record, or the deadline.
func (r *run) waitDrained(ctx context.Context) error {
	deadline := time.NewTimer(r.cfg.DrainTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		if r.obs.inFlight() == 0 {
			n, err := r.queueDepth(ctx)
			if err != nil {
				return err
			}
			if n == 0 && r.obs.inFlight() == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the queue to drain: %w", context.Cause(ctx))
		case <-deadline.C:
			n, _ := r.queueDepth(ctx)
			return fmt.Errorf("waiting for the queue to drain: %d messages left and %d in flight after %s (seed %d)",
				n, r.obs.inFlight(), r.cfg.DrainTimeout, r.cfg.Seed)
		case <-r.obs.changed:
		case <-tick.C:
		}
	}
}

// progress prints a line every ProgressEvery until the returned function
// is called.
func (r *run) progress() (stop func()) {
	if r.cfg.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(r.cfg.ProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			r.sentMu.Lock()
			sent := r.sent
			r.sentMu.Unlock()
			r.obs.mu.Lock()
			processed, inProgress, restarts := r.obs.outcomes["processed"], r.obs.outcomes["in_progress"], r.obs.restarts
			r.obs.mu.Unlock()
			depth := "?"
			if n, err := r.queueDepth(context.Background()); err == nil {
				depth = strconv.Itoa(n)
			}
			r.progressf("mode %s: sent %d/%d, deleted %d, queue %s, in flight %d | processed %d, held back %d, process restarts %d",
				r.cfg.Mode, sent, r.workload.Sends(), r.obs.deleted.Load(), depth, r.obs.inFlight(), processed, inProgress, restarts)
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

func (r *run) progressf(format string, args ...any) {
	if r.cfg.Progress != nil {
		fmt.Fprintf(r.cfg.Progress, "chaos: "+format+"\n", args...)
	}
}

// queueDepth is the number of messages in the source queue, visible or not.
func (r *run) queueDepth(ctx context.Context) (int, error) {
	return localrun.QueueDepth(ctx, r.sqs, r.queueURL)
}

// createResources creates this run's tables and queues under unique names.
func (r *run) createResources(ctx context.Context) error {
	var b [4]byte
	_, _ = rand.Read(b[:])
	prefix := "lambdaidem-chaos-" + string(r.cfg.Mode) + "-" + hex.EncodeToString(b[:])
	r.redisPrefix = prefix
	r.idemTable = prefix + "-idempotency"
	if err := dynamo.CreateTable(ctx, r.ddb, r.idemTable, dynamo.TableOptions{NoTTL: true}); err != nil {
		r.idemTable = ""
		return fmt.Errorf("create idempotency table: %w", err)
	}
	r.effectsTable = prefix + "-effects"
	_, err := r.ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(r.effectsTable),
		BillingMode:          dbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []dbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: dbtypes.ScalarAttributeTypeS}},
		KeySchema:            []dbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: dbtypes.KeyTypeHash}},
	})
	if err != nil {
		r.effectsTable = ""
		return fmt.Errorf("create effects table: %w", err)
	}
	err = dynamodb.NewTableExistsWaiter(r.ddb).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(r.effectsTable)}, time.Minute)
	if err != nil {
		return fmt.Errorf("effects table: %w", err)
	}
	dlq, err := r.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(prefix + "-dlq")})
	if err != nil {
		return fmt.Errorf("create DLQ: %w", err)
	}
	r.dlqURL = aws.ToString(dlq.QueueUrl)
	attrs, err := r.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       dlq.QueueUrl,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return fmt.Errorf("DLQ ARN: %w", err)
	}
	redrive := fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"%d"}`,
		attrs.Attributes[string(types.QueueAttributeNameQueueArn)], backstopReceives)
	q, err := r.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName: aws.String(prefix),
		Attributes: map[string]string{
			string(types.QueueAttributeNameVisibilityTimeout): strconv.Itoa(int(r.cfg.Visibility / time.Second)),
			string(types.QueueAttributeNameRedrivePolicy):     redrive,
		},
	})
	if err != nil {
		return fmt.Errorf("create queue: %w", err)
	}
	r.queueURL = aws.ToString(q.QueueUrl)
	return nil
}

// deleteResources deletes what createResources made, as far as it got.
func (r *run) deleteResources() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for _, t := range []string{r.idemTable, r.effectsTable} {
		if t == "" {
			continue
		}
		_, err := r.ddb.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(t)})
		var nf *dbtypes.ResourceNotFoundException
		if err != nil && !errors.As(err, &nf) {
			errs = append(errs, fmt.Errorf("delete table %s: %w", t, err))
		}
	}
	if r.cfg.Store == StoreRedis && r.redisPrefix != "" {
		// The run's keys, by their prefix: a harness's clean-up on a test
		// server, not something the store ever does.
		client := redis.NewClient(&redis.Options{Addr: r.cfg.RedisAddr})
		iter := client.Scan(ctx, 0, r.redisPrefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			client.Del(ctx, iter.Val())
		}
		if err := iter.Err(); err != nil {
			errs = append(errs, fmt.Errorf("delete redis keys %s:*: %w", r.redisPrefix, err))
		}
		_ = client.Close()
	}
	for _, u := range []string{r.queueURL, r.dlqURL} {
		if u == "" {
			continue
		}
		if _, err := r.sqs.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(u)}); err != nil {
			errs = append(errs, fmt.Errorf("delete queue %s: %w", u, err))
		}
	}
	return errors.Join(errs...)
}

// BuildFunction builds the chaos function (FunctionPackage) for this
// machine into dir, as a provided.al2023 bootstrap is built apart from the
// OS (static, without the RPC transport), and returns the binary's path.
// It needs the go command and this module's source.
func BuildFunction(ctx context.Context, dir string) (string, error) {
	return localrun.Build(ctx, FunctionPackage, dir)
}
