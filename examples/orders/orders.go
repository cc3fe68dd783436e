package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/emf"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/otelidem"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

// Environment variables the function reads. template.yaml sets them.
const (
	EnvIdempotencyTable = "IDEMPOTENCY_TABLE"     // required
	EnvEffectsTable     = "EFFECTS_TABLE"         // required
	EnvNamespace        = "IDEMPOTENCY_NAMESPACE" // default DefaultNamespace
	EnvDLQURL           = "DLQ_URL"               // optional: without it SQS's redrive policy is the only DLQ
	EnvMaxAttempts      = "MAX_ATTEMPTS"          // default lambdaidem.DefaultMaxAttempts
	EnvEffectMode       = "EFFECT_MODE"           // EffectModePlain (default) or EffectModeTransactional
	// EnvStoreAttemptTimeout is the store's per-attempt timeout
	// (dynamo.Tuning.AttemptTimeout), a Go duration; default
	// dynamo.DefaultAttemptTimeout, which suits DynamoDB. A DynamoDB Local
	// on a loaded machine can take longer to answer, and an attempt
	// abandoned there is only retried against the same server.
	EnvStoreAttemptTimeout = "DYNAMODB_ATTEMPT_TIMEOUT"
	// EnvTracesExporter is OpenTelemetry's variable: "none" or unset (the
	// default) traces nothing; TracesConsole prints each span as a JSON
	// line on standard output (CloudWatch Logs, in Lambda).
	EnvTracesExporter = "OTEL_TRACES_EXPORTER"
	// EnvFunctionName is set by Lambda; it is the FunctionName dimension
	// of the metrics, which template.yaml's alarms select on.
	EnvFunctionName = "AWS_LAMBDA_FUNCTION_NAME"
)

// How the effect row is written (EFFECT_MODE).
const (
	// EffectModePlain writes the effect with its own PutItem inside the
	// handler; the completion is recorded after the handler returns. A
	// crash between the two repeats the effect: the gap a plain
	// idempotency lock leaves.
	EffectModePlain = "plain"
	// EffectModeTransactional adds the effect's Put to the completion
	// (lambdaidem.AddCompletionWrite): the row and the COMPLETED mark
	// commit in one TransactWriteItems, or neither does. No crash can
	// repeat the effect.
	EffectModeTransactional = "transactional"
)

// DefaultNamespace is the namespace of the orders' idempotency records. It
// is fixed rather than the function's name, which CloudFormation may change
// on a replacement and would forget every key with it.
const DefaultNamespace = "orders"

// CrashExitCode is the exit status of a crash the body asked for.
const CrashExitCode = 3

// Crash points a body can ask for.
const (
	CrashBeforeEffect = "before_effect"
	CrashAfterEffect  = "after_effect"
)

// Named errors, so logs and the dead-letter metadata tell them apart.
var (
	// ErrConfig is a missing or malformed environment variable.
	ErrConfig = errors.New("orders: invalid configuration")
	// ErrBadOrder is a body that can never be processed.
	ErrBadOrder = errors.New("orders: bad order")
	// ErrSimulatedFailure is a failure the body asked for (fail_times).
	ErrSimulatedFailure = errors.New("orders: simulated failure")
)

// Config is the function's configuration.
type Config struct {
	IdempotencyTable string
	EffectsTable     string
	Namespace        string
	// DLQURL is the queue dead-lettered messages are sent to, with their
	// reason. Empty: none, and the source queue's redrive policy catches
	// poison messages without a reason.
	DLQURL string
	// MaxAttempts is passed to lambdaidem.WithMaxAttempts; 0 keeps the
	// library's default.
	MaxAttempts int
	// EffectMode is EffectModePlain or EffectModeTransactional; empty
	// means plain.
	EffectMode string
	// FunctionName is the FunctionName dimension of the EMF metrics;
	// empty publishes them without dimensions.
	FunctionName string
	// StoreAttemptTimeout is the DynamoDB client's per-attempt timeout;
	// 0 keeps dynamo.DefaultAttemptTimeout.
	StoreAttemptTimeout time.Duration
	// TracesExporter is "" (no tracing) or TracesConsole.
	TracesExporter string
}

// TracesConsole is the value of OTEL_TRACES_EXPORTER that turns tracing on,
// printing spans on standard output.
const TracesConsole = "console"

// ConfigFromEnv reads the configuration through getenv (os.Getenv in
// main). Errors wrap ErrConfig.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		IdempotencyTable: getenv(EnvIdempotencyTable),
		EffectsTable:     getenv(EnvEffectsTable),
		Namespace:        getenv(EnvNamespace),
		DLQURL:           getenv(EnvDLQURL),
		EffectMode:       getenv(EnvEffectMode),
		FunctionName:     getenv(EnvFunctionName),
	}
	var errs []error
	if c.IdempotencyTable == "" {
		errs = append(errs, fmt.Errorf("%w: %s is not set", ErrConfig, EnvIdempotencyTable))
	}
	if c.EffectsTable == "" {
		errs = append(errs, fmt.Errorf("%w: %s is not set", ErrConfig, EnvEffectsTable))
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	switch c.EffectMode {
	case "":
		c.EffectMode = EffectModePlain
	case EffectModePlain, EffectModeTransactional:
	default:
		errs = append(errs, fmt.Errorf("%w: %s=%q is neither %q nor %q", ErrConfig, EnvEffectMode, c.EffectMode, EffectModePlain, EffectModeTransactional))
	}
	if v := getenv(EnvStoreAttemptTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("%w: %s=%q is not a positive duration", ErrConfig, EnvStoreAttemptTimeout, v))
		}
		c.StoreAttemptTimeout = d
	}
	switch v := getenv(EnvTracesExporter); v {
	case "", "none":
	case TracesConsole:
		c.TracesExporter = v
	default:
		errs = append(errs, fmt.Errorf("%w: %s=%q is neither %q nor %q (this example prints spans; see docs/tracing.md for OTLP)", ErrConfig, EnvTracesExporter, v, "none", TracesConsole))
	}
	if v := getenv(EnvMaxAttempts); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			errs = append(errs, fmt.Errorf("%w: %s=%q is not a positive integer", ErrConfig, EnvMaxAttempts, v))
		}
		c.MaxAttempts = n
	}
	return c, errors.Join(errs...)
}

// Deps are the clients and hooks the function uses. main builds them from
// the environment; tests build them against the local services.
type Deps struct {
	DynamoDB *dynamodb.Client
	// SQS sends dead letters and changes visibility. Nil: neither (the
	// queue's visibility timeout and redrive policy apply).
	SQS *sqs.Client
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Exit ends the process for the "crash" steering field; default
	// os.Exit. Tests replace it.
	Exit func(code int)
	// Metrics receives the EMF metric lines; default os.Stdout, where
	// Lambda ships them to CloudWatch Logs, which turns them into metrics.
	Metrics io.Writer
	// TracerProvider, when set, traces the function: a span per
	// invocation and per record (package otelidem), linked to the
	// producer's trace, and one for the effect's write under it. Nil: no
	// tracing, at no cost.
	TracerProvider trace.TracerProvider
	// WriteEffect, when set, receives each plain-mode effect row instead
	// of a PutItem into the effects table: unit tests run the handler
	// without DynamoDB (see kit_test.go).
	WriteEffect func(ctx context.Context, row map[string]types.AttributeValue) error
}

// NewHandler returns the function's Lambda handler. opts are added after
// the example's own options, so tests can override them.
func NewHandler(cfg Config, deps Deps, opts ...lambdaidem.Option) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	handle, base := NewMessageHandler(cfg, deps)
	store := dynamo.New(deps.DynamoDB, cfg.IdempotencyTable)
	return lambdaidem.SQS(store, handle, append(base, opts...)...)
}

// NewMessageHandler returns the function's handler before decoration, and
// the decorator options NewHandler gives it: what lambdaidemtest takes.
func NewMessageHandler(cfg Config, deps Deps) (lambdaidem.MessageHandler, []lambdaidem.Option) {
	f := &function{db: deps.DynamoDB, table: cfg.EffectsTable, log: deps.Logger, exit: deps.Exit,
		transactional: cfg.EffectMode == EffectModeTransactional, write: deps.WriteEffect}
	if f.log == nil {
		f.log = slog.Default()
	}
	if f.exit == nil {
		f.exit = os.Exit
	}
	f.tracer = noop.NewTracerProvider().Tracer("")
	if deps.TracerProvider != nil {
		f.tracer = deps.TracerProvider.Tracer("orders")
	}
	base := []lambdaidem.Option{
		lambdaidem.WithNamespace(cfg.Namespace),
		// The business key: a producer that sends an order twice gets
		// one effect, not only an SQS redelivery of one message.
		lambdaidem.WithKeyJSONField("order_id"),
		lambdaidem.WithLogger(f.log),
		lambdaidem.WithInvocationHook(metricsHook(cfg, deps.Metrics)),
	}
	if cfg.MaxAttempts > 0 {
		base = append(base, lambdaidem.WithMaxAttempts(cfg.MaxAttempts))
	}
	if deps.TracerProvider != nil {
		base = append(base, lambdaidem.WithObserver(otelidem.New(otelidem.WithTracerProvider(deps.TracerProvider))))
	}
	if deps.SQS != nil {
		// Brings a message whose key another instance holds back when
		// that lease ends, instead of a whole visibility timeout later.
		base = append(base, lambdaidem.WithVisibility(sqsqueue.NewVisibilityChanger(deps.SQS)))
		if cfg.DLQURL != "" {
			base = append(base, lambdaidem.WithDeadLetterSink(sqsqueue.NewSink(deps.SQS, cfg.DLQURL)))
		}
	}
	return f.handle, base
}

// metricsHook emits the decorator's metrics as EMF lines under the one
// dimension FunctionName: a CloudWatch metric is identified by its exact
// set of dimensions, and template.yaml's alarms (LeasesLost, StoreErrors)
// and dashboard select FunctionName alone. Adding the idempotency
// namespace as a second dimension would publish different metrics that
// the alarms never see; this function has one namespace anyway.
func metricsHook(cfg Config, out io.Writer) func(*lambdaidem.InvocationReport) {
	var dims []emf.Dimension
	if cfg.FunctionName != "" {
		dims = append(dims, emf.Dimension{Name: emf.DimensionFunctionName, Value: cfg.FunctionName})
	}
	return emf.Hook(emf.WithEmitter(emf.NewWriter(out)), emf.WithDimensions(dims...))
}

// Order is a message body. Only OrderID is business data; the other fields
// steer the function for demos and tests.
type Order struct {
	OrderID   string `json:"order_id"`
	Poison    bool   `json:"poison,omitempty"`
	FailTimes int    `json:"fail_times,omitempty"`
	SleepMS   int    `json:"sleep_ms,omitempty"`
	Crash     string `json:"crash,omitempty"`
	// CrashAttempts lists the attempts that crash; default [1].
	CrashAttempts []int `json:"crash_attempts,omitempty"`
}

func (o Order) crashes(point string, attempt int) bool {
	if o.Crash != point {
		return false
	}
	if len(o.CrashAttempts) == 0 {
		return attempt == 1
	}
	return slices.Contains(o.CrashAttempts, attempt)
}

type function struct {
	db            *dynamodb.Client
	table         string
	log           *slog.Logger
	exit          func(int)
	transactional bool
	write         func(context.Context, map[string]types.AttributeValue) error
	tracer        trace.Tracer
}

func (f *function) handle(ctx context.Context, msg events.SQSMessage) error {
	var o Order
	if err := json.Unmarshal([]byte(msg.Body), &o); err != nil {
		// Retrying cannot fix a body: dead-letter it at once.
		return lambdaidem.Poison(fmt.Errorf("%w: %v", ErrBadOrder, err))
	}
	if o.Crash != "" && o.Crash != CrashBeforeEffect && o.Crash != CrashAfterEffect {
		return lambdaidem.Poison(fmt.Errorf("%w: unknown crash point %q", ErrBadOrder, o.Crash))
	}
	lease, _ := lambdaidem.LeaseFromContext(ctx)
	if o.Poison {
		return lambdaidem.Poison(fmt.Errorf("%w: order %s is marked poison", ErrBadOrder, o.OrderID))
	}
	if lease.Attempt <= o.FailTimes {
		return fmt.Errorf("%w: attempt %d of the first %d", ErrSimulatedFailure, lease.Attempt, o.FailTimes)
	}
	if o.SleepMS > 0 {
		t := time.NewTimer(time.Duration(o.SleepMS) * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("order %s: %w", o.OrderID, context.Cause(ctx))
		}
	}
	if o.crashes(CrashBeforeEffect, lease.Attempt) {
		return f.crash(ctx, o, lease, CrashBeforeEffect)
	}
	if err := f.writeEffect(ctx, o, msg, lease); err != nil {
		return err
	}
	// In transactional mode the effect is only prepared at this point: a
	// crash here writes nothing, which is the point of the mode.
	if o.crashes(CrashAfterEffect, lease.Attempt) {
		return f.crash(ctx, o, lease, CrashAfterEffect)
	}
	return nil
}

// crash ends the process. It returns only when a test's Exit hook does,
// and then fails the record, so the outcome is not recorded as done.
func (f *function) crash(ctx context.Context, o Order, lease lambdaidem.Lease, point string) error {
	f.log.WarnContext(ctx, "crashing on purpose",
		slog.String("order_id", o.OrderID), slog.String("point", point), slog.Int("attempt", lease.Attempt))
	f.exit(CrashExitCode)
	return fmt.Errorf("order %s: crash %s on attempt %d did not end the process", o.OrderID, point, lease.Attempt)
}

// Attributes of an effect row. The table has one string partition key, pk.
const (
	attrPK         = "pk"         // order_id + "#" + effect_id
	attrOrderID    = "order_id"   // the business key
	attrEffectID   = "effect_id"  // random, new for every write
	attrMessageID  = "message_id" // the SQS message that caused it
	attrAttempt    = "attempt"    // lambdaidem attempt number
	attrGeneration = "generation" // the lease's fencing number: generation
	attrClaim      = "claim"      // and claim within it
	attrAt         = "at"         // RFC 3339 UTC, when written
)

// writeEffect is the side effect, made non-idempotent on purpose: a fresh
// row every call, so a repeated effect shows up as a second row. In plain
// mode it is written at once; in transactional mode it is added to the
// completion and commits with it, after the handler returned.
func (f *function) writeEffect(ctx context.Context, o Order, msg events.SQSMessage, lease lambdaidem.Lease) error {
	id, err := randomID()
	if err != nil {
		return err
	}
	item := map[string]types.AttributeValue{
		attrPK:         &types.AttributeValueMemberS{Value: o.OrderID + "#" + id},
		attrOrderID:    &types.AttributeValueMemberS{Value: o.OrderID},
		attrEffectID:   &types.AttributeValueMemberS{Value: id},
		attrMessageID:  &types.AttributeValueMemberS{Value: msg.MessageId},
		attrAttempt:    &types.AttributeValueMemberN{Value: strconv.Itoa(lease.Attempt)},
		attrGeneration: &types.AttributeValueMemberS{Value: lease.Fence.Generation},
		attrClaim:      &types.AttributeValueMemberN{Value: strconv.FormatInt(lease.Fence.Claim, 10)},
		attrAt:         &types.AttributeValueMemberS{Value: time.Now().UTC().Format(time.RFC3339Nano)},
	}
	if f.transactional {
		err := lambdaidem.AddCompletionWrite(ctx, types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String(f.table),
			Item:      item,
			// The ID is fresh, so this holds unless IDs collide; a
			// collision cancels the completion instead of overwriting.
			ConditionExpression: aws.String("attribute_not_exists(" + attrPK + ")"),
		}})
		if err != nil {
			return fmt.Errorf("order %s: prepare effect: %w", o.OrderID, err)
		}
		f.log.InfoContext(ctx, "effect prepared; it commits with the completion",
			slog.String("order_id", o.OrderID), slog.String("effect_id", id), slog.Int("attempt", lease.Attempt))
		return nil
	}
	ctx, span := f.tracer.Start(ctx, "write effect")
	if f.write != nil {
		err = f.write(ctx, item)
	} else {
		_, err = f.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: item})
	}
	span.End()
	if err != nil {
		return fmt.Errorf("order %s: write effect: %w", o.OrderID, err)
	}
	f.log.InfoContext(ctx, "effect written",
		slog.String("order_id", o.OrderID), slog.String("effect_id", id), slog.Int("attempt", lease.Attempt))
	return nil
}

func randomID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random effect ID: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
