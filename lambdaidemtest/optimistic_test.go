package lambdaidemtest_test

import (
	"testing"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest"
)

// The kit runs a transactional handler in the optimistic mode
// (WithOptimisticCommit): its effect commits exactly once through the
// kit's duplicate and crash scenarios.
func TestOptimisticHandlerExactlyOnce(t *testing.T) {
	funds := map[string]int{"alice": 1000}
	for _, tc := range []struct {
		name string
		run  func(*lambdaidemtest.Kit)
	}{
		{"delivered once", func(k *lambdaidemtest.Kit) { k.Send(o1); k.Run() }},
		{"delivered twice", func(k *lambdaidemtest.Kit) { k.DeliverTwice(o1) }},
		{"producer duplicate", func(k *lambdaidemtest.Kit) { k.ProducerDuplicate(o1) }},
		{"crash after the effect", func(k *lambdaidemtest.Kit) { k.CrashAfterEffect(o1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := newFunds(t, funds)
			k := lambdaidemtest.NewWithStore(memstore.New(memstore.WithCompletionWrites(db)), pay(db, true), byOrderKey, lambdaidem.WithOptimisticCommit())
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
