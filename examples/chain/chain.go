package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

// Environment variables the function reads; template.yaml sets them.
const (
	EnvStage            = "STAGE"                   // StageOrders or StageNotify
	EnvIdempotencyTable = "IDEMPOTENCY_TABLE"       // required
	EnvDLQURL           = "DLQ_URL"                 // optional: dead letters go there with their reason
	EnvNotifications    = "NOTIFICATIONS_QUEUE_URL" // the orders stage: where notifications go
	EnvEmailAPI         = "EMAIL_API_URL"           // the notify stage: the email API's base URL
	// EnvEmailAPIKeyed says whether the email API takes an Idempotency-Key
	// header and sends one email per key ("true"); otherwise the notify
	// stage runs at most once.
	EnvEmailAPIKeyed = "EMAIL_API_KEYED"
	EnvMaxAttempts   = "MAX_ATTEMPTS" // default lambdaidem.DefaultMaxAttempts
)

// The two stages of the flow (STAGE).
const (
	// StageOrders takes orders and sends one notification per order to
	// the notifications queue, keyed by the order's effect key.
	StageOrders = "orders"
	// StageNotify takes notifications, one per key, and sends each order's
	// email through the email API.
	StageNotify = "notify"
)

// The stages' idempotency namespaces: fixed, not the functions' names,
// which CloudFormation may change on a replacement.
const (
	OrdersNamespace = "orders"
	NotifyNamespace = "notifications"
)

// KeyAttribute is the message attribute a notification's idempotency key
// travels in: the orders stage's effect key for the order, the same on
// every attempt, so the notify stage takes a resent notification for the
// duplicate it is.
const KeyAttribute = "idempotency-key"

// CrashExitCode is the exit status of a crash the body asked for.
const CrashExitCode = 3

// Crash points a body can ask for, on attempt 1 (or the attempts listed).
const (
	// CrashAfterSend: the orders stage exits after the notification was
	// sent, before its completion is recorded.
	CrashAfterSend = "after_send"
	// CrashAfterEmail: the notify stage exits after the email API took the
	// email, before its completion is recorded.
	CrashAfterEmail = "after_email"
)

// Named errors.
var (
	// ErrConfig is a missing or malformed environment variable.
	ErrConfig = errors.New("chain: invalid configuration")
	// ErrBadMessage is a body that can never be processed.
	ErrBadMessage = errors.New("chain: bad message")
	// ErrEmailAPI is an answer of the email API other than success.
	ErrEmailAPI = errors.New("chain: email API")
)

// Order is what the orders queue carries. NotifyCrash steers the notify
// stage, for tests and the chaos run: it becomes the notification's Crash.
type Order struct {
	ID            string `json:"order_id"`
	Email         string `json:"email"`
	Crash         string `json:"crash,omitempty"`
	CrashAttempts []int  `json:"crash_attempts,omitempty"`
	NotifyCrash   string `json:"notify_crash,omitempty"`
}

// Notification is what the orders stage sends to the notifications queue.
type Notification struct {
	OrderID string `json:"order_id"`
	Email   string `json:"email"`
	Crash   string `json:"crash,omitempty"`
}

// Config is a stage's configuration.
type Config struct {
	Stage            string
	IdempotencyTable string
	DLQURL           string
	Notifications    string // the orders stage
	EmailAPI         string // the notify stage
	EmailAPIKeyed    bool
	MaxAttempts      int // 0: the library's default
}

// ConfigFromEnv reads a stage's configuration through getenv. Errors wrap
// ErrConfig.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{Stage: getenv(EnvStage), IdempotencyTable: getenv(EnvIdempotencyTable), DLQURL: getenv(EnvDLQURL),
		Notifications: getenv(EnvNotifications), EmailAPI: getenv(EnvEmailAPI)}
	var errs []error
	need := func(name, v string) {
		if v == "" {
			errs = append(errs, fmt.Errorf("%w: %s is not set", ErrConfig, name))
		}
	}
	need(EnvIdempotencyTable, c.IdempotencyTable)
	switch c.Stage {
	case StageOrders:
		need(EnvNotifications, c.Notifications)
	case StageNotify:
		need(EnvEmailAPI, c.EmailAPI)
	default:
		errs = append(errs, fmt.Errorf("%w: %s=%q is neither %q nor %q", ErrConfig, EnvStage, c.Stage, StageOrders, StageNotify))
	}
	switch v := getenv(EnvEmailAPIKeyed); v {
	case "", "false":
	case "true":
		c.EmailAPIKeyed = true
	default:
		errs = append(errs, fmt.Errorf("%w: %s=%q is neither true nor false", ErrConfig, EnvEmailAPIKeyed, v))
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

// Sender sends a message; *sqs.Client is one.
type Sender interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Mailer sends one order's email. key is the notify stage's effect key,
// which an API that takes idempotency keys gets as Idempotency-Key.
type Mailer interface {
	Send(ctx context.Context, n Notification, key string) error
}

// Deps are what the stages use. main builds them; tests fake them.
type Deps struct {
	// SQS sends notifications (the orders stage), dead letters and
	// visibility changes. Nil in tests that need none of these.
	SQS    Sender
	Mailer Mailer
	Logger *slog.Logger
	// Exit ends the process for a crash the body asked for; default
	// os.Exit.
	Exit func(code int)
}

// NewMessageHandler returns the stage's handler before decoration and
// the decorator options it runs with: what lambdaidemtest takes, and what
// main passes to lambdaidem.SQS.
func NewMessageHandler(cfg Config, deps Deps) (lambdaidem.MessageHandler, []lambdaidem.Option) {
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.Exit == nil {
		deps.Exit = os.Exit
	}
	opts := []lambdaidem.Option{lambdaidem.WithLogger(deps.Logger)}
	if cfg.MaxAttempts > 0 {
		opts = append(opts, lambdaidem.WithMaxAttempts(cfg.MaxAttempts))
	}
	if c, ok := deps.SQS.(*sqs.Client); ok {
		opts = append(opts, lambdaidem.WithVisibility(sqsqueue.NewVisibilityChanger(c)),
			lambdaidem.WithBackoff(lambdaidem.ExponentialBackoff(time.Second, time.Minute)))
		if cfg.DLQURL != "" {
			opts = append(opts, lambdaidem.WithDeadLetterSink(sqsqueue.NewSink(c, cfg.DLQURL)))
		}
	}
	if cfg.Stage == StageOrders {
		return orders(cfg, deps), append(opts, lambdaidem.WithNamespace(OrdersNamespace), lambdaidem.WithKeyJSONField("order_id"))
	}
	opts = append(opts, lambdaidem.WithNamespace(NotifyNamespace), lambdaidem.WithKeyAttribute(KeyAttribute))
	if !cfg.EmailAPIKeyed {
		// An API that takes no key cannot tell a repeat: an email whose
		// outcome is unknown is dead-lettered as outcome_unknown, never
		// sent again.
		opts = append(opts, lambdaidem.WithAtMostOnce())
	}
	return notify(deps), opts
}

// crashes reports whether a body's crash point is point on this attempt.
func crashes(ctx context.Context, crash, point string, attempts []int) bool {
	if crash != point {
		return false
	}
	lease, _ := lambdaidem.LeaseFromContext(ctx)
	if len(attempts) == 0 {
		return lease.Attempt == 1
	}
	return slices.Contains(attempts, lease.Attempt)
}

// orders sends the order's notification, carrying the order's effect key
// as its idempotency key: a crash after the send runs the order again, and
// the resent notification, with the same key, is a duplicate the notify
// stage skips. On a FIFO queue the key is also the deduplication ID.
func orders(cfg Config, deps Deps) lambdaidem.MessageHandler {
	return func(ctx context.Context, msg events.SQSMessage) error {
		var o Order
		if err := json.Unmarshal([]byte(msg.Body), &o); err != nil || o.ID == "" || o.Email == "" {
			return lambdaidem.Poison(fmt.Errorf("%w: an order needs order_id and email", ErrBadMessage))
		}
		key, ok := lambdaidem.EffectKey(ctx)
		if !ok {
			return errors.New("chain: no effect key: the stage runs in lease mode")
		}
		body, err := json.Marshal(Notification{OrderID: o.ID, Email: o.Email, Crash: o.NotifyCrash})
		if err != nil {
			return err
		}
		in := &sqs.SendMessageInput{
			QueueUrl:    aws.String(cfg.Notifications),
			MessageBody: aws.String(string(body)),
			MessageAttributes: map[string]types.MessageAttributeValue{
				KeyAttribute: {DataType: aws.String("String"), StringValue: aws.String(key)},
			},
		}
		if strings.HasSuffix(cfg.Notifications, ".fifo") {
			in.MessageGroupId, in.MessageDeduplicationId = aws.String(o.ID), aws.String(key)
		}
		if _, err := deps.SQS.SendMessage(ctx, in); err != nil {
			return fmt.Errorf("send the notification of %s: %w", o.ID, err)
		}
		if crashes(ctx, o.Crash, CrashAfterSend, o.CrashAttempts) {
			deps.Logger.Warn("crashing after the send, as the order asks", slog.String("order_id", o.ID))
			deps.Exit(CrashExitCode)
		}
		return nil
	}
}

// notify sends the order's email through the Mailer, under the
// notification's effect key.
func notify(deps Deps) lambdaidem.MessageHandler {
	return func(ctx context.Context, msg events.SQSMessage) error {
		var n Notification
		if err := json.Unmarshal([]byte(msg.Body), &n); err != nil || n.OrderID == "" || n.Email == "" {
			return lambdaidem.Poison(fmt.Errorf("%w: a notification needs order_id and email", ErrBadMessage))
		}
		key, ok := lambdaidem.EffectKey(ctx)
		if !ok {
			return errors.New("chain: no effect key: the stage runs in lease mode")
		}
		if err := deps.Mailer.Send(ctx, n, key); err != nil {
			return err
		}
		if crashes(ctx, n.Crash, CrashAfterEmail, nil) {
			deps.Logger.Warn("crashing after the email, as the notification asks", slog.String("order_id", n.OrderID))
			deps.Exit(CrashExitCode)
		}
		return nil
	}
}

// EmailAPI is a client of an HTTP email API: POST URL/emails with the
// notification as JSON, and, when Keyed, the effect key as the
// Idempotency-Key header (the API then sends one email per key, and
// answers a repeat as it answered the first). What its answers mean to the
// decorator:
//
//	2xx                          sent
//	400, 422                     will never be sent: lambdaidem.Poison
//	409                          a request with this key is in progress: retry later
//	429, 503                     not taken, nothing sent: lambdaidem.NotApplied, retried
//	other 5xx, a lost connection it may or may not have been sent: an error, which at-most-once
//	                             mode dead-letters as outcome_unknown and at-least-once retries
//	                             (only safe with Keyed)
//
// A request that never left (the connection was refused) is NotApplied.
type EmailAPI struct {
	URL    string
	Keyed  bool
	Client *http.Client // default http.DefaultClient
}

// Send posts one email.
func (a *EmailAPI) Send(ctx context.Context, n Notification, key string) error {
	body, err := json.Marshal(map[string]string{"to": n.Email, "order_id": n.OrderID, "subject": "Your order " + n.OrderID})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(a.URL, "/")+"/emails", bytes.NewReader(body))
	if err != nil {
		return lambdaidem.Poison(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if a.Keyed {
		req.Header.Set("Idempotency-Key", key)
	}
	client := a.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return lambdaidem.NotApplied(fmt.Errorf("%w: %w", ErrEmailAPI, err))
		}
		return fmt.Errorf("%w: %w", ErrEmailAPI, err)
	}
	_ = resp.Body.Close()
	status := fmt.Errorf("%w: %s for order %s", ErrEmailAPI, resp.Status, n.OrderID)
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusUnprocessableEntity:
		return lambdaidem.Poison(status)
	case resp.StatusCode == http.StatusConflict:
		return lambdaidem.RetryAfter(time.Second, status)
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable:
		return lambdaidem.NotApplied(lambdaidem.RetryAfter(retryAfter(resp), status))
	}
	return status
}

// retryAfter reads a Retry-After header in seconds; 5 seconds without one.
func retryAfter(resp *http.Response) time.Duration {
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	return 5 * time.Second
}
