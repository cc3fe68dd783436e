package lambdaidemtest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/dynamo/dynamotest"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest"
)

// Orders of one customer whose funds cover them all.
var batchOrders = []string{
	o1,
	`{"order":"o-2","customer":"alice","cents":200}`,
	`{"order":"o-3","customer":"alice","cents":100}`,
	`{"order":"o-4","customer":"alice","cents":50}`,
	`{"order":"o-5","customer":"alice","cents":25}`,
}

// A handler deployed with WithBatchedWrites runs in the kit as deployed:
// the fresh messages of a batch are claimed in one request and completed
// in one more, through the kit's store wrapper, and a transactional
// handler's effects commit exactly once, through the kit's duplicate and
// crash scenarios too.
func TestKitRunsBatchedWrites(t *testing.T) {
	funds := map[string]int{"alice": 1000}
	batched := []lambdaidem.Option{byOrderKey, lambdaidem.WithBatchedWrites(), lambdaidem.WithConcurrency(5)}

	db := newFunds(t, funds)
	store := memstore.New(memstore.WithCompletionWrites(db))
	k := lambdaidemtest.NewWithStore(store, pay(db, true), batched...)
	k.SetTrace(true)
	for _, o := range batchOrders {
		k.Send(o)
	}
	k.Run()
	if err := k.Check(); err != nil {
		t.Fatal(err)
	}
	if err := paidOnce(db, funds, batchOrders)(); err != nil || paymentCount(db) != len(batchOrders) {
		t.Fatalf("%v; %d payments for %d orders\n%s", err, paymentCount(db), len(batchOrders), k.Trace())
	}
	for _, o := range []string{"o-1", "o-2", "o-3", "o-4", "o-5"} {
		if s := k.Status(o); s != lambdaidem.StatusCompleted {
			t.Errorf("%s is %s, want COMPLETED", o, s)
		}
	}
	if st := store.Stats(); st.ClaimBatch == 0 || st.CompleteBatch == 0 {
		t.Fatalf("no batched request reached the store (%d batched claims, %d batched completions, %d single claims): the kit ran the handler without batching\n%s",
			st.ClaimBatch, st.CompleteBatch, st.Claim, k.Trace())
	}

	for _, tc := range []struct {
		name string
		run  func(*lambdaidemtest.Kit)
	}{
		{"delivered twice", func(k *lambdaidemtest.Kit) { k.DeliverTwice(o1) }},
		{"producer duplicate", func(k *lambdaidemtest.Kit) { k.ProducerDuplicate(o1) }},
		{"crash after the effect", func(k *lambdaidemtest.Kit) { k.CrashAfterEffect(o1) }},
		{"lease lost before the completion", func(k *lambdaidemtest.Kit) { k.LeaseLostBeforeCompletion(o1) }},
		{"takeover from a paused holder", func(k *lambdaidemtest.Kit) { k.TakeoverFromPaused(o1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := newFunds(t, funds)
			k := lambdaidemtest.NewWithStore(memstore.New(memstore.WithCompletionWrites(db)), pay(db, true), batched...)
			k.SetTrace(true)
			tc.run(k)
			if err := k.Check(); err != nil {
				t.Fatal(err)
			}
			if err := paidOnce(db, funds, nil)(); err != nil || paymentCount(db) != 1 || k.Status("o-1") != lambdaidem.StatusCompleted {
				t.Errorf("%v; %d payments in %d runs, o-1 %s\n%s", err, paymentCount(db), k.Runs("o-1"), k.Status("o-1"), k.Trace())
			}
		})
	}
}

// The explorer runs a batched transactional handler under the faults it
// draws (batched requests failing, landing late, answered and lost, the
// process killed around them): every order is paid exactly once.
func TestExplorerBatchedWrites(t *testing.T) {
	funds := map[string]int{"alice": 1000}
	var db *dynamotest.DB
	var stores []*memstore.Store
	lambdaidemtest.Explore(t, lambdaidemtest.Exploration{
		Messages: batchOrders, Options: []lambdaidem.Option{byOrderKey, lambdaidem.WithBatchedWrites(), lambdaidem.WithConcurrency(5)}, Scenarios: 200,
		Setup: func() (lambdaidem.MessageHandler, func() error) {
			db = newFunds(t, funds)
			return pay(db, true), paidOnce(db, funds, batchOrders)
		},
		Store: func() lambdaidem.Store {
			s := memstore.New(memstore.WithCompletionWrites(db))
			stores = append(stores, s)
			return s
		},
	})
	batches := 0
	for _, s := range stores {
		st := s.Stats()
		batches += st.ClaimBatch + st.CompleteBatch
	}
	if batches == 0 {
		t.Fatalf("%d scenarios sent no batched request", len(stores))
	}
	t.Logf("%d scenarios sent %d batched requests", len(stores), batches)
}

// What a deployed handler refuses WithBatchedWrites for, the kit refuses
// when it is made, with the same error: a store that cannot batch (even
// though the kit's own wrapper could go through it one item at a time),
// and a heartbeat.
func TestKitRefusesBatchedWritesItCannotKeep(t *testing.T) {
	t.Parallel()
	nop := func(context.Context, events.SQSMessage) error { return nil }
	for _, tc := range []struct {
		name  string
		build func()
		want  error
	}{
		{"a store that does not batch", func() {
			lambdaidemtest.NewWithStore(ownStore{memstore.New()}, nop, byOrderKey, lambdaidem.WithBatchedWrites())
		}, lambdaidem.ErrBatchUnsupported},
		{"with a heartbeat", func() {
			lambdaidemtest.New(nop, byOrderKey, lambdaidem.WithBatchedWrites(), lambdaidem.WithHeartbeat(10*time.Second))
		}, lambdaidem.ErrInvalidOption},
	} {
		err := lambdaidem.Check(tc.build)
		var ce *lambdaidem.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, tc.want) || !strings.Contains(ce.Option, "WithBatchedWrites") {
			t.Errorf("%s: %v, want a ConfigError for WithBatchedWrites wrapping %v", tc.name, err, tc.want)
		}
	}
	// The same store, batching: built.
	if err := lambdaidem.Check(func() { lambdaidemtest.New(nop, byOrderKey, lambdaidem.WithBatchedWrites()) }); err != nil {
		t.Fatalf("WithBatchedWrites on the in-memory store, refused: %v", err)
	}
}
