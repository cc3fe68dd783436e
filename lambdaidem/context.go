package lambdaidem

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"

	"github.com/lambdaidem/go-lambdaidem/internal/mutant"
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

// EffectKey returns a key for the handler's effect, to pass downstream
// wherever a system deduplicates what it receives: an API's
// Idempotency-Key header, the next message's idempotency key, a FIFO
// queue's MessageDeduplicationId. Every attempt at the same work gets the
// same key, so the downstream system, not only this library, sees a
// repeat as one: the email API that answered 504 after sending the email
// recognises the retry's request and does not send it twice.
//
// The key is EffectKeyOf the record's namespace, stored key and
// generation (Lease.Fence.Generation). It is the same across redeliveries,
// retries after a failure, takeovers of an abandoned lease and an
// operator's redrive of a dead-lettered message (its reset keeps the
// generation) when the key comes from the body or an attribute: keyed by
// the message ID or the FIFO deduplication ID (the default, and
// WithKeyDeduplicationID), the redriven copy is a new message with a new
// key, a new record and a new effect key. It is another one once the
// record is gone: forgotten by an
// operator or expired after its retention, the key's next message starts a
// new generation, and is new work downstream too.
//
// ok is false outside a decorated handler, and during a first delivery of
// the optimistic mode (WithOptimisticCommit): that run holds no claim, and
// no generation exists until its commit writes one. The mode is for
// handlers whose only effects are completion writes; a handler with an
// effect downstream runs in lease mode, where every run has a key.
func EffectKey(ctx context.Context) (key string, ok bool) {
	st, ok := ctx.Value(recordStateKey{}).(*recordState)
	if !ok || st.unleased || st.lease.Fence.Generation == "" {
		return "", false
	}
	gen := st.lease.Fence.Generation
	if mutant.On("effect-key-per-claim") {
		gen += "/" + strconv.FormatInt(st.lease.Fence.Claim, 10) // the bug: a new key per claim
	}
	return EffectKeyOf(st.lease.Namespace, st.lease.Key, gen), true
}

// EffectKeyOf is EffectKey for a record's namespace, stored key and
// generation (Record.Namespace, Record.Key, Record.Fence.Generation), for
// tools that reconcile an uncertain record against a downstream system.
// It is a UUID (RFC 9562, version 8) whose 122 free bits are the start of
// the SHA-256 digest of the three, lower-case hex with hyphens: 36
// characters that an Idempotency-Key header, a FIFO queue's
// MessageDeduplicationId (at most 128 characters) and APIs that insist on
// a UUID all accept. Two records share one only by a collision of those
// 122 bits.
func EffectKeyOf(namespace, storedKey, generation string) string {
	h := sha256.New()
	for _, part := range []string{"lambdaidem effect key v1", namespace, storedKey, generation} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | 0x80 // version 8
	u[8] = u[8]&0x3f | 0x80 // the RFC 9562 variant
	x := hex.EncodeToString(u[:])
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
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
