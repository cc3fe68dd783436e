package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/localrun"
)

// Config configures a Harness.
type Config struct {
	// Stack is the local services. DynamoDB's endpoint is required, and
	// SQS's for anything that runs a function.
	Stack Stack
	// Name starts the names of the run's tables and queues; a random
	// suffix makes them unique, so runs can share the services.
	Name string
	// Log receives the progress lines. Default: none.
	Log *Log
	// FunctionLog, when set, receives every line the function processes
	// write.
	FunctionLog io.Writer
	// WaitTimeout is how long a wait (for a phase to end, for a stalled
	// send to move on) goes on while nothing moves: a bound on a stall,
	// not on a run, which may take as long as it keeps making progress.
	// Default 60s.
	WaitTimeout time.Duration
	// Keep leaves the tables and queues in place after the run.
	Keep bool
}

// Harness is one run on the local stack: its clients, its resources, its
// functions under localrun, and what it observed. Close releases it all.
type Harness struct {
	// Stack is the local services; DynamoDB and SQS are the harness's own
	// clients of them (test credentials, no faults).
	Stack    Stack
	DynamoDB *dynamodb.Client
	SQS      *sqs.Client
	// Prefix starts every table and queue name of the run.
	Prefix string
	// Log is Config.Log: the run's progress lines.
	Log *Log
	// Obs observes the functions' invocations and log lines.
	Obs *Observer
	// OnPhase, when set, is called as Play starts each phase, before the
	// phase's line: a driver prints what led up to it first.
	OnPhase func(Phase)

	cfg      Config
	closers  []func() error // undo what was made, last first
	funcs    []*started
	idem     string // the idempotency table
	dlqURL   string
	dlqARN   string
	running  bool
	phase    atomic.Value // string
	sentMsgs atomic.Int64
}

// started is a Function the harness runs, with its resources.
type started struct {
	fn       Function
	queueURL string
	effects  string
	runners  []*localrun.Runner
}

// New returns a harness for one run. It makes nothing yet.
func New(cfg Config) (*Harness, error) {
	cfg.Stack = cfg.Stack.withDefaults()
	if cfg.Stack.DynamoDBEndpoint == "" {
		return nil, errors.New("harness: the DynamoDB endpoint is required (local services only)")
	}
	if cfg.WaitTimeout <= 0 {
		cfg.WaitTimeout = 60 * time.Second
	}
	if cfg.Name == "" {
		cfg.Name = "lambdaidem-harness"
	}
	h := &Harness{
		Stack:    cfg.Stack,
		DynamoDB: cfg.Stack.DynamoDB(),
		SQS:      cfg.Stack.SQS(),
		Prefix:   UniqueName(cfg.Name),
		Log:      cfg.Log,
		Obs:      NewObserver(),
		cfg:      cfg,
	}
	h.phase.Store("setup")
	return h, nil
}

// Open is New, then Bootstrap: a harness for one run and the function
// binary it runs (given, or pkg built). On an error it closes what it made;
// otherwise the caller closes the harness.
func Open(ctx context.Context, cfg Config, pkg, given string) (*Harness, string, error) {
	h, err := New(cfg)
	if err != nil {
		return nil, "", err
	}
	bootstrap, err := h.Bootstrap(ctx, pkg, given)
	if err != nil {
		return nil, "", errors.Join(err, h.Close())
	}
	return h, bootstrap, nil
}

// UniqueName returns prefix followed by a dash and eight random hex digits.
func UniqueName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// Phase is the name of the phase the run is in ("setup" before the first).
func (h *Harness) Phase() string { return h.phase.Load().(string) }

// Sent is the number of messages sent so far.
func (h *Harness) Sent() int64 { return h.sentMsgs.Load() }

// OnClose adds a clean-up step of the driver's own (a Redis key prefix)
// for Close, which runs every step last added first, and runs it whatever
// Config.Keep says.
func (h *Harness) OnClose(f func() error) { h.closers = append(h.closers, f) }

// Close stops the functions if they still run, then deletes the run's
// tables and queues (unless Config.Keep) and removes what Bootstrap built.
func (h *Harness) Close() error {
	var errs []error
	if h.running {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		errs = append(errs, h.stopRunners(ctx))
		cancel()
	}
	for i := len(h.closers) - 1; i >= 0; i-- {
		errs = append(errs, h.closers[i]())
	}
	h.closers = nil
	return errors.Join(errs...)
}

// keep wraps the deletion of a resource: skipped under Config.Keep.
func (h *Harness) keep(f func(ctx context.Context) error) func() error {
	return func() error {
		if h.cfg.Keep {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return f(ctx)
	}
}

// OrdersPackage is the orders example, the demo's and the bench's
// function; OrdersKeyField the field of its body that holds the key.
const (
	OrdersPackage  = "./examples/orders"
	OrdersKeyField = "order_id"
)

// Bootstrap returns the function binary to run: given, when it names a
// prebuilt one, or pkg built for this machine as localrun.Build builds it,
// into a directory Close removes. The build is the one step that takes
// seconds (tens with an empty Go build cache): a line says so before it
// starts and another how long it took.
func (h *Harness) Bootstrap(ctx context.Context, pkg, given string) (string, error) {
	if given != "" {
		return given, nil
	}
	path, remove, err := Build(ctx, pkg, h.Log)
	h.OnClose(remove)
	return path, err
}

// Build builds pkg as Bootstrap does, for a driver that builds once for
// several harnesses: remove deletes the build's directory (call it even
// after an error).
func Build(ctx context.Context, pkg string, log *Log) (path string, remove func() error, err error) {
	dir, err := os.MkdirTemp("", "lambdaidem-bootstrap-")
	if err != nil {
		return "", func() error { return nil }, err
	}
	remove = func() error { return os.RemoveAll(dir) }
	log.Printf("building %s (go build -tags lambda.norpc) ...", strings.TrimPrefix(pkg, "./"))
	t0 := time.Now()
	if path, err = localrun.Build(ctx, pkg, dir); err != nil {
		return "", remove, err
	}
	log.Printf("built bootstrap in %.1fs", time.Since(t0).Seconds())
	return path, remove, nil
}

// IdempotencyTable creates the run's idempotency table (Prefix
// "-idempotency", the store's shape, TTL off: DynamoDB Local would delete
// expired items within seconds, and the library enforces expiry itself)
// the first time, and returns its name. Start calls it.
func (h *Harness) IdempotencyTable(ctx context.Context) (string, error) {
	if h.idem != "" {
		return h.idem, nil
	}
	name := h.Prefix + "-idempotency"
	if err := dynamo.CreateTable(ctx, h.DynamoDB, name, dynamo.TableOptions{NoTTL: true, PollInterval: 50 * time.Millisecond}); err != nil {
		return "", fmt.Errorf("create idempotency table: %w", err)
	}
	h.OnClose(h.keep(func(ctx context.Context) error { return h.deleteTable(ctx, name) }))
	h.idem = name
	return name, nil
}

// IdempotencyTableName is the run's idempotency table ("" before it is
// made).
func (h *Harness) IdempotencyTableName() string { return h.idem }

// Store is the DynamoDB store on the run's idempotency table, for reading
// records back.
func (h *Harness) Store() idemstore.Store { return dynamo.New(h.DynamoDB, h.idem) }

// KeyTable creates a table with one string partition key, on demand, and
// waits until it is active. Close deletes it.
func (h *Harness) KeyTable(ctx context.Context, name, key string) error {
	_, err := h.DynamoDB.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          dbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []dbtypes.AttributeDefinition{{AttributeName: aws.String(key), AttributeType: dbtypes.ScalarAttributeTypeS}},
		KeySchema:            []dbtypes.KeySchemaElement{{AttributeName: aws.String(key), KeyType: dbtypes.KeyTypeHash}},
	})
	if err != nil {
		return fmt.Errorf("create table %s: %w", name, err)
	}
	h.OnClose(h.keep(func(ctx context.Context) error { return h.deleteTable(ctx, name) }))
	err = dynamodb.NewTableExistsWaiter(h.DynamoDB).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Minute)
	if err != nil {
		return fmt.Errorf("table %s: %w", name, err)
	}
	return nil
}

func (h *Harness) deleteTable(ctx context.Context, name string) error {
	_, err := h.DynamoDB.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	var nf *dbtypes.ResourceNotFoundException
	if err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("delete table %s: %w", name, err)
	}
	return nil
}

// DLQ creates the run's dead-letter queue (Prefix "-dlq") the first time
// and returns its URL. Start calls it for a Function with MaxReceives.
func (h *Harness) DLQ(ctx context.Context) (string, error) {
	if h.dlqURL != "" {
		return h.dlqURL, nil
	}
	url, err := h.createQueue(ctx, h.Prefix+"-dlq", nil)
	if err != nil {
		return "", fmt.Errorf("create DLQ: %w", err)
	}
	attrs, err := h.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", fmt.Errorf("DLQ ARN: %w", err)
	}
	h.dlqURL, h.dlqARN = url, attrs.Attributes[string(types.QueueAttributeNameQueueArn)]
	return url, nil
}

func (h *Harness) createQueue(ctx context.Context, name string, attrs map[string]string) (string, error) {
	q, err := h.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		return "", err
	}
	url := aws.ToString(q.QueueUrl)
	h.OnClose(h.keep(func(ctx context.Context) error {
		if _, err := h.SQS.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)}); err != nil {
			return fmt.Errorf("delete queue %s: %w", url, err)
		}
		return nil
	}))
	return url, nil
}

// Function is one function of a scenario: the bootstrap's configuration,
// its queue and event source mapping, and its effects table.
type Function struct {
	// Name is the function's name (AWS_LAMBDA_FUNCTION_NAME). With several
	// Pollers, each mapping's function is Name-0, Name-1, ...
	Name string
	// Suffix names the function's resources: its queue is Prefix+Suffix,
	// its effects table Prefix+Suffix+"-effects". Empty for a scenario's
	// one function, or its first.
	Suffix string
	// KeyField is the field of the body that holds the key.
	KeyField string
	// Env are the function's own variables, after those the harness sets
	// (the stack's, IDEMPOTENCY_TABLE, EFFECTS_TABLE, DLQ_URL and the log
	// format): later entries win.
	Env []string
	// QueueURLs maps variables of the function's environment to the
	// Suffix of another function of the scenario, whose queue's URL they
	// get: a function that sends to the next one's queue.
	QueueURLs map[string]string
	// Effects asks for an effects table (one string key, pk), passed as
	// EFFECTS_TABLE: the function writes a row per effect, never
	// deduplicated, so the rows count the effects.
	Effects bool

	// FIFO makes the queue a FIFO queue (its name ends in ".fifo"): every
	// message needs a GroupID, and the producer gives each key its
	// deduplication ID, so SQS drops a copy sent within five minutes. A
	// FIFO queue's redrive needs a FIFO DLQ, which the harness does not
	// make: MaxReceives must be 0.
	FIFO bool
	// Visibility is the queue's visibility timeout, in whole seconds.
	// Default: the emulator's (30 s).
	Visibility time.Duration
	// MaxReceives, when set, is the queue's redrive threshold to the
	// run's DLQ, which the function also gets as DLQ_URL. It is a
	// backstop: the library dead-letters with a reason first.
	MaxReceives int

	// Pollers is the number of event source mappings polling the queue
	// at once. Default 1.
	Pollers int
	// BatchSize, BatchingWindow, MaxConcurrency, FunctionTimeout and
	// PollWait configure each mapping (localrun.Config); zero takes
	// localrun's defaults.
	BatchSize       int
	BatchingWindow  time.Duration
	MaxConcurrency  int
	FunctionTimeout time.Duration
	PollWait        time.Duration
	// Debug sets AWS_LAMBDA_LOG_LEVEL=DEBUG: the library's "processed"
	// and "duplicate" lines are logged at debug. Off, the function logs
	// what it would in production, which is what a measurement wants.
	Debug bool
}

func (f Function) queueName(prefix string) string {
	if f.FIFO {
		return prefix + f.Suffix + ".fifo"
	}
	return prefix + f.Suffix
}

func (f Function) effectsName(prefix string) string { return prefix + f.Suffix + "-effects" }

// Start creates the functions' resources — the idempotency table, the
// DLQ when one needs it, and each one's effects table and queue — and
// starts each function's event source mappings on bootstrap.
func (h *Harness) Start(ctx context.Context, bootstrap string, fns ...Function) error {
	if h.Stack.SQSEndpoint == "" {
		return errors.New("harness: the SQS endpoint is required (local services only)")
	}
	if h.running {
		return errors.New("harness: Start called twice")
	}
	tables, queues := []string{"idempotency"}, []string{}
	dlq := false
	for _, f := range fns {
		if f.Effects {
			tables = append(tables, strings.TrimPrefix(f.Suffix+"-effects", "-"))
		}
		queues = append(queues, f.queueName(""))
		dlq = dlq || f.MaxReceives > 0
		if f.FIFO && f.MaxReceives > 0 {
			return fmt.Errorf("harness: function %s: a FIFO queue's redrive needs a FIFO DLQ; set MaxReceives 0", f.Name)
		}
	}
	if dlq {
		queues = append(queues, "-dlq")
	}
	h.Log.Printf("creating tables %s-%s and queues %s%s", h.Prefix, braces(tables), h.Prefix, braces(queues))

	idem, err := h.IdempotencyTable(ctx)
	if err != nil {
		return err
	}
	if dlq {
		if _, err := h.DLQ(ctx); err != nil {
			return err
		}
	}
	queueURLs := map[string]string{} // by Suffix
	var all []*started
	for _, f := range fns {
		s := &started{fn: f}
		if f.Effects {
			s.effects = f.effectsName(h.Prefix)
			if err := h.KeyTable(ctx, s.effects, "pk"); err != nil {
				return fmt.Errorf("effects table: %w", err)
			}
		}
		attrs := map[string]string{}
		if f.FIFO {
			attrs[string(types.QueueAttributeNameFifoQueue)] = "true"
		}
		if f.Visibility > 0 {
			if f.Visibility < time.Second || f.Visibility%time.Second != 0 {
				return fmt.Errorf("harness: visibility timeout %s is not a whole number of seconds", f.Visibility)
			}
			attrs[string(types.QueueAttributeNameVisibilityTimeout)] = strconv.Itoa(int(f.Visibility / time.Second))
		}
		if f.MaxReceives > 0 {
			attrs[string(types.QueueAttributeNameRedrivePolicy)] = fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"%d"}`, h.dlqARN, f.MaxReceives)
		}
		if s.queueURL, err = h.createQueue(ctx, f.queueName(h.Prefix), attrs); err != nil {
			return fmt.Errorf("create queue: %w", err)
		}
		queueURLs[f.Suffix] = s.queueURL
		all = append(all, s)
	}
	for _, s := range all {
		f := s.fn
		env := append(h.Stack.FunctionEnv(), "IDEMPOTENCY_TABLE="+idem, "AWS_LAMBDA_LOG_FORMAT=JSON")
		if s.effects != "" {
			env = append(env, "EFFECTS_TABLE="+s.effects)
		}
		if f.MaxReceives > 0 {
			env = append(env, "DLQ_URL="+h.dlqURL)
		}
		if f.Debug {
			env = append(env, "AWS_LAMBDA_LOG_LEVEL=DEBUG")
		}
		for name, suffix := range f.QueueURLs {
			url, ok := queueURLs[suffix]
			if !ok {
				return fmt.Errorf("harness: function %s: %s names no function's queue (suffix %q)", f.Name, name, suffix)
			}
			env = append(env, name+"="+url)
		}
		env = append(env, f.Env...)
		pollers := max(f.Pollers, 1)
		for i := range pollers {
			name := f.Name
			if pollers > 1 {
				name = fmt.Sprintf("%s-%d", f.Name, i)
			}
			r, err := localrun.New(localrun.Config{
				Bootstrap:               bootstrap,
				QueueURL:                s.queueURL,
				SQS:                     countingSQS{SQSAPI: h.SQS, o: h.Obs},
				BatchSize:               f.BatchSize,
				BatchingWindow:          f.BatchingWindow,
				MaxConcurrency:          f.MaxConcurrency,
				ReportBatchItemFailures: true,
				FunctionTimeout:         f.FunctionTimeout,
				FunctionName:            name,
				Region:                  h.Stack.Region,
				PollWait:                f.PollWait,
				Env:                     env,
				Output:                  h.Obs.Output(h.cfg.FunctionLog),
				OnInvoke:                h.Obs.Invoke,
				OnProcess:               h.Obs.Process,
			})
			if err != nil {
				return err
			}
			s.runners = append(s.runners, r)
		}
		h.funcs = append(h.funcs, s)
	}
	h.running = true
	for _, s := range h.funcs {
		for _, r := range s.runners {
			if err := r.Start(ctx); err != nil {
				return err // Close stops the ones that started
			}
		}
	}
	return nil
}

// braces writes names as "{a,b}", or "a" alone.
func braces(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return "{" + strings.Join(names, ",") + "}"
}

// function returns the started function of that name ("" for the first).
func (h *Harness) function(name string) (*started, error) {
	for _, s := range h.funcs {
		if name == "" || s.fn.Name == name {
			return s, nil
		}
	}
	return nil, fmt.Errorf("harness: no function %q", name)
}

// QueueURL is the queue of the named function ("" for the first).
func (h *Harness) QueueURL(function string) string {
	if s, err := h.function(function); err == nil {
		return s.queueURL
	}
	return ""
}

// EffectsTable is the effects table of the named function ("" for the
// first), "" when it has none.
func (h *Harness) EffectsTable(function string) string {
	if s, err := h.function(function); err == nil {
		return s.effects
	}
	return ""
}

// Stop stops the functions. It waits for the invocations in flight, so
// that nothing writes an effect after the tables are read: up to the
// longest function timeout and 10 s more, or only a second once ctx has
// ended (after an interrupt nobody reads them: it kills what still runs).
func (h *Harness) Stop(ctx context.Context) error {
	wait := time.Second
	if ctx.Err() == nil {
		longest := 3 * time.Second // localrun's default function timeout
		for _, s := range h.funcs {
			longest = max(longest, s.fn.FunctionTimeout)
		}
		wait = longest + 10*time.Second
	}
	sctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := h.stopRunners(sctx); err != nil {
		return fmt.Errorf("stop the runners: %w", err)
	}
	return nil
}

func (h *Harness) stopRunners(ctx context.Context) error {
	if !h.running {
		return nil
	}
	h.running = false
	var errs []error
	for _, s := range h.funcs {
		for _, r := range s.runners {
			if err := r.Stop(ctx); err != nil && !errors.Is(err, localrun.ErrNotStarted) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Stats are the runners' counters, added up.
func (h *Harness) Stats() localrun.Stats {
	var t localrun.Stats
	for _, s := range h.funcs {
		for _, r := range s.runners {
			st := r.Stats()
			t.Batches += st.Batches
			t.Records += st.Records
			t.Deleted += st.Deleted
			t.Failed += st.Failed
			t.Successes += st.Successes
			t.PartialFailures += st.PartialFailures
			t.InvalidResponses += st.InvalidResponses
			t.FunctionErrors += st.FunctionErrors
			t.Crashes += st.Crashes
			t.Timeouts += st.Timeouts
			t.InitErrors += st.InitErrors
			t.Stopped += st.Stopped
			t.DeleteErrors += st.DeleteErrors
			t.ReceiveErrors += st.ReceiveErrors
			t.ProcessStarts += st.ProcessStarts
			t.ProcessExits += st.ProcessExits
			// The high-water marks are per runner: their sum bounds the
			// run's from above.
			t.MaxInFlight += st.MaxInFlight
			t.MaxProcesses += st.MaxProcesses
		}
	}
	return t
}
