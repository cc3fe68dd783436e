package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/emf"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

// Environment variables the function reads: the names template.yaml, the
// other examples and the guides use.
const (
	// EnvRedisURL names the cache as redisstore.NewClient reads it:
	// rediss+cluster://host:port for ElastiCache Serverless and MemoryDB
	// (cluster mode, TLS, as they require), redis+cluster://host:port for
	// the local stack's redis-server (a cluster of one node, no TLS).
	EnvRedisURL    = "REDIS_URL"
	EnvDLQURL      = "DLQ_URL"               // required: dead letters go there with their reason
	EnvNamespace   = "IDEMPOTENCY_NAMESPACE" // default DefaultNamespace
	EnvMaxAttempts = "MAX_ATTEMPTS"          // default lambdaidem.DefaultMaxAttempts
)

// DefaultNamespace is the namespace of the idempotency records: fixed, not
// the function's generated name, which a replacement would change.
const DefaultNamespace = "orders"

// ErrConfig is a missing or malformed environment variable.
var ErrConfig = errors.New("redis example: invalid configuration")

// Config is the function's configuration.
type Config struct {
	RedisURL    string // as redisstore.NewClient reads it
	DLQURL      string
	Namespace   string
	MaxAttempts int // 0: the library's default
}

// ConfigFromEnv reads the configuration through getenv (os.Getenv in
// main). Errors wrap ErrConfig.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{RedisURL: getenv(EnvRedisURL), DLQURL: getenv(EnvDLQURL), Namespace: getenv(EnvNamespace)}
	var errs []error
	if client, err := redisstore.NewClient(c.RedisURL); err != nil {
		errs = append(errs, fmt.Errorf("%w: %s: %w", ErrConfig, EnvRedisURL, err))
	} else {
		_ = client.Close()
	}
	if c.DLQURL == "" {
		errs = append(errs, fmt.Errorf("%w: %s is not set", ErrConfig, EnvDLQURL))
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
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

// Deps are the clients the function uses; main builds them, tests point
// them at the local stack.
type Deps struct {
	Redis  redis.UniversalClient
	SQS    *sqs.Client
	Logger *slog.Logger
	// Metrics receives the EMF lines (os.Stdout in main); nil: none.
	Metrics io.Writer
}

// Order is the body the function expects.
type Order struct {
	OrderID string `json:"order_id"`
	// Poison makes the handler refuse the order for good: it is
	// dead-lettered at once with the reason "poison".
	Poison bool `json:"poison"`
}

// NewHandler returns the SQS handler: the Redis store keyed by message ID,
// dead letters to cfg.DLQURL with their reason, visibility changes on the
// source queue, and metrics when deps.Metrics is set. extra options come
// last (tests add an invocation hook).
func NewHandler(cfg Config, deps Deps, extra ...lambdaidem.Option) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	logger := deps.Logger
	opts := []lambdaidem.Option{
		lambdaidem.WithNamespace(cfg.Namespace),
		lambdaidem.WithLogger(logger),
		lambdaidem.WithDeadLetterSink(sqsqueue.NewSink(deps.SQS, cfg.DLQURL)),
		lambdaidem.WithVisibility(sqsqueue.NewVisibilityChanger(deps.SQS)),
	}
	if cfg.MaxAttempts > 0 {
		opts = append(opts, lambdaidem.WithMaxAttempts(cfg.MaxAttempts))
	}
	if deps.Metrics != nil {
		opts = append(opts, lambdaidem.WithInvocationHook(emf.Hook(emf.WithEmitter(emf.NewWriter(deps.Metrics)), emf.WithLogger(logger))))
	}
	store := redisstore.New(deps.Redis, "lambdaidem")
	return lambdaidem.SQS(store, handle(logger), append(opts, extra...)...)
}

// handle is the function's work: here it only logs the order.
func handle(logger *slog.Logger) func(context.Context, events.SQSMessage) error {
	return func(ctx context.Context, msg events.SQSMessage) error {
		var o Order
		if err := json.Unmarshal([]byte(msg.Body), &o); err != nil || o.OrderID == "" {
			return lambdaidem.Poison(fmt.Errorf("not an order: %q", msg.Body))
		}
		if o.Poison {
			return lambdaidem.Poison(fmt.Errorf("order %s refused", o.OrderID))
		}
		logger.InfoContext(ctx, "order", slog.String("order_id", o.OrderID), slog.String("message_id", msg.MessageId))
		return nil
	}
}
