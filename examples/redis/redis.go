package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

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
	// EnvRedisEndpoint is host:port of the cache's cluster endpoint,
	// spoken over TLS as ElastiCache Serverless and MemoryDB require
	// (rediss://host:port says the same). redis://host:port speaks plain
	// TCP, for a local redis-server only (the local stack's).
	EnvRedisEndpoint = "REDIS_ENDPOINT"
	EnvDLQURL        = "DLQ_URL"               // required: dead letters go there with their reason
	EnvNamespace     = "IDEMPOTENCY_NAMESPACE" // default DefaultNamespace
	EnvMaxAttempts   = "MAX_ATTEMPTS"          // default lambdaidem.DefaultMaxAttempts
)

// DefaultNamespace is the namespace of the idempotency records: fixed, not
// the function's generated name, which a replacement would change.
const DefaultNamespace = "orders"

// ErrConfig is a missing or malformed environment variable.
var ErrConfig = errors.New("redis example: invalid configuration")

// Config is the function's configuration.
type Config struct {
	// RedisAddr is host:port; TLS says whether to speak TLS to it.
	RedisAddr   string
	TLS         bool
	DLQURL      string
	Namespace   string
	MaxAttempts int // 0: the library's default
}

// ConfigFromEnv reads the configuration through getenv (os.Getenv in
// main). Errors wrap ErrConfig.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{DLQURL: getenv(EnvDLQURL), Namespace: getenv(EnvNamespace), TLS: true}
	var errs []error
	endpoint := getenv(EnvRedisEndpoint)
	switch {
	case strings.HasPrefix(endpoint, "redis://"):
		c.RedisAddr, c.TLS = strings.TrimPrefix(endpoint, "redis://"), false
	case strings.HasPrefix(endpoint, "rediss://"):
		c.RedisAddr = strings.TrimPrefix(endpoint, "rediss://")
	default:
		c.RedisAddr = endpoint
	}
	if c.RedisAddr == "" || strings.Contains(c.RedisAddr, "/") {
		errs = append(errs, fmt.Errorf("%w: %s=%q is not host:port, rediss://host:port or redis://host:port", ErrConfig, EnvRedisEndpoint, endpoint))
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

// NewClient returns a cluster client for cfg's endpoint, as ElastiCache
// Serverless and MemoryDB speak (the local stack's redis-server runs as a
// cluster of one node too), with short timeouts so that an unreachable
// cache fails the records (SQS keeps them) instead of eating the
// invocation.
func NewClient(cfg Config) *redis.ClusterClient {
	opts := &redis.ClusterOptions{
		Addrs:        []string{cfg.RedisAddr},
		DialTimeout:  time.Second,
		ReadTimeout:  500 * time.Millisecond,
		WriteTimeout: 500 * time.Millisecond,
	}
	if cfg.TLS {
		opts.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return redis.NewClusterClient(opts)
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
