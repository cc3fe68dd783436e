package memstore

import (
	"context"
	"crypto/rand"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// The operation names passed to the fault hook.
const (
	OpClaim      = "claim"
	OpComplete   = "complete"
	OpFail       = "fail"
	OpDeadLetter = "dead-letter"
	OpExtend     = "extend"
	OpGet        = "get"
	OpDelete     = "delete"
	OpReset      = "reset"
	OpRelease    = "release"
	OpForget     = "forget"
	OpCount      = "count"
	OpList       = "list"
	OpResolve    = "resolve"
	// OpCommit is a commit of the optimistic mode (idemstore.Committer);
	// OpClaimBatch and OpCompleteBatch are batched claims and completions
	// (idemstore.Batcher), one call per batch.
	OpCommit        = "commit"
	OpClaimBatch    = "claim-batch"
	OpCompleteBatch = "complete-batch"
)

// Stats counts the calls a Store answered or refused, one field per
// operation, so tests can assert how many store requests a message cost.
// Calls that failed through the fault hook or a done context count too (a
// real store would have been asked); calls rejected as invalid do not.
type Stats struct {
	Claim, Complete, Fail, DeadLetter, Extend, Get, Delete int
	// Reset counts ResetDeadLetter calls.
	Reset int
	// Release, Forget, Count, List and Resolve count the operator calls
	// (idemstore.Admin); List counts ListOpen sequences, not pages.
	Release, Forget, Count, List, Resolve int
	// Commit counts Commit calls; ClaimBatch and CompleteBatch count
	// batched requests, one per call whatever the batch holds.
	Commit, ClaimBatch, CompleteBatch int
}

// Total is the number of calls of every operation.
func (s Stats) Total() int {
	return s.Claim + s.Complete + s.Fail + s.DeadLetter + s.Extend + s.Get + s.Delete + s.Reset +
		s.Release + s.Forget + s.Count + s.List + s.Resolve + s.Commit + s.ClaimBatch + s.CompleteBatch
}

// Store is an in-memory [idemstore.Store]. The zero value is not usable;
// call [New]. It is safe for concurrent use.
type Store struct {
	mu      sync.Mutex
	records map[id]*idemstore.Record
	stats   Stats
	fault   func(op string) error
	writes  WriteApplier
}

// WriteApplier commits the extra writes of a completion
// (idemstore.CompleteRequest.Writes, added by the handler with
// lambdaidem.AddCompletionWrite) to the effects it keeps: in-memory tables
// a test reads. Package dynamotest's DB is one, for DynamoDB writes.
type WriteApplier interface {
	// ApplyWrites checks every write against the effects as they are and,
	// only if all of them can apply, calls commit and applies them, as one
	// step no reader of the effects can see half of. commit records the
	// completion; the store calls ApplyWrites with its own lock held, and
	// only while the caller's lease is valid, so the completion and its
	// writes are one atomic step fenced by the lease.
	//
	// When a write's own condition fails, ApplyWrites returns an error
	// matching idemstore.ErrWriteRefused; for a write it cannot apply (a
	// type it does not know), one matching idemstore.ErrUnsupportedWrite.
	// Either way commit is not called and nothing applies. It must not
	// call the store.
	ApplyWrites(writes []any, commit func()) error
	// WriteTypes lists the types of write ApplyWrites commits (a type and
	// its pointer are two entries), so the store can declare them before
	// any completion.
	WriteTypes() []reflect.Type
}

// Option configures a Store made by [New].
type Option func(*Store)

// WithCompletionWrites makes the store commit a completion's extra writes
// through a, atomically with the completion and fenced by the lease, as
// the DynamoDB store commits them in one transaction: nothing applies when
// the lease was lost, and a write whose condition fails refuses the whole
// completion. A completion retried after it applied (its answer lost) is
// recognised and does not apply the writes again. Without this option the
// store refuses every completion that carries writes, with
// [idemstore.ErrUnsupportedWrite], and records nothing.
func WithCompletionWrites(a WriteApplier) Option {
	return func(s *Store) { s.writes = a }
}

type id struct{ namespace, key string }

var _ idemstore.Store = (*Store)(nil)

// New returns an empty Store.
func New(opts ...Option) *Store {
	s := &Store{records: make(map[id]*idemstore.Record)}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Stats returns the number of calls per operation so far.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// SetFault installs a hook called before every operation with its name (one
// of the Op constants). When it returns an error the operation records
// nothing and fails with an error that wraps both
// [idemstore.ErrStoreUnavailable] and the hook's error. The hook runs
// outside the store's lock, so it may block (to hold an operation back
// until a test is ready) or call the store. A nil hook removes it.
func (s *Store) SetFault(fault func(op string) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault = fault
}

// begin counts the call and asks the fault hook and the context whether it
// may go on. It must be called without the lock held.
func (s *Store) begin(ctx context.Context, op string) error {
	s.mu.Lock()
	switch op {
	case OpClaim:
		s.stats.Claim++
	case OpComplete:
		s.stats.Complete++
	case OpFail:
		s.stats.Fail++
	case OpDeadLetter:
		s.stats.DeadLetter++
	case OpExtend:
		s.stats.Extend++
	case OpGet:
		s.stats.Get++
	case OpDelete:
		s.stats.Delete++
	case OpReset:
		s.stats.Reset++
	case OpRelease:
		s.stats.Release++
	case OpForget:
		s.stats.Forget++
	case OpCount:
		s.stats.Count++
	case OpList:
		s.stats.List++
	case OpResolve:
		s.stats.Resolve++
	case OpCommit:
		s.stats.Commit++
	case OpClaimBatch:
		s.stats.ClaimBatch++
	case OpCompleteBatch:
		s.stats.CompleteBatch++
	}
	fault := s.fault
	s.mu.Unlock()
	if fault != nil {
		if err := fault(op); err != nil {
			return fmt.Errorf("memstore: %s: %w: %w", op, idemstore.ErrStoreUnavailable, err)
		}
	}
	// A done context fails like a real store would, so a caller that forgot
	// to detach its final write is caught by tests on this store too.
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: %s: %w: %w", op, idemstore.ErrStoreUnavailable, err)
	}
	return nil
}

// validate rejects a request that names no record.
func validate(op, namespace, key string) error {
	switch {
	case namespace == "":
		return fmt.Errorf("memstore: %s: empty namespace: %w", op, idemstore.ErrMissingKey)
	case key == "":
		return fmt.Errorf("memstore: %s: empty key: %w", op, idemstore.ErrMissingKey)
	}
	return nil
}

// ids makes generations and lease tokens: unique within the process,
// which is all an in-memory store needs (no one else can guess into it),
// and cheaper than reading the system's random source per claim.
var ids = struct {
	prefix string
	n      atomic.Uint64
}{prefix: rand.Text()[:10] + "-"}

// newID returns a new identifier for a generation or a lease token.
func newID() string {
	var b [32]byte
	n := copy(b[:], ids.prefix)
	return string(strconv.AppendUint(b[:n], ids.n.Add(1), 36))
}

// copyRecord returns r with its own copy of the result, so neither the
// caller nor the store can change the other's bytes.
func copyRecord(r *idemstore.Record) idemstore.Record {
	c := *r
	c.Result = cloneBytes(r.Result)
	return c
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}
