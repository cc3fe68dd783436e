package lambdaidem

import (
	"context"
	"fmt"
	"sync"

	"github.com/lambdaidem/go-lambdaidem/internal/seam"
)

type recordStateKey struct{}

// recordState is what a handler can read and add to while it runs. It is
// also the context value that carries it: once given a parent (see
// withRecordState) it is that parent plus itself under recordStateKey, so
// a record costs one allocation for both.
type recordState struct {
	context.Context
	lease  Lease
	mu     sync.Mutex
	writes []any
	// accept checks a completion write's type when it is added, against
	// what this engine's store commits (nil: every type is accepted).
	accept *engine
	// returned is set once the handler returned: later writes are refused.
	returned bool
	// unleased is set for a run of the optimistic mode: lease only bounds
	// its context, no claim took it.
	unleased bool
	// ctxEnded is set when the handler returned an error after its context
	// had ended (deadline, cancellation, lost lease): its outcome is unknown.
	ctxEnded bool
}

// ran notes how the handler ended and passes its error on.
func (st *recordState) ran(err error, ctx context.Context) error {
	st.mu.Lock()
	st.returned = true
	st.mu.Unlock()
	if err != nil && ctx.Err() != nil {
		st.ctxEnded = true
	}
	return err
}

// withRecordState returns ctx carrying st, made into st itself: call it
// once per record state.
func withRecordState(ctx context.Context, st *recordState) context.Context {
	if _, ok := ctx.(interface{ AfterFunc(func()) func() bool }); ok {
		// A deadline context of the engine's clock: keep what tells its
		// children it ended (see seam.WithValue).
		return seam.WithValue(ctx, recordStateKey{}, st)
	}
	st.Context = ctx
	return st
}

// Value returns the record state for its key and asks the parent context
// for any other.
func (st *recordState) Value(key any) any {
	if key == (recordStateKey{}) {
		return st
	}
	return st.Context.Value(key)
}

// String names the context for debugging, as context.WithValue's do.
func (st *recordState) String() string {
	return fmt.Sprintf("%v.WithValue(lambdaidem record state)", st.Context)
}

// LeaseFromContext returns the lease the handler runs under: its token, its
// attempt number (1 on first delivery) and its fencing number. ok is false
// outside a decorated handler, and during a first delivery of the
// optimistic mode (WithOptimisticCommit), which runs without a lease.
func LeaseFromContext(ctx context.Context) (lease Lease, ok bool) {
	st, ok := ctx.Value(recordStateKey{}).(*recordState)
	if !ok || st.unleased {
		return Lease{}, false
	}
	return st.lease, true
}

// KeyFromContext returns the stored key of the record the handler runs
// for (see StoredKey): the lease's key in lease mode, and the key of a
// first delivery of the optimistic mode (WithOptimisticCommit), which runs
// without a lease. ok is false outside a decorated handler.
func KeyFromContext(ctx context.Context) (key string, ok bool) {
	st, ok := ctx.Value(recordStateKey{}).(*recordState)
	if !ok {
		return "", false
	}
	return st.lease.Key, true
}

// AddCompletionWrite adds a write the Store commits atomically with this
// record's completion (for the DynamoDB store, a types.TransactWriteItem):
// the effect and the "done" mark happen together or not at all. It fails
// outside a decorated handler, and once the handler has returned (from a
// goroutine it left running, say): the completion may already be written,
// so such a write could never join it. A write of a type the store does
// not commit (see Capabilities) is refused at once with an error wrapping
// ErrUnsupportedWrite; declare the type with WithCompletionWrites so that
// such a store is refused when the handler is built instead. The writes
// are dropped if the handler returns an error.
func AddCompletionWrite(ctx context.Context, w any) error {
	st, ok := ctx.Value(recordStateKey{}).(*recordState)
	if !ok {
		return fmt.Errorf("lambdaidem: AddCompletionWrite called outside a decorated handler")
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.returned {
		return ErrHandlerReturned
	}
	if st.accept != nil {
		if err := st.accept.acceptWrite(st.lease, st.writes, w); err != nil {
			return err
		}
	}
	st.writes = append(st.writes, w)
	return nil
}

func (st *recordState) takeWrites() []any {
	st.mu.Lock()
	defer st.mu.Unlock()
	w := st.writes
	st.writes = nil
	return w
}
