package bench

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/internal/faultproxy"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// PathTxFirst is the first delivery of a transactional handler, the
// design the README recommends for exactly-once: the handler's effect is
// one DynamoDB write committed with the completion (AddCompletionWrite).
// In lease mode that is a claim, then the completion's transaction; in
// the optimistic mode (WithOptimisticCommit), one transaction.
const PathTxFirst = "transactional first delivery"

// Variants of PathTxFirst beside VariantLambdaidem (lease mode) and
// VariantFloor, which on this path is lease mode's floor: a bare claim
// UpdateItem followed by the bare completion transaction with the same
// effect write.
const (
	VariantOptimistic = "lambdaidem, WithOptimisticCommit (Go)"
	VariantOneTx      = "bare floor of the optimistic mode: one transaction (Go SDK)"
)

// TargetOptimisticVsFloor bounds the optimistic mode's transactional first
// delivery against lease mode's floor, at p50.
const TargetOptimisticVsFloor = 0.67

// TargetBatchedVsBatch bounds a 10-record batch with batched writes
// against the same batch claimed and completed one record at a time: no
// slower, at p50 and at p99, as far as a run can tell — the limit is this
// or, when larger, the batch path's A/A noise (the same code measured
// against itself) at that quantile.
const TargetBatchedVsBatch = 1.00

// effectsTable is the handler's own table in the transactional paths,
// keyed by "id".
func createEffectsTable(ctx context.Context, c *dynamodb.Client, table string) error {
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
	})
	if err != nil {
		return fmt.Errorf("bench: create effects table: %w", err)
	}
	return dynamodb.NewTableExistsWaiter(c).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, time.Minute)
}

// effectWrite is the handler's effect: one order row, put unconditionally
// (the record's own condition is what keeps it single).
func effectWrite(table, id string) types.TransactWriteItem {
	return types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(table),
		Item: map[string]types.AttributeValue{
			"id":     s(id),
			"amount": n(42),
		},
	}}
}

// txHandler is the transactional handler of the benchmarks: its one
// effect joins the completion.
func txHandler(effects string) lambdaidem.MessageHandler {
	return func(ctx context.Context, m events.SQSMessage) error {
		return lambdaidem.AddCompletionWrite(ctx, effectWrite(effects, m.MessageId))
	}
}

// txFirst is lease mode's floor of a transactional first delivery: the
// claim, then one TransactWriteItems of the completion (fenced on the
// token, as the store's) and the effect.
func (f *floor) txFirst(ctx context.Context, key, effects string) error {
	token, ok, err := f.claim(ctx, key)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("floor: claim of fresh key %q refused", key)
	}
	now := time.Now()
	_, err = f.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: &types.Update{
			TableName:                aws.String(f.table),
			Key:                      map[string]types.AttributeValue{"pk": s(f.ns + "#" + key)},
			UpdateExpression:         aws.String(floorCompleteUpdate),
			ConditionExpression:      aws.String(floorCompleteCondition),
			ExpressionAttributeNames: names("status", "open_status", "result", "result_until", "expires_at", "updated_at", "lease_token"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":completed":  s("COMPLETED"),
				":inprogress": s("IN_PROGRESS"),
				":token":      s(token),
				":expires_at": n(now.Add(24 * time.Hour).Unix()),
				":now_ms":     n(now.UnixMilli()),
				":now_s":      n(now.Unix()),
			},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}},
		effectWrite(effects, key),
	}})
	if err != nil {
		return fmt.Errorf("floor: complete %q with its effect: %w", key, err)
	}
	return nil
}

// oneTx is the optimistic mode's floor: one TransactWriteItems of the
// fresh COMPLETED record, conditioned on the key being absent (the shape
// of the DynamoDB store's commit), and the effect.
func (f *floor) oneTx(ctx context.Context, key, effects string) error {
	now := time.Now()
	token := rand.Text()
	_, err := f.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		ClientRequestToken: aws.String(token + "-0"),
		TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{
				TableName: aws.String(f.table),
				Item: map[string]types.AttributeValue{
					"pk": s(f.ns + "#" + key), "schema_version": n(1), "status": s("COMPLETED"), "lease_token": s(token),
					"lease_until": n(now.UnixMilli()), "payload_hash": s(f.hash), "message_id": s(key),
					"expires_at": n(now.Add(24 * time.Hour).Unix()), "updated_at": n(now.UnixMilli()),
					"attempts": n(1), "claim": n(1), "takeovers": n(0), "generation": s(token), "first_attempt_at": n(now.UnixMilli()),
				},
				ConditionExpression:                 aws.String("attribute_not_exists(#pk)"),
				ExpressionAttributeNames:            names("pk"),
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
			}},
			effectWrite(effects, key),
		},
	})
	if err != nil {
		return fmt.Errorf("floor: one transaction of %q: %w", key, err)
	}
	return nil
}

// txVariants are the variants of PathTxFirst.
func (b *dynamoBench) txVariants() []variant {
	floor := func(name string, f func(ctx context.Context, key, effects string) error) variant {
		return variant{name, func(ctx context.Context) (time.Duration, error) {
			id := newID()
			ictx, cancel := invocation(ctx)
			defer cancel()
			t0 := time.Now()
			err := f(ictx, id, b.effects)
			return time.Since(t0), err
		}}
	}
	return []variant{
		{VariantLambdaidem, func(ctx context.Context) (time.Duration, error) {
			return b.out.run(ctx, b.hTx, event(newID()), lambdaidem.OutcomeProcessed)
		}},
		{VariantOptimistic, func(ctx context.Context) (time.Duration, error) {
			return b.out.run(ctx, b.hOpt, event(newID()), lambdaidem.OutcomeProcessed)
		}},
		floor(VariantFloor, b.flr.txFirst),
		floor(VariantOneTx, b.flr.oneTx),
	}
}

// writeUnits adds up the write capacity units of the requests a proxy
// forwards, from the requests themselves, for items of at most 1 KB (every
// item of the benchmarks is): a standard write (PutItem, UpdateItem,
// DeleteItem, one PartiQL statement) 1, refused by its condition or not; a
// transactional write 2 per item in the transaction (DynamoDB prepares and
// commits each); reads none.
type writeUnits struct {
	mu    sync.Mutex
	units int
}

func (w *writeUnits) watch(p *faultproxy.Proxy) {
	p.Inject(faultproxy.Fault{Action: faultproxy.Forward, Match: func(r faultproxy.Request) bool {
		n := 0
		switch r.Operation() {
		case "PutItem", "UpdateItem", "DeleteItem", "ExecuteStatement":
			n = 1
		case "TransactWriteItems":
			var in struct{ TransactItems []json.RawMessage }
			_ = json.Unmarshal(r.Body, &in)
			n = 2 * len(in.TransactItems)
		case "BatchExecuteStatement":
			var in struct{ Statements []json.RawMessage }
			_ = json.Unmarshal(r.Body, &in)
			n = len(in.Statements)
		case "BatchWriteItem":
			var in struct{ RequestItems map[string][]json.RawMessage }
			_ = json.Unmarshal(r.Body, &in)
			for _, items := range in.RequestItems {
				n += len(items)
			}
		}
		w.mu.Lock()
		w.units += n
		w.mu.Unlock()
		return false // never applies: the request is only counted
	}})
}

// take returns the units counted since the last take.
func (w *writeUnits) take() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	u := w.units
	w.units = 0
	return u
}

// unitsText formats write units per message.
func unitsText(units, messages int) string {
	if messages == 0 {
		return ""
	}
	return num(float64(units) / float64(messages))
}

// PathBatchedWrites is a 10-record batch of first deliveries through a
// handler built WithBatchedWrites: the batch's claims in two requests side
// by side (two lanes of five), its completions in two more.
const PathBatchedWrites = PathBatch + ", WithBatchedWrites (per message)"

// VariantBatched is the decorator built WithBatchedWrites.
const VariantBatched = "lambdaidem, WithBatchedWrites (Go)"
