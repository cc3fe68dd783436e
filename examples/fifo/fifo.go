package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

// Environment variables the function reads.
const (
	EnvIdempotencyTable = "IDEMPOTENCY_TABLE"     // required
	EnvEffectsTable     = "EFFECTS_TABLE"         // required
	EnvNamespace        = "IDEMPOTENCY_NAMESPACE" // default DefaultNamespace
	EnvDLQURL           = "DLQ_URL"               // optional; a FIFO queue
	EnvMaxAttempts      = "MAX_ATTEMPTS"          // default lambdaidem.DefaultMaxAttempts
	EnvDedupPerGroup    = "DEDUP_PER_GROUP"       // "true" for DeduplicationScope=messageGroup; default false
)

// DefaultNamespace is the namespace of the idempotency records, fixed
// rather than the function's name (see the orders example).
const DefaultNamespace = "orders-fifo"

// Named errors, so logs and the dead-letter metadata tell them apart.
var (
	// ErrConfig is a missing or malformed environment variable.
	ErrConfig = errors.New("fifo: invalid configuration")
	// ErrBadMessage is a body that can never be processed.
	ErrBadMessage = errors.New("fifo: bad message")
	// ErrSimulatedFailure is a failure the body asked for (fail_times).
	ErrSimulatedFailure = errors.New("fifo: simulated failure")
)

// Config is the function's configuration.
type Config struct {
	IdempotencyTable string
	EffectsTable     string
	Namespace        string
	// DLQURL is a FIFO queue for dead-lettered messages; they keep their
	// MessageGroupId there. Empty: none.
	DLQURL string
	// MaxAttempts is passed to lambdaidem.WithMaxAttempts; 0 keeps the
	// library's default.
	MaxAttempts int
	// DedupPerGroup makes the message group part of the key, for queues
	// whose deduplication is scoped to the group.
	DedupPerGroup bool
}

// ConfigFromEnv reads the configuration through getenv (os.Getenv in
// main). Errors wrap ErrConfig.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		IdempotencyTable: getenv(EnvIdempotencyTable),
		EffectsTable:     getenv(EnvEffectsTable),
		Namespace:        getenv(EnvNamespace),
		DLQURL:           getenv(EnvDLQURL),
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
	if v := getenv(EnvMaxAttempts); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			errs = append(errs, fmt.Errorf("%w: %s=%q is not a positive integer", ErrConfig, EnvMaxAttempts, v))
		}
		c.MaxAttempts = n
	}
	if v := getenv(EnvDedupPerGroup); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %s=%q is not a boolean", ErrConfig, EnvDedupPerGroup, v))
		}
		c.DedupPerGroup = b
	}
	return c, errors.Join(errs...)
}

// Deps are the clients the function uses. main builds them from the
// environment; tests build them against the local services.
type Deps struct {
	DynamoDB *dynamodb.Client
	// SQS sends dead letters and changes visibility. Nil: neither.
	SQS *sqs.Client
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// WriteEffect, when set, receives each effect (the group and the
	// message's seq) instead of the transaction on the effects table: unit
	// tests run the handler without DynamoDB (see kit_test.go).
	WriteEffect func(ctx context.Context, group string, seq int) error
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
	f := &function{db: deps.DynamoDB, table: cfg.EffectsTable, log: deps.Logger, write: deps.WriteEffect}
	if f.log == nil {
		f.log = slog.Default()
	}
	base := []lambdaidem.Option{
		lambdaidem.WithNamespace(cfg.Namespace),
		lambdaidem.WithKeyDeduplicationID(cfg.DedupPerGroup),
		lambdaidem.WithLogger(f.log),
	}
	if cfg.MaxAttempts > 0 {
		base = append(base, lambdaidem.WithMaxAttempts(cfg.MaxAttempts))
	}
	if deps.SQS != nil {
		base = append(base, lambdaidem.WithVisibility(sqsqueue.NewVisibilityChanger(deps.SQS)))
		if cfg.DLQURL != "" {
			base = append(base, lambdaidem.WithDeadLetterSink(sqsqueue.NewSink(deps.SQS, cfg.DLQURL)))
		}
	}
	return f.handle, base
}

// Message is a message body. Seq is the message's place in its group,
// from 1; the other fields steer the function for demos and tests.
type Message struct {
	Seq       int  `json:"seq"`
	Poison    bool `json:"poison,omitempty"`
	FailTimes int  `json:"fail_times,omitempty"`
	SleepMS   int  `json:"sleep_ms,omitempty"`
}

type function struct {
	db    *dynamodb.Client
	table string
	log   *slog.Logger
	write func(ctx context.Context, group string, seq int) error
}

func (f *function) handle(ctx context.Context, msg events.SQSMessage) error {
	var m Message
	if err := json.Unmarshal([]byte(msg.Body), &m); err != nil {
		return lambdaidem.Poison(fmt.Errorf("%w: %v", ErrBadMessage, err))
	}
	group := msg.Attributes["MessageGroupId"]
	if m.Seq < 1 || group == "" {
		return lambdaidem.Poison(fmt.Errorf("%w: want a seq from 1 and a MessageGroupId, got seq %d, group %q", ErrBadMessage, m.Seq, group))
	}
	lease, _ := lambdaidem.LeaseFromContext(ctx)
	if m.Poison {
		return lambdaidem.Poison(fmt.Errorf("%w: group %s seq %d is marked poison", ErrBadMessage, group, m.Seq))
	}
	if lease.Attempt <= m.FailTimes {
		return fmt.Errorf("%w: attempt %d of the first %d", ErrSimulatedFailure, lease.Attempt, m.FailTimes)
	}
	if m.SleepMS > 0 {
		t := time.NewTimer(time.Duration(m.SleepMS) * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("group %s seq %d: %w", group, m.Seq, context.Cause(ctx))
		}
	}
	return f.writeEffect(ctx, group, m, msg, lease)
}

// Items of the effects table (string partition key pk):
//
//	effect row   pk = "effect#" + group + "#" + seq + "#" + effect_id, one per run
//	group log    pk = "group#" + group, seqs: the group's seq numbers in the
//	             order their effects happened; effects: how many
const (
	attrPK             = "pk"
	attrGroup          = "group"
	attrSeq            = "seq"
	attrEffectID       = "effect_id"
	attrMessageID      = "message_id"
	attrSequenceNumber = "sequence_number" // SQS's SequenceNumber of the message
	attrAttempt        = "attempt"
	attrGeneration     = "generation"
	attrClaim          = "claim"
	attrAt             = "at"
	attrSeqs           = "seqs"
	attrEffects        = "effects"
)

// writeEffect writes the effect row and appends to the group's log in one
// transaction, so the log always matches the rows. Like the orders
// example's effect it is not idempotent: every run adds a row and a log
// entry.
func (f *function) writeEffect(ctx context.Context, group string, m Message, msg events.SQSMessage, lease lambdaidem.Lease) error {
	if f.write != nil {
		return f.write(ctx, group, m.Seq)
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("random effect ID: %w", err)
	}
	id := hex.EncodeToString(b[:])
	seq := strconv.Itoa(m.Seq)
	now := time.Now().UTC().Format(time.RFC3339Nano)
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	_, err := f.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{
			TableName: aws.String(f.table),
			Item: map[string]types.AttributeValue{
				attrPK:             s("effect#" + group + "#" + seq + "#" + id),
				attrGroup:          s(group),
				attrSeq:            n(seq),
				attrEffectID:       s(id),
				attrMessageID:      s(msg.MessageId),
				attrSequenceNumber: s(msg.Attributes["SequenceNumber"]),
				attrAttempt:        n(strconv.Itoa(lease.Attempt)),
				attrGeneration:     s(lease.Fence.Generation),
				attrClaim:          n(strconv.FormatInt(lease.Fence.Claim, 10)),
				attrAt:             s(now),
			},
		}},
		{Update: &types.Update{
			TableName:        aws.String(f.table),
			Key:              map[string]types.AttributeValue{attrPK: s("group#" + group)},
			UpdateExpression: aws.String("SET #seqs = list_append(if_not_exists(#seqs, :empty), :seq), #at = :at ADD #effects :one"),
			ExpressionAttributeNames: map[string]string{
				"#seqs": attrSeqs, "#at": attrAt, "#effects": attrEffects,
			},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":empty": &types.AttributeValueMemberL{Value: []types.AttributeValue{}},
				":seq":   &types.AttributeValueMemberL{Value: []types.AttributeValue{n(seq)}},
				":at":    s(now),
				":one":   n("1"),
			},
		}},
	}})
	if err != nil {
		return fmt.Errorf("group %s seq %d: write effect: %w", group, m.Seq, err)
	}
	f.log.InfoContext(ctx, "effect written",
		slog.String("group", group), slog.Int("seq", m.Seq), slog.String("effect_id", id), slog.Int("attempt", lease.Attempt))
	return nil
}
