package dynamo_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/internal/faultproxy"
	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// effects is a second table standing for the handler's own state, keyed by
// "id".
func effectsTable(t *testing.T, client *dynamodb.Client) string {
	t.Helper()
	name := testenv.Name("lambdaidem-effects")
	_, err := client.CreateTable(t.Context(), &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteTable(t.Context(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	return name
}

// putOnce writes an effect item that must not exist yet.
func putOnce(table, id string) types.TransactWriteItem {
	return types.TransactWriteItem{Put: &types.Put{
		TableName:                           aws.String(table),
		Item:                                map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}},
		ConditionExpression:                 aws.String("attribute_not_exists(id)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
}

func exists(t *testing.T, client *dynamodb.Client, table, id string) bool {
	t.Helper()
	out, err := client.GetItem(t.Context(), &dynamodb.GetItemInput{
		TableName:      aws.String(table),
		Key:            map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item != nil
}

// TestTransactionalComplete: the effect and the COMPLETED mark commit
// together or not at all.
func TestTransactionalComplete(t *testing.T) {
	t.Parallel()
	b := setup(t, testTuning)
	fx := effectsTable(t, b.direct)
	ctx := t.Context()
	complete := func(l idemstore.Lease, writes ...any) error {
		return b.store.Complete(ctx, idemstore.CompleteRequest{Lease: l, Now: b.at(1), Result: []byte("r"), ExpiresAt: b.at(3600), Writes: writes})
	}

	t.Run("both commit in one request", func(t *testing.T) {
		c := b.mustClaim(t, b.claimReq("ok", 0))
		b.proxy.ResetCounts()
		w := putOnce(fx, "ok-1")
		if err := complete(c.Lease, w, &types.TransactWriteItem{Put: putOnce(fx, "ok-2").Put}); err != nil {
			t.Fatal(err)
		}
		wantRequests(t, b.proxy, "transactional complete", map[string]int{"TransactWriteItems": 1})
		if !exists(t, b.direct, fx, "ok-1") || !exists(t, b.direct, fx, "ok-2") {
			t.Error("effects missing")
		}
		if r := b.get(t, "ok", 2); r.Status != idemstore.StatusCompleted || string(r.Result) != "r" {
			t.Errorf("record = %+v", r)
		}
	})

	t.Run("a refused write cancels the completion", func(t *testing.T) {
		c := b.mustClaim(t, b.claimReq("dup", 0))
		if _, err := b.direct.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(fx), Item: map[string]types.AttributeValue{
			"id": &types.AttributeValueMemberS{Value: "dup-2"}, "note": &types.AttributeValueMemberS{Value: "already"},
		}}); err != nil {
			t.Fatal(err)
		}
		err := complete(c.Lease, putOnce(fx, "dup-1"), putOnce(fx, "dup-2"))
		var txErr *dynamo.TransactionError
		if !errors.As(err, &txErr) {
			t.Fatalf("Complete = %v, want a *TransactionError", err)
		}
		if errors.Is(err, idemstore.ErrLeaseLost) || errors.Is(err, idemstore.ErrStoreUnavailable) {
			t.Errorf("Complete = %v: the lease was fine and the store answered", err)
		}
		if len(txErr.Failures) != 1 || txErr.Failures[0].Index != 1 || txErr.Failures[0].Code != "ConditionalCheckFailed" {
			t.Fatalf("failures = %+v, want write 1 ConditionalCheckFailed", txErr.Failures)
		}
		if note, _ := txErr.Failures[0].Item["note"].(*types.AttributeValueMemberS); note == nil || note.Value != "already" {
			t.Errorf("the refused write's item (ALL_OLD) = %v", txErr.Failures[0].Item)
		}
		if exists(t, b.direct, fx, "dup-1") {
			t.Error("write 0 applied although the transaction was canceled")
		}
		if r := b.get(t, "dup", 2); r.Status != idemstore.StatusInProgress || r.LeaseToken != c.Lease.Token {
			t.Errorf("record = %+v, want still IN_PROGRESS under our lease", r)
		}
	})

	t.Run("a lost lease cancels the effect", func(t *testing.T) {
		old := b.mustClaim(t, b.claimReq("lost", 0))
		b.mustClaim(t, b.claimReq("lost", 100)) // takeover
		err := complete(old.Lease, putOnce(fx, "lost-1"))
		if !errors.Is(err, idemstore.ErrLeaseLost) {
			t.Fatalf("Complete = %v, want ErrLeaseLost", err)
		}
		if exists(t, b.direct, fx, "lost-1") {
			t.Error("a stale owner's effect applied")
		}
	})

	t.Run("a lost response is our own success", func(t *testing.T) {
		c := b.mustClaim(t, b.claimReq("drop", 0))
		b.proxy.ResetCounts()
		b.proxy.Inject(faultproxy.Fault{Match: faultproxy.Op("TransactWriteItems"), Action: faultproxy.DropResponse, Times: 1})
		if err := complete(c.Lease, putOnce(fx, "drop-1")); err != nil {
			t.Fatalf("Complete after a lost response: %v", err)
		}
		wantRequests(t, b.proxy, "transaction with a lost response", map[string]int{"TransactWriteItems": 2})
		if !exists(t, b.direct, fx, "drop-1") {
			t.Error("effect missing")
		}
		// A repeat outside the SDK's retry (a new ClientRequestToken) is
		// canceled by DynamoDB; our token on the COMPLETED record makes
		// it our own success all the same.
		b.proxy.ResetCounts()
		if err := complete(c.Lease, putOnce(fx, "drop-1")); err != nil {
			t.Fatalf("repeated Complete: %v", err)
		}
		wantRequests(t, b.proxy, "repeated transaction", map[string]int{"TransactWriteItems": 1})
	})

	t.Run("unsupported write type", func(t *testing.T) {
		c := b.mustClaim(t, b.claimReq("unsupported", 0))
		b.proxy.ResetCounts()
		err := complete(c.Lease, putOnce(fx, "u-1"), &dynamodb.PutItemInput{})
		if !errors.Is(err, idemstore.ErrUnsupportedWrite) {
			t.Fatalf("Complete = %v, want ErrUnsupportedWrite", err)
		}
		wantRequests(t, b.proxy, "unsupported write", map[string]int{})
	})
}

// TestTransactionLimits: DynamoDB's limits are enforced before sending.
func TestTransactionLimits(t *testing.T) {
	t.Parallel()
	b := setup(t, testTuning)
	fx := "effects" // never reached: every case is refused before sending
	c := b.mustClaim(t, b.claimReq("k", 0))
	b.proxy.ResetCounts()
	big := make([]byte, 390*1024)
	many := func(n int, f func(i int) types.TransactWriteItem) []any {
		w := make([]any, n)
		for i := range w {
			w[i] = f(i)
		}
		return w
	}
	keyed := func(id string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}}
	}
	for _, tc := range []struct {
		name   string
		writes []any
	}{
		{"100 writes plus the completion", many(100, func(i int) types.TransactWriteItem { return putOnce(fx, fmt.Sprint(i)) })},
		{"over 4 MB", many(11, func(i int) types.TransactWriteItem {
			return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(fx), Item: map[string]types.AttributeValue{
				"id": &types.AttributeValueMemberS{Value: fmt.Sprint(i)}, "blob": &types.AttributeValueMemberB{Value: big},
			}}}
		})},
		{"two actions on one item", []any{
			types.TransactWriteItem{Update: &types.Update{TableName: aws.String(fx), Key: keyed("a"), UpdateExpression: aws.String("SET n = :n"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberN{Value: "1"}}}},
			types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: aws.String(fx), Key: keyed("a"), ConditionExpression: aws.String("attribute_exists(id)")}},
		}},
		{"a put on a keyed item", []any{
			types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(fx), Key: keyed("a")}},
			putOnce(fx, "a"),
		}},
		{"a write on the record itself", []any{
			types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(b.table), Key: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: b.ns + "#k"},
			}}},
		}},
		{"two actions in one write", []any{types.TransactWriteItem{Put: putOnce(fx, "x").Put, Delete: &types.Delete{TableName: aws.String(fx), Key: keyed("y")}}}},
		{"no table", []any{types.TransactWriteItem{Delete: &types.Delete{Key: keyed("y")}}}},
		{"an expression over 4 KB", []any{types.TransactWriteItem{Update: &types.Update{TableName: aws.String(fx), Key: keyed("a"),
			UpdateExpression: aws.String("SET n = :n"), ConditionExpression: aws.String("attribute_exists(id)" + strings.Repeat(" AND attribute_exists(id)", 200))}}}},
		{"a placeholder over 255 bytes", []any{types.TransactWriteItem{Update: &types.Update{TableName: aws.String(fx), Key: keyed("a"),
			UpdateExpression:         aws.String("SET #" + strings.Repeat("n", 300) + " = :n"),
			ExpressionAttributeNames: map[string]string{"#" + strings.Repeat("n", 300): "n"}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// AddCompletionWrite refuses the write that breaks the limit.
			var addErr error
			added := 0
			h := lambdaidem.SQS(b.store, func(ctx context.Context, _ events.SQSMessage) error {
				writes := tc.writes
				if tc.name == "a write on the record itself" {
					// The handler's own record, not the one claimed above.
					key, _ := lambdaidem.KeyFromContext(ctx)
					writes = []any{types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(b.table), Key: map[string]types.AttributeValue{
						"pk": &types.AttributeValueMemberS{Value: b.ns + "-add#" + key},
					}}}}
				}
				for _, w := range writes {
					if addErr = lambdaidem.AddCompletionWrite(ctx, w); addErr != nil {
						return lambdaidem.Poison(addErr)
					}
					added++
				}
				return nil
			}, lambdaidem.WithNamespace(b.ns+"-add"), lambdaidem.WithLogger(slog.New(slog.DiscardHandler)))
			if _, err := h(t.Context(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: tc.name, Body: "{}"}}}); err != nil && !errors.As(err, new(*lambdaidem.BatchError)) {
				t.Fatal(err)
			}
			if !errors.Is(addErr, dynamo.ErrTransactionLimit) || added != len(tc.writes)-1 {
				t.Errorf("AddCompletionWrite refused write %d of %d with %v; want the last, with ErrTransactionLimit", added, len(tc.writes), addErr)
			}
			// The store refuses the same writes when they are sent.
			err := b.store.Complete(t.Context(), idemstore.CompleteRequest{Lease: c.Lease, Now: b.at(1), ExpiresAt: b.at(3600), Writes: tc.writes})
			if !errors.Is(err, dynamo.ErrTransactionLimit) {
				t.Fatalf("Complete = %v, want ErrTransactionLimit", err)
			}
			t.Log(err)
		})
	}
	if n := b.proxy.Count("TransactWriteItems"); n != 0 {
		t.Errorf("%d transactions sent, want 0", n)
	}
	// 99 writes plus the completion is the maximum, and works.
	fxReal := effectsTable(t, b.direct)
	writes := many(99, func(i int) types.TransactWriteItem { return putOnce(fxReal, fmt.Sprint(i)) })
	if err := b.store.Complete(t.Context(), idemstore.CompleteRequest{Lease: c.Lease, Now: b.at(1), ExpiresAt: b.at(3600), Writes: writes}); err != nil {
		t.Fatalf("Complete with 99 writes: %v", err)
	}
}
