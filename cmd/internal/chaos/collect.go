package chaos

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/lambdaidem/go-lambdaidem/cmd/internal/harness"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
)

// effectRow is one row of the effects table: one execution of the effect.
type effectRow struct {
	key       string
	attempt   int // 0: an optimistic first delivery, which holds no lease
	messageID string
	requestID string
}

// dlqEntry is one message of the DLQ as sqsqueue.Parse reads it.
type dlqEntry struct {
	key      string
	reason   idemstore.Reason
	attempts int
	parsed   bool
}

// facts are what the run left behind: the ground truth the invariants are
// checked against.
type facts struct {
	effects map[string][]effectRow // key -> rows
	dlq     []dlqEntry
	records map[string]idemstore.Record // key -> idempotency record, if any
}

// collect reads the run's results and builds the report's observations.
func (r *run) collect(ctx context.Context) (Report, error) {
	f := facts{effects: map[string][]effectRow{}}
	var redisStore *redisstore.Store
	if r.cfg.Store == StoreRedis {
		client := redis.NewClient(&redis.Options{Addr: r.cfg.RedisAddr})
		defer client.Close()
		redisStore = redisstore.New(client, r.h.Prefix)
	}
	var err error
	if redisStore != nil && r.cfg.Mode.committed() {
		err = redisEffects(ctx, redisStore, func(h map[string]string) {
			row := effectRow{key: h["key"], messageID: h["message_id"], requestID: h["request_id"]}
			row.attempt, _ = strconv.Atoi(h["attempt"])
			f.effects[row.key] = append(f.effects[row.key], row)
		})
	} else {
		err = harness.ScanTable(ctx, r.h.DynamoDB, r.h.EffectsTable(""), 4, func(it harness.Item) {
			row := effectRow{key: harness.Str(it["key"]), messageID: harness.Str(it["message_id"]), requestID: harness.Str(it["request_id"])}
			row.attempt, _ = strconv.Atoi(harness.Num(it["attempt"]))
			f.effects[row.key] = append(f.effects[row.key], row)
		})
	}
	if err != nil {
		return Report{}, err
	}
	dlq, err := r.h.ReadDLQ(ctx)
	if err != nil {
		return Report{}, err
	}
	for _, d := range dlq {
		if !d.Library {
			f.dlq = append(f.dlq, dlqEntry{})
			continue
		}
		f.dlq = append(f.dlq, dlqEntry{key: d.Key, reason: d.Reason, attempts: d.Attempts, parsed: true})
	}
	store := r.h.Store()
	if redisStore != nil {
		store = redisStore
	}
	if f.records, err = harness.ReadRecords(ctx, store, Namespace, r.workload.Keys()); err != nil {
		return Report{}, err
	}
	return r.report(f), nil
}

// redisEffects reads the effects tx (or optimistic) mode committed on the Redis store:
// one hash per effect, named by the function's Store.Key(Namespace,
// "fx:KEY#ID"), read with SCAN and HGETALL.
func redisEffects(ctx context.Context, store *redisstore.Store, row func(map[string]string)) error {
	client := store.Client()
	iter := client.Scan(ctx, 0, store.Key(Namespace, "fx:*"), 1000).Iterator()
	for iter.Next(ctx) {
		h, err := client.HGetAll(ctx, iter.Val()).Result()
		if err != nil {
			return fmt.Errorf("chaos: read effect %s: %w", iter.Val(), err)
		}
		row(h)
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("chaos: list the effects on redis: %w", err)
	}
	return nil
}
