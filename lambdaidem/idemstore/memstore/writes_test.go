package memstore_test

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/storetest"
)

// insert stores value under name unless name holds one.
type insert struct{ name, value string }

// inserts is the smallest WriteApplier: a map of names to values.
type inserts struct {
	mu     sync.Mutex
	values map[string]string
}

func (a *inserts) WriteTypes() []reflect.Type { return []reflect.Type{reflect.TypeFor[insert]()} }

func (a *inserts) ApplyWrites(writes []any, commit func()) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, w := range writes {
		in, ok := w.(insert)
		if !ok {
			return fmt.Errorf("write %d: %T: %w", i, w, idemstore.ErrUnsupportedWrite)
		}
		if _, taken := a.values[in.name]; taken {
			return fmt.Errorf("write %d: %s is taken: %w", i, in.name, idemstore.ErrWriteRefused)
		}
	}
	commit()
	for _, w := range writes {
		in := w.(insert)
		a.values[in.name] = in.value
	}
	return nil
}

// The in-memory store with an applier commits completion writes as the
// DynamoDB and Redis stores do, with a completion and with a commit.
func TestConformanceCompletionWrites(t *testing.T) {
	a := &inserts{values: map[string]string{}}
	store := memstore.New(memstore.WithCompletionWrites(a))
	storetest.RunCompletionWrites(t, func(*testing.T) idemstore.Store { return store }, storetest.Effects{
		Insert: func(ns, name, value string) any { return insert{ns + "/" + name, value} },
		Read: func(_ context.Context, ns, name string) (string, error) {
			a.mu.Lock()
			defer a.mu.Unlock()
			return a.values[ns+"/"+name], nil
		},
	})
}
