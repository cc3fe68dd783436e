package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	dbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/dynamo/dynamotest"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest"
)

// These tests run the function's own handler, with its own options, on
// lambdaidemtest's simulated queue and store: no DynamoDB, no SQS, no
// sleeps. The tests in orders_test.go run the same handler against the
// local services.

// kitFunction returns a Kit over the orders handler whose plain-mode
// effect rows go to the returned slice (their order IDs).
func kitFunction(t *testing.T, maxAttempts int) (*lambdaidemtest.Kit, *[]string) {
	t.Helper()
	rows := &[]string{}
	handle, opts := NewMessageHandler(Config{Namespace: DefaultNamespace, MaxAttempts: maxAttempts, EffectMode: EffectModePlain}, Deps{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		WriteEffect: func(_ context.Context, row map[string]dbtypes.AttributeValue) error {
			*rows = append(*rows, row[attrOrderID].(*dbtypes.AttributeValueMemberS).Value)
			return nil
		},
	})
	return lambdaidemtest.New(handle, opts...), rows
}

func TestKitDuplicatesHaveOneEffect(t *testing.T) {
	const body = `{"order_id":"o-1"}`
	for name, scenario := range map[string]func(*lambdaidemtest.Kit){
		"delivered twice":           func(k *lambdaidemtest.Kit) { k.DeliverTwice(body) },
		"producer duplicate":        func(k *lambdaidemtest.Kit) { k.ProducerDuplicate(body) },
		"redelivered while running": func(k *lambdaidemtest.Kit) { k.RedeliverWhileRunning(body) },
	} {
		t.Run(name, func(t *testing.T) {
			k, rows := kitFunction(t, 0)
			scenario(k)
			if len(*rows) != 1 || k.Runs("o-1") != 1 {
				t.Errorf("%d effect rows in %d runs, want 1 (outcomes %v)", len(*rows), k.Runs("o-1"), k.Outcomes("o-1"))
			}
			if err := k.Check(); err != nil {
				t.Error(err)
			}
		})
	}
}

// A crash between the plain-mode effect and the completion repeats the
// effect: the gap EFFECT_MODE=transactional closes (below on the kit's
// in-memory tables; orders_test.go shows it on DynamoDB Local).
func TestKitCrashAfterAPlainEffectRepeatsIt(t *testing.T) {
	k, rows := kitFunction(t, 0)
	k.CrashAfterEffect(`{"order_id":"o-1"}`)
	if len(*rows) != 2 || k.Status("o-1") != lambdaidem.StatusCompleted {
		t.Errorf("%d effect rows, o-1 %s: want 2 rows and COMPLETED", len(*rows), k.Status("o-1"))
	}
}

// In transactional mode the row commits with the completion: on the kit's
// in-memory tables, a crash after the handler leaves one row, although the
// handler ran twice.
func TestKitCrashAfterATransactionalEffectIsOnce(t *testing.T) {
	db := dynamotest.New(dynamotest.Table{Name: "effects", HashKey: attrPK})
	handle, opts := NewMessageHandler(Config{Namespace: DefaultNamespace, EffectMode: EffectModeTransactional, EffectsTable: "effects"}, Deps{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	k := lambdaidemtest.NewWithStore(memstore.New(memstore.WithCompletionWrites(db)), handle, opts...)
	k.CrashAfterEffect(`{"order_id":"o-1"}`)
	if rows := db.Items("effects"); len(rows) != 1 || k.Runs("o-1") != 2 || k.Status("o-1") != lambdaidem.StatusCompleted {
		t.Errorf("%d effect rows in %d runs, o-1 %s: want 1 row after 2 runs, COMPLETED", len(rows), k.Runs("o-1"), k.Status("o-1"))
	}
	if err := k.Check(); err != nil {
		t.Error(err)
	}
}

func TestKitPoisonGoesToDLQWithReason(t *testing.T) {
	k, rows := kitFunction(t, 0)
	k.Poison(`{"order_id":"o-1","poison":true}`)
	k.Poison(`not json`)
	dl := k.DeadLetters()
	if len(dl) != 2 || len(*rows) != 0 {
		t.Fatalf("dead letters %+v, %d rows: want two copies, no effect", dl, len(*rows))
	}
	if dl[0].Reason != lambdaidem.ReasonPoison || dl[0].Key != "o-1" || !strings.Contains(dl[0].Error, "marked poison") {
		t.Errorf("first copy %+v, want poison of o-1", dl[0])
	}
	if dl[1].Reason != lambdaidem.ReasonMalformedBody {
		t.Errorf("second copy %+v, want malformed_body", dl[1])
	}
	k.ExpectDeadLetter("o-1", lambdaidem.ReasonPoison)
	k.ExpectDeadLetter("", lambdaidem.ReasonMalformedBody)
	if err := k.Check(); err != nil {
		t.Error(err)
	}
}

func TestKitFailuresThenSuccessHaveOneEffect(t *testing.T) {
	k, rows := kitFunction(t, 0)
	k.Send(`{"order_id":"o-1","fail_times":2}`)
	k.Run()
	if len(*rows) != 1 || k.Runs("o-1") != 3 {
		t.Errorf("%d rows in %d runs, want 1 row after 3 runs (outcomes %v)", len(*rows), k.Runs("o-1"), k.Outcomes("o-1"))
	}
	k.ExpectFailure("o-1")
	if err := k.Check(); err != nil {
		t.Error(err)
	}
}

func TestKitTooManyFailuresGoToDLQ(t *testing.T) {
	k, rows := kitFunction(t, 2)
	k.Send(`{"order_id":"o-1","fail_times":5}`)
	k.Run()
	dl := k.DeadLetters()
	if len(dl) != 1 || dl[0].Reason != lambdaidem.ReasonMaxAttempts || dl[0].Attempts != 2 || len(*rows) != 0 {
		t.Errorf("dead letters %+v, %d rows: want one max_attempts copy after 2 attempts", dl, len(*rows))
	}
	k.ExpectDeadLetter("o-1", lambdaidem.ReasonMaxAttempts)
	if err := k.Check(); err != nil {
		t.Error(err)
	}
}
