package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

// CrashExitCode is the exit status of a crash the body asked for.
const CrashExitCode = 3

// Crash points a body can ask for.
const (
	CrashAfterClaim        = "after_claim"
	CrashAfterEffect       = "after_effect"
	CrashDuringCompletion  = "during_completion"
	defaultNamespace       = "chaos"
	modePlain, modeTx      = "plain", "tx"
	modeOptimistic         = "optimistic"
	completedStatusLiteral = `"COMPLETED"`
)

// Body is a message body: the key, and fields that steer the function.
type Body struct {
	Key           string `json:"key"`
	Poison        bool   `json:"poison,omitempty"`
	SleepMS       int    `json:"sleep_ms,omitempty"`
	Crash         string `json:"crash,omitempty"`
	CrashAttempts []int  `json:"crash_attempts,omitempty"`
}

func (b Body) crashes(point string, attempt int) bool {
	if b.Crash != point {
		return false
	}
	if len(b.CrashAttempts) == 0 {
		return attempt == 1
	}
	return slices.Contains(b.CrashAttempts, attempt)
}

func main() {
	logger := slog.New(lambdacontext.NewLogHandler())
	fail := func(msg string, err error) {
		logger.Error(msg, slog.Any("error", err))
		os.Exit(1)
	}
	getenv := func(name string) (string, error) {
		if v := os.Getenv(name); v != "" {
			return v, nil
		}
		return "", fmt.Errorf("%s is not set", name)
	}
	f := &function{log: logger, namespace: os.Getenv("IDEMPOTENCY_NAMESPACE")}
	if f.namespace == "" {
		f.namespace = defaultNamespace
	}
	var err error
	if f.mode, err = getenv("CHAOS_MODE"); err != nil || (f.mode != modePlain && f.mode != modeTx && f.mode != modeOptimistic) {
		fail("configuration", fmt.Errorf("CHAOS_MODE must be %q, %q or %q, got %q", modePlain, modeTx, modeOptimistic, f.mode))
	}
	idemTable, err := getenv("IDEMPOTENCY_TABLE")
	if err != nil {
		fail("configuration", err)
	}
	if f.effects, err = getenv("EFFECTS_TABLE"); err != nil {
		fail("configuration", err)
	}
	maxAttempts := lambdaidem.DefaultMaxAttempts
	if v := os.Getenv("MAX_ATTEMPTS"); v != "" {
		if maxAttempts, err = strconv.Atoi(v); err != nil || maxAttempts < 1 {
			fail("configuration", fmt.Errorf("MAX_ATTEMPTS=%q is not a positive integer", v))
		}
	}
	awsCfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		fail("AWS configuration", err)
	}
	f.crasher = &completionCrasher{log: logger}
	f.db = dynamodb.NewFromConfig(awsCfg,
		dynamo.ClientOptions(dynamo.Tuning{}),
		func(o *dynamodb.Options) {
			f.crasher.next = o.HTTPClient
			o.HTTPClient = f.crasher
		})
	sqsClient := sqs.NewFromConfig(awsCfg)
	opts := []lambdaidem.Option{
		lambdaidem.WithNamespace(f.namespace),
		lambdaidem.WithKeyJSONField("key"),
		lambdaidem.WithLogger(logger),
		lambdaidem.WithMaxAttempts(maxAttempts),
		lambdaidem.WithVisibility(sqsqueue.NewVisibilityChanger(sqsClient)),
	}
	if dlq := os.Getenv("DLQ_URL"); dlq != "" {
		opts = append(opts, lambdaidem.WithDeadLetterSink(sqsqueue.NewSink(sqsClient, dlq)))
	}
	var store idemstore.Store = dynamo.New(f.db, idemTable)
	if os.Getenv("CHAOS_STORE") == "redis" {
		addr, err := getenv("REDIS_ENDPOINT")
		if err != nil {
			fail("configuration", err)
		}
		client := redis.NewClient(&redis.Options{
			Addr: addr,
			// Short, like the DynamoDB store's per-attempt timeout: a hung
			// command fails the record instead of the invocation.
			DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second,
		})
		client.AddHook(f.crasher)
		f.redis = redisstore.New(client, os.Getenv("REDIS_PREFIX"))
		store = f.redis
	}
	if f.mode == modeTx || f.mode == modeOptimistic {
		// The effects commit with the completion: a DynamoDB transaction
		// write, or on Redis a command of the completion's script. A store
		// that could not commit them is refused here, at start.
		if f.redis != nil {
			opts = append(opts, lambdaidem.WithCompletionWrites[redisstore.Command]())
		} else {
			opts = append(opts, lambdaidem.WithCompletionWrites[types.TransactWriteItem]())
		}
	}
	if f.mode == modeOptimistic {
		// A first delivery takes no claim: its commit decides.
		opts = append(opts, lambdaidem.WithOptimisticCommit())
	}
	if os.Getenv("CHAOS_BATCHED") == "1" {
		// Fresh records claimed in batched requests, successes completed
		// likewise. SQS refuses it here with the optimistic mode.
		opts = append(opts, lambdaidem.WithBatchedWrites())
	}
	lambda.Start(lambdaidem.SQS(store, f.handle, opts...))
}

type function struct {
	db        *dynamodb.Client
	redis     *redisstore.Store // the Redis store, when CHAOS_STORE=redis
	effects   string
	namespace string
	mode      string
	log       *slog.Logger
	crasher   *completionCrasher
}

func (f *function) handle(ctx context.Context, msg events.SQSMessage) error {
	var b Body
	if err := json.Unmarshal([]byte(msg.Body), &b); err != nil {
		return lambdaidem.Poison(fmt.Errorf("chaos: body is not JSON: %w", err))
	}
	lease, _ := lambdaidem.LeaseFromContext(ctx)
	// The attempt a crash is asked for: the lease's; in the optimistic
	// mode, whose first delivery holds no lease (attempt 0), the
	// delivery's receive count, so that attempt 1 is the first delivery.
	at := lease.Attempt
	if f.mode == modeOptimistic {
		at, _ = strconv.Atoi(msg.Attributes["ApproximateReceiveCount"])
	}
	if b.crashes(CrashAfterClaim, at) {
		f.crash(ctx, b.Key, CrashAfterClaim, lease.Attempt, 0)
	}
	if b.Poison {
		f.log.InfoContext(ctx, "chaos: poison", slog.String("key", b.Key), slog.Int("attempt", lease.Attempt))
		return lambdaidem.Poison(fmt.Errorf("chaos: key %s is marked poison", b.Key))
	}
	if b.SleepMS > 0 {
		t := time.NewTimer(time.Duration(b.SleepMS) * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("chaos: key %s: %w", b.Key, context.Cause(ctx))
		}
	}
	if err := f.effect(ctx, b.Key, msg.MessageId, lease); err != nil {
		return err
	}
	if b.crashes(CrashAfterEffect, at) {
		f.crash(ctx, b.Key, CrashAfterEffect, lease.Attempt, 0)
	}
	if b.crashes(CrashDuringCompletion, at) {
		f.crasher.arm(f.namespace+"#"+b.Key, b.Key, lease.Attempt)
	}
	return nil
}

// effect writes (plain) or stages (tx) one fresh effect row.
func (f *function) effect(ctx context.Context, key, messageID string, lease idemstore.Lease) error {
	id, err := randomID()
	if err != nil {
		return err
	}
	requestID := ""
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		requestID = lc.AwsRequestID
	}
	item := map[string]types.AttributeValue{
		"pk":         &types.AttributeValueMemberS{Value: key + "#" + id},
		"key":        &types.AttributeValueMemberS{Value: key},
		"effect_id":  &types.AttributeValueMemberS{Value: id},
		"attempt":    &types.AttributeValueMemberN{Value: strconv.Itoa(lease.Attempt)},
		"generation": &types.AttributeValueMemberS{Value: lease.Fence.Generation},
		"claim":      &types.AttributeValueMemberN{Value: strconv.FormatInt(lease.Fence.Claim, 10)},
		"message_id": &types.AttributeValueMemberS{Value: messageID},
		"request_id": &types.AttributeValueMemberS{Value: requestID},
		"mode":       &types.AttributeValueMemberS{Value: f.mode},
	}
	attrs := []slog.Attr{slog.String("key", key), slog.Int("attempt", lease.Attempt), slog.String("effect_id", id)}
	if f.mode != modePlain {
		// Committed with the completion, in one transaction (DynamoDB) or
		// one script (Redis), or not at all.
		var w any = types.TransactWriteItem{Put: &types.Put{TableName: aws.String(f.effects), Item: item}}
		if f.redis != nil {
			w = redisstore.HSet(f.redis.Key(f.namespace, RedisEffectPrefix+key+"#"+id), redisFields(item)...)
		}
		if err := lambdaidem.AddCompletionWrite(ctx, w); err != nil {
			return err
		}
		f.log.LogAttrs(ctx, slog.LevelInfo, "chaos: effect staged", attrs...)
		return nil
	}
	// The SDK's own retries resend the same row ID, so a retried PutItem
	// overwrites its row instead of adding one: only a new attempt of the
	// handler makes a second row.
	_, err = f.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(f.effects), Item: item})
	if err != nil {
		// The write may have applied (a lost response): an effect whose
		// completion will never be recorded.
		f.log.LogAttrs(ctx, slog.LevelWarn, "chaos: effect write failed", append(attrs, slog.String("error", err.Error()))...)
		return fmt.Errorf("chaos: key %s: write effect: %w", key, err)
	}
	f.log.LogAttrs(ctx, slog.LevelInfo, "chaos: effect", attrs...)
	return nil
}

// crash ends the process at once, as a kill or an out-of-memory would.
// status is the HTTP status of the completion's answer (during_completion
// only): 200 means the completion applied before the process died.
func (f *function) crash(ctx context.Context, key, point string, attempt, status int) {
	logCrash(ctx, f.log, key, point, attempt, status)
	os.Exit(CrashExitCode)
}

func logCrash(ctx context.Context, log *slog.Logger, key, point string, attempt, status int) {
	attrs := []slog.Attr{slog.String("key", key), slog.String("point", point), slog.Int("attempt", attempt)}
	if point == CrashDuringCompletion {
		attrs = append(attrs, slog.Int("status", status))
	}
	log.LogAttrs(ctx, slog.LevelWarn, "chaos: crashing", attrs...)
}

// completionCrasher is the DynamoDB client's HTTP client. For a key armed
// by the handler it exits the process once the key's completion request
// has been answered, before the SDK and the library see the answer.
type completionCrasher struct {
	next aws.HTTPClient
	log  *slog.Logger

	mu    sync.Mutex
	armed map[string]armed // quoted partition key -> what to log
}

type armed struct {
	key     string
	attempt int
}

func (c *completionCrasher) arm(pk, key string, attempt int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.armed == nil {
		c.armed = map[string]armed{}
	}
	c.armed[`"`+pk+`"`] = armed{key: key, attempt: attempt}
}

// Do implements aws.HTTPClient.
func (c *completionCrasher) Do(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	n := len(c.armed)
	c.mu.Unlock()
	target := req.Header.Get("X-Amz-Target")
	if n == 0 || req.Body == nil ||
		!(strings.HasSuffix(target, ".UpdateItem") || strings.HasSuffix(target, ".TransactWriteItems") ||
			strings.HasSuffix(target, ".BatchExecuteStatement")) {
		return c.next.Do(req)
	}
	body, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, err
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	var hit *armed
	if bytes.Contains(body, []byte(completedStatusLiteral)) {
		c.mu.Lock()
		for pk, a := range c.armed {
			if bytes.Contains(body, []byte(pk)) {
				hit = &a
				delete(c.armed, pk)
				break
			}
		}
		c.mu.Unlock()
	}
	resp, err := c.next.Do(req)
	if hit != nil {
		status := 0
		if err == nil {
			status = resp.StatusCode
		}
		logCrash(req.Context(), c.log, hit.key, CrashDuringCompletion, hit.attempt, status)
		os.Exit(CrashExitCode)
	}
	return resp, err
}

// RedisEffectPrefix starts the name (Store.Key) of each effect's hash in
// tx mode on the Redis store: fx:KEY#EFFECT_ID. The run reads them back.
const RedisEffectPrefix = "fx:"

// redisFields are an effect row's attributes as HSET's field/value pairs.
func redisFields(item map[string]types.AttributeValue) []string {
	var fv []string
	for _, name := range slices.Sorted(maps.Keys(item)) {
		switch v := item[name].(type) {
		case *types.AttributeValueMemberS:
			fv = append(fv, name, v.Value)
		case *types.AttributeValueMemberN:
			fv = append(fv, name, v.Value)
		}
	}
	return fv
}

// redisCompletion tells whether an EVALSHA or EVAL is a script of the
// Redis store that sets a record COMPLETED for an armed key: the fenced
// write of a completion, or an optimistic commit. After the script come
// the number of keys and the keys, then now, token and target status;
// the record's member (its key) is one of the arguments after them (the
// fourth for a fenced write, the tenth for a commit). It returns the
// armed key it found.
func (c *completionCrasher) redisCompletion(cmd redis.Cmder) (hit *armed) {
	args := cmd.Args()
	if (cmd.Name() != "evalsha" && cmd.Name() != "eval") || len(args) < 3 {
		return nil
	}
	n, err := strconv.Atoi(fmt.Sprint(args[2]))
	status := 3 + n + 2
	if err != nil || len(args) <= status || fmt.Sprint(args[status]) != string(idemstore.StatusCompleted) {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, arg := range args[status+1:] {
		s, ok := arg.(string)
		if !ok {
			continue
		}
		for pk, a := range c.armed {
			if a.key == s {
				delete(c.armed, pk)
				return &a
			}
		}
	}
	return nil
}

// DialHook implements redis.Hook.
func (c *completionCrasher) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessPipelineHook implements redis.Hook: a pipeline holding an armed
// key's completion (the batched completions of WithBatchedWrites) exits
// the process once the pipeline has been answered, before the library
// sees the answers.
func (c *completionCrasher) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var hit *armed
		for _, cmd := range cmds {
			if hit = c.redisCompletion(cmd); hit != nil {
				break
			}
		}
		err := next(ctx, cmds)
		if hit != nil {
			c.exit(ctx, hit, err)
		}
		return err
	}
}

// ProcessHook implements redis.Hook: for a key armed by the handler it
// exits once the key's completion script has been answered (status 200
// when it applied, 0 when it failed), before the library sees the answer.
func (c *completionCrasher) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		hit := c.redisCompletion(cmd)
		err := next(ctx, cmd)
		if hit != nil {
			c.exit(ctx, hit, err)
		}
		return err
	}
}

// exit logs a during_completion crash of a Redis completion that ended
// with err (status 200 without one, 0 with one) and exits.
func (c *completionCrasher) exit(ctx context.Context, hit *armed, err error) {
	status := 200
	if err != nil {
		status = 0
	}
	logCrash(ctx, c.log, hit.key, CrashDuringCompletion, hit.attempt, status)
	os.Exit(CrashExitCode)
}

func randomID() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", errors.Join(errors.New("chaos: random effect ID"), err)
	}
	return hex.EncodeToString(b[:]), nil
}
