package lambdaidemtest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest"
)

// ownStore is a user's store that declares nothing: the in-memory store
// behind a type of its own.
type ownStore struct{ lambdaidem.Store }

// A transactional handler declared with WithCompletionWrites is refused
// when the kit is made on a store that cannot commit its writes, with the
// error a deployed handler gets, naming the store; on a store that
// commits them it is built.
func TestKitRefusesWritesItsStoreCannotCommit(t *testing.T) {
	t.Parallel()
	db := newFunds(t, map[string]int{"alice": 1000})
	declared := lambdaidem.WithCompletionWrites[types.TransactWriteItem]()
	for name, build := range map[string]func(){
		"New":                        func() { lambdaidemtest.New(pay(db, true), byOrderKey, declared) },
		"NewWithStore(memstore.New)": func() { lambdaidemtest.NewWithStore(memstore.New(), pay(db, true), byOrderKey, declared) },
	} {
		err := lambdaidem.Check(build)
		var ce *lambdaidem.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, lambdaidem.ErrUnsupportedWrite) || ce.Store != "in-memory" || ce.Option != "WithCompletionWrites[types.TransactWriteItem]" {
			t.Errorf("%s with a transactional handler: %v, want a ConfigError for WithCompletionWrites[types.TransactWriteItem] naming the in-memory store, wrapping ErrUnsupportedWrite", name, err)
		}
	}

	// With an applier that commits DynamoDB writes, the kit is built and
	// the writes commit with the completion.
	k := lambdaidemtest.NewWithStore(memstore.New(memstore.WithCompletionWrites(db)), pay(db, true), byOrderKey, declared)
	k.Send(o1)
	k.Run()
	if err := k.Check(); err != nil {
		t.Fatal(err)
	}
	if n := paymentCount(db); n != 1 {
		t.Fatalf("%d payments after one order, want 1", n)
	}

	// A store of the user's own that declares nothing is not checked:
	// the kit does not take "declares nothing" for "commits nothing".
	if err := lambdaidem.Check(func() {
		lambdaidemtest.NewWithStore(ownStore{memstore.New()}, func(context.Context, events.SQSMessage) error { return nil }, declared)
	}); err != nil {
		t.Fatalf("a store that declares nothing, refused: %v", err)
	}
}
