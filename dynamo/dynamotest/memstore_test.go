package dynamotest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/dynamo/dynamotest"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/storetest"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func claim(t *testing.T, st *memstore.Store, key string, now time.Time) idemstore.Lease {
	t.Helper()
	res, err := st.Claim(context.Background(), idemstore.ClaimRequest{Namespace: "ns", Key: key, PayloadHash: "h", MessageID: "m",
		Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)})
	if err != nil || !res.Claimed {
		t.Fatalf("claim %s: %v %+v", key, err, res)
	}
	return res.Lease
}

func complete(st *memstore.Store, l idemstore.Lease, now time.Time, writes ...any) error {
	return st.Complete(context.Background(), idemstore.CompleteRequest{Lease: l, Now: now, ExpiresAt: now.Add(time.Hour), Writes: writes})
}

func status(t *testing.T, st *memstore.Store, key string, now time.Time) idemstore.Status {
	t.Helper()
	rec, err := st.Get(context.Background(), idemstore.GetRequest{Namespace: "ns", Key: key, Now: now})
	if err != nil {
		return ""
	}
	return rec.Status
}

// The in-memory store commits a completion and its DynamoDB writes as one
// step fenced by the lease, as the DynamoDB store's transaction does.
func TestMemstoreCommitsWritesWithTheCompletion(t *testing.T) {
	ledger := func(order string) types.TransactWriteItem {
		return put("ledger", with(entry("a1", order), "amount", n("5")), "attribute_not_exists(entry)", nil, nil)
	}
	t.Run("applied together, once", func(t *testing.T) {
		db := dynamotest.New(schema...)
		st := memstore.New(memstore.WithCompletionWrites(db))
		l := claim(t, st, "o-1", t0)
		if err := complete(st, l, t0, ledger("o-1")); err != nil {
			t.Fatal(err)
		}
		// A retry of the same completion (its answer lost) succeeds and
		// applies nothing again.
		if err := complete(st, l, t0.Add(time.Second), ledger("o-1")); err != nil {
			t.Fatalf("retried completion: %v", err)
		}
		if len(db.Items("ledger")) != 1 || status(t, st, "o-1", t0) != idemstore.StatusCompleted {
			t.Errorf("%d entries, %s", len(db.Items("ledger")), status(t, st, "o-1", t0))
		}
	})
	t.Run("lease lost: nothing applies", func(t *testing.T) {
		db := dynamotest.New(schema...)
		st := memstore.New(memstore.WithCompletionWrites(db))
		stale := claim(t, st, "o-1", t0)
		// The lease runs out and another holder takes the key over.
		res, err := st.Claim(context.Background(), idemstore.ClaimRequest{Namespace: "ns", Key: "o-1", PayloadHash: "h", MessageID: "m2",
			Now: t0.Add(2 * time.Minute), LeaseUntil: t0.Add(3 * time.Minute), ExpiresAt: t0.Add(time.Hour)})
		if err != nil || !res.Claimed {
			t.Fatalf("takeover: %v %+v", err, res)
		}
		err = complete(st, stale, t0.Add(2*time.Minute), ledger("o-1"))
		if !errors.Is(err, idemstore.ErrLeaseLost) || len(db.Items("ledger")) != 0 {
			t.Fatalf("stale completion: %v, %d entries", err, len(db.Items("ledger")))
		}
		if err := complete(st, res.Lease, t0.Add(2*time.Minute), ledger("o-1")); err != nil || len(db.Items("ledger")) != 1 {
			t.Errorf("new holder: %v, %d entries", err, len(db.Items("ledger")))
		}
	})
	t.Run("a refused condition refuses the completion", func(t *testing.T) {
		db := dynamotest.New(schema...)
		st := memstore.New(memstore.WithCompletionWrites(db))
		l := claim(t, st, "o-2", t0)
		if err := complete(st, l, t0, ledger("o-1")); err != nil {
			t.Fatal(err)
		}
		l2 := claim(t, st, "o-3", t0)
		debit := upd("balances", acct, "SET amount = amount - :d", "amount >= :d", nil, vals(":d", n("5")))
		err := complete(st, l2, t0, ledger("o-3"), debit)
		if !errors.Is(err, idemstore.ErrWriteRefused) || status(t, st, "o-3", t0) != idemstore.StatusInProgress || len(db.Items("ledger")) != 1 {
			t.Errorf("refused: %v, o-3 %s, %d entries", err, status(t, st, "o-3", t0), len(db.Items("ledger")))
		}
	})
	t.Run("without an applier writes are refused", func(t *testing.T) {
		st := memstore.New()
		l := claim(t, st, "o-1", t0)
		if err := complete(st, l, t0, ledger("o-1")); !errors.Is(err, idemstore.ErrUnsupportedWrite) || status(t, st, "o-1", t0) != idemstore.StatusInProgress {
			t.Errorf("%v, %s", err, status(t, st, "o-1", t0))
		}
	})
}

// The in-memory store with a DB passes the completion-write conformance
// cases the DynamoDB and Redis stores pass: each effect a Put of its own
// table conditioned on attribute_not_exists.
func TestMemstoreConformanceCompletionWrites(t *testing.T) {
	db := dynamotest.New(dynamotest.Table{Name: "effects", HashKey: "pk"})
	pk := func(ns, name string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: ns + "/" + name}}
	}
	storetest.RunCompletionWrites(t, func(*testing.T) idemstore.Store { return memstore.New(memstore.WithCompletionWrites(db)) }, storetest.Effects{
		Insert: func(ns, name, value string) any {
			item := pk(ns, name)
			item["value"] = &types.AttributeValueMemberS{Value: value}
			return types.TransactWriteItem{Put: &types.Put{TableName: aws.String("effects"), Item: item, ConditionExpression: aws.String("attribute_not_exists(pk)")}}
		},
		Read: func(_ context.Context, ns, name string) (string, error) {
			if v, ok := db.Item("effects", pk(ns, name))["value"].(*types.AttributeValueMemberS); ok {
				return v.Value, nil
			}
			return "", nil
		},
	})
}
