package sim

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
)

// commandStore stands for a store that commits writes of its own type
// and checks each one (as the Redis store checks its commands' slot).
type commandStore struct {
	idemstore.Store
	checked int
}

type command struct{ ok bool }

func (c *commandStore) Capabilities() idemstore.Capabilities {
	return idemstore.Capabilities{Store: "commands", CompletionWrites: []reflect.Type{reflect.TypeFor[command]()},
		CheckWrite: func(_ idemstore.Lease, writes []any) error {
			c.checked++
			if !writes[len(writes)-1].(command).ok {
				return errors.New("a command the store refuses")
			}
			return nil
		}}
}

// The simulator's wrappers forward what the store declares: a handler
// built on a FaultStore is checked as one built on the store itself, and
// a TxStore declares the Effects it commits besides the store's writes,
// whose own check still runs.
func TestStoreWrappersForwardCapabilities(t *testing.T) {
	w := NewWorld(1)
	noop := func(context.Context, events.SQSMessage) error { return nil }

	bare := &FaultStore{Store: memstore.New(), W: w}
	err := lambdaidem.Check(func() { lambdaidem.SQS(bare, noop, lambdaidem.WithCompletionWrites[Effect]()) })
	var ce *idemstore.ConfigError
	if !errors.As(err, &ce) || !errors.Is(err, idemstore.ErrUnsupportedWrite) || ce.Store != "in-memory" {
		t.Fatalf("Effects declared on a FaultStore over the in-memory store without an applier: %v, want ErrUnsupportedWrite naming it", err)
	}
	applier := &FaultStore{Store: memstore.New(memstore.WithCompletionWrites(&LedgerWrites{Ledger: NewLedger()})), W: w}
	if err := lambdaidem.Check(func() { lambdaidem.SQS(applier, noop, lambdaidem.WithCompletionWrites[Effect]()) }); err != nil {
		t.Fatalf("Effects on the in-memory store that commits them, refused: %v", err)
	}
	if _, declared := idemstore.CapabilitiesOf(&FaultStore{Store: struct{ idemstore.Store }{memstore.New()}, W: w}); declared {
		t.Fatal("a FaultStore over a store that declares nothing declares something")
	}

	inner := &commandStore{Store: memstore.New()}
	tx := &FaultStore{Store: &TxStore{Store: inner, Ledger: NewLedger()}, W: w}
	caps, declared := idemstore.CapabilitiesOf(tx)
	if !declared || !caps.CommitsWrite(reflect.TypeFor[Effect]()) || !caps.CommitsWrite(reflect.TypeFor[command]()) || caps.Store != "commands" {
		t.Fatalf("a TxStore over a store of commands declares %+v, %v; want both writes and the store's name", caps, declared)
	}
	if err := caps.CheckWrite(idemstore.Lease{}, []any{Effect{Key: "k"}}); err != nil || inner.checked != 0 {
		t.Fatalf("an Effect went to the store's own check (%d checks): %v", inner.checked, err)
	}
	if err := caps.CheckWrite(idemstore.Lease{}, []any{Effect{Key: "k"}, command{ok: false}}); err == nil || inner.checked != 1 {
		t.Fatalf("the store's own write skipped its check (%d checks): %v", inner.checked, err)
	}
}
