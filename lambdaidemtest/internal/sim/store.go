package sim

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// StoreFaults are the store's failure modes, as probabilities per call
// and durations of world time.
type StoreFaults struct {
	// ErrBefore fails a call before it applies.
	ErrBefore float64
	// LostAfter applies a write and then loses its answer: the caller sees
	// an error and (as an SDK would) retries.
	LostAfter float64
	// Throttle fails a call as throttled, before it applies.
	Throttle float64
	// Latency is the most a request (and, separately, its answer) travels.
	Latency time.Duration
	// Late delivers a write after the caller stopped waiting: the request
	// is held in the network for up to LateBy and applies then, whether or
	// not its sender is still alive (a paused or dead instance's write
	// landing after a takeover).
	Late   float64
	LateBy time.Duration
	// OutageFrom and OutageFor make every call fail for a while.
	OutageFrom, OutageFor time.Duration
	// MarkErr fails a final dead-letter mark (the write after the copy
	// was sent) before it applies, as unavailable: the store going away
	// between the send and the mark.
	MarkErr float64 `json:",omitempty"`
}

// errFault is what the fault layer's errors wrap, besides
// idemstore.ErrStoreUnavailable.
var errFault = errors.New("simulated store fault")

// FaultStore puts a idemstore.Store behind faults in world time. Every
// call may park the calling task (latency), which is where the world runs
// other invocations in between.
type FaultStore struct {
	idemstore.Store
	W      *World
	Faults StoreFaults
	// Kill, when set, is asked before (applied=false) and after a call
	// applied whether to kill the calling process there.
	Kill func(op string, applied bool) bool
	// OnClaim observes every claim that applied.
	OnClaim func(req idemstore.ClaimRequest, res idemstore.ClaimResult)
	// OnDelete observes every delete that applied.
	OnDelete func(namespace, key string)
	// OnComplete observes every completion that applied.
	OnComplete func(req idemstore.CompleteRequest)
	// OnCommit observes every commit of the optimistic mode the store
	// answered, applied or refused, with the record it met (before, or
	// the error reading it).
	OnCommit func(req idemstore.CommitRequest, res idemstore.CommitResult, before idemstore.Record, beforeErr error)
	// OnDeadLetter observes every dead-letter write that applied: a
	// pending mark or the final one.
	OnDeadLetter func(req idemstore.DeadLetterRequest)
	// OnExtendRefused observes every lease extension the store refused
	// (idemstore.ErrLeaseLost), as the answer reaches the caller.
	OnExtendRefused func(l idemstore.Lease)
	// OnExtend, when set, observes every extension as it is sent, and
	// the function it returns the answer as it reaches the caller (never,
	// if the caller is killed on the way).
	OnExtend func(req idemstore.ExtendRequest) func(err error)
	Calls    int
	Faulted  int
	// Batches counts the ClaimBatch and CompleteBatch requests (each is
	// one of Calls), KeyTwice the ClaimBatch requests naming a key twice.
	Batches, KeyTwice int
}

// Unwrap returns the store behind the faults, whose capabilities
// (idemstore.CapabilitiesOf) are the FaultStore's: a handler built on it
// is checked as one built on the store itself.
func (s *FaultStore) Unwrap() idemstore.Store { return s.Store }

func (s *FaultStore) travel() {
	if s.Faults.Latency > 0 {
		if d := time.Duration(s.W.rng.Int64N(int64(s.Faults.Latency))); d > 0 {
			s.W.Sleep(d)
		}
	}
}

func (s *FaultStore) killHere(op string, applied bool) {
	if s.Kill == nil || s.W.cur == nil || s.W.cur.owner == nil || !s.Kill(op, applied) {
		return
	}
	when := "before"
	if applied {
		when = "after"
	}
	s.W.Logf("kill %s %s store %s", s.W.cur.owner.Name, when, op)
	s.W.KillCurrent()
}

// call runs apply with the faults drawn for this call.
func (s *FaultStore) call(op string, write bool, apply func()) error {
	s.Calls++
	w := s.W
	f := s.Faults
	s.killHere(op, false)
	s.travel()
	since := w.now.Sub(Epoch)
	if f.OutageFor > 0 && since >= f.OutageFrom && since < f.OutageFrom+f.OutageFor {
		s.Faulted++
		return fmt.Errorf("sim store %s: outage: %w: %w", op, idemstore.ErrStoreUnavailable, errFault)
	}
	if f.ErrBefore > 0 && w.rng.Float64() < f.ErrBefore {
		s.Faulted++
		return fmt.Errorf("sim store %s: %w: %w", op, idemstore.ErrStoreUnavailable, errFault)
	}
	if f.Throttle > 0 && w.rng.Float64() < f.Throttle {
		s.Faulted++
		return fmt.Errorf("sim store %s: ThrottlingException: %w: %w", op, idemstore.ErrStoreUnavailable, errFault)
	}
	if write && f.Late > 0 && w.cur != nil && w.rng.Float64() < f.Late {
		// The request is held in the network; the caller gives up on it.
		d := time.Duration(w.rng.Int64N(int64(max(f.LateBy, time.Millisecond))))
		w.Logf("store %s held in the network for %s", op, d)
		w.At(d, nil, func() { w.Logf("late store %s lands", op); apply() })
		s.Faulted++
		return fmt.Errorf("sim store %s: request timed out: %w: %w", op, idemstore.ErrStoreUnavailable, errFault)
	}
	apply()
	s.killHere(op, true)
	s.travel()
	if write && f.LostAfter > 0 && w.rng.Float64() < f.LostAfter {
		s.Faulted++
		w.Logf("store %s applied, answer lost", op)
		return fmt.Errorf("sim store %s: answer lost: %w: %w", op, idemstore.ErrStoreUnavailable, errFault)
	}
	return nil
}

// Claim implements idemstore.Store.
func (s *FaultStore) Claim(ctx context.Context, req idemstore.ClaimRequest) (res idemstore.ClaimResult, err error) {
	var aerr error
	ferr := s.call("claim", true, func() {
		res, aerr = s.Store.Claim(context.WithoutCancel(ctx), req)
		if aerr == nil && res.Claimed && s.OnClaim != nil {
			s.OnClaim(req, res)
		}
	})
	if ferr != nil {
		return idemstore.ClaimResult{}, ferr
	}
	return res, aerr
}

func (s *FaultStore) write(op string, ctx context.Context, f func(context.Context) error) error {
	var aerr error
	ferr := s.call(op, true, func() { aerr = f(context.WithoutCancel(ctx)) })
	if ferr != nil {
		return ferr
	}
	return aerr
}

// Complete implements idemstore.Store.
func (s *FaultStore) Complete(ctx context.Context, req idemstore.CompleteRequest) error {
	return s.write("complete", ctx, func(c context.Context) error {
		err := s.Store.Complete(c, req)
		if err == nil && s.OnComplete != nil {
			s.OnComplete(req)
		}
		return err
	})
}

// Fail implements idemstore.Store.
func (s *FaultStore) Fail(ctx context.Context, req idemstore.FailRequest) error {
	return s.write("fail", ctx, func(c context.Context) error { return s.Store.Fail(c, req) })
}

// DeadLetter implements idemstore.Store.
func (s *FaultStore) DeadLetter(ctx context.Context, req idemstore.DeadLetterRequest) error {
	if !req.Pending && s.Faults.MarkErr > 0 && s.W.rng.Float64() < s.Faults.MarkErr {
		s.Calls++
		s.Faulted++
		s.travel()
		return fmt.Errorf("sim store dead-letter mark: %w: %w", idemstore.ErrStoreUnavailable, errFault)
	}
	return s.write("dead-letter", ctx, func(c context.Context) error {
		err := s.Store.DeadLetter(c, req)
		if err == nil && s.OnDeadLetter != nil {
			s.OnDeadLetter(req)
		}
		return err
	})
}

// Extend implements idemstore.Store.
func (s *FaultStore) Extend(ctx context.Context, req idemstore.ExtendRequest) error {
	answered := func(error) {}
	if s.OnExtend != nil {
		answered = s.OnExtend(req)
	}
	err := s.write("extend", ctx, func(c context.Context) error { return s.Store.Extend(c, req) })
	answered(err)
	if s.OnExtendRefused != nil && errors.Is(err, idemstore.ErrLeaseLost) {
		s.OnExtendRefused(req.Lease)
	}
	return err
}

// Delete implements idemstore.Store.
func (s *FaultStore) Delete(ctx context.Context, req idemstore.DeleteRequest) error {
	return s.write("delete", ctx, func(c context.Context) error {
		err := s.Store.Delete(c, req)
		if err == nil && s.OnDelete != nil {
			s.OnDelete(req.Namespace, req.Key)
		}
		return err
	})
}

// Get implements idemstore.Store.
func (s *FaultStore) Get(ctx context.Context, req idemstore.GetRequest) (rec idemstore.Record, err error) {
	var aerr error
	ferr := s.call("get", false, func() { rec, aerr = s.Store.Get(context.WithoutCancel(ctx), req) })
	if ferr != nil {
		return idemstore.Record{}, ferr
	}
	return rec, aerr
}

// Effect is a handler's effect committed atomically with the completion
// (pass it to lambdaidem.AddCompletionWrite). TxStore applies it.
type Effect struct {
	Key string
	By  string // the message that had the effect
}

// TxStore models "effects committed with the completion" on a store that
// cannot commit these writes (the DynamoDB and Redis stores): it takes
// every Effect out of a Complete's writes, and applies them to the ledger
// in the same step as the completion, once per lease token, only when the
// completion applied. The world is single-threaded and the store call does
// not park between the two, so they are one atomic step; a retried
// completion that the store recognises as already applied does not apply
// them again, as an idempotent transaction would not.
type TxStore struct {
	idemstore.Store
	Ledger *Ledger
	// Refuse, when set, is asked per completion carrying effects whether
	// the effects' own condition fails (an overdrawn account, say): the
	// completion is then refused with idemstore.ErrWriteRefused and
	// nothing of it applies.
	Refuse func() bool
}

// Capabilities declares what the store it wraps declares, and Effect
// besides, which TxStore commits itself. It wraps only the stores of this
// module, which all declare theirs.
func (s *TxStore) Capabilities() idemstore.Capabilities {
	caps, _ := idemstore.CapabilitiesOf(s.Store)
	return withEffects(caps)
}

// withEffects adds Effect to the completion writes caps declares: the
// writes of a wrapper that commits Effects itself and hands the rest to
// the store it wraps, whose own check (CheckWrite) they still pass.
func withEffects(caps idemstore.Capabilities) idemstore.Capabilities {
	effect := reflect.TypeFor[Effect]()
	caps.CompletionWrites = append(slices.Clip(caps.CompletionWrites), effect)
	if check := caps.CheckWrite; check != nil {
		caps.CheckWrite = func(l idemstore.Lease, writes []any) error {
			if reflect.TypeOf(writes[len(writes)-1]) == effect {
				return nil
			}
			own := slices.DeleteFunc(slices.Clone(writes), func(w any) bool { return reflect.TypeOf(w) == effect })
			return check(l, own)
		}
	}
	return caps
}

// effectsOf splits a completion's writes into the ledger's effects and
// the writes the wrapped store commits.
func effectsOf(writes []any) (fx []Effect, rest []any) {
	rest = writes[:0:0]
	for _, w := range writes {
		if e, ok := w.(Effect); ok {
			fx = append(fx, e)
		} else {
			rest = append(rest, w)
		}
	}
	return fx, rest
}

// Complete implements idemstore.Store.
func (s *TxStore) Complete(ctx context.Context, req idemstore.CompleteRequest) error {
	fx, rest := effectsOf(req.Writes)
	req.Writes = rest
	if len(fx) > 0 && !s.Ledger.tokens[req.Lease.Token] && s.Refuse != nil && s.Refuse() {
		return fmt.Errorf("sim: effect's condition failed: %w", idemstore.ErrWriteRefused)
	}
	if err := s.Store.Complete(ctx, req); err != nil {
		return err
	}
	if len(fx) > 0 && !s.Ledger.tokens[req.Lease.Token] {
		s.Ledger.tokens[req.Lease.Token] = true
		for _, e := range fx {
			s.Ledger.Tx[e.Key] = append(s.Ledger.Tx[e.Key], e.By)
		}
	}
	return nil
}

// LedgerWrites commits Effects for the in-memory store
// (memstore.WithCompletionWrites): the store itself applies them with the
// completion, under its lock, fenced by the lease and once per completion,
// so the simulation checks the store's own transactional path rather than
// a model of it.
type LedgerWrites struct {
	Ledger *Ledger
	// Refuse, when set, is asked per completion carrying effects whether
	// the effects' own condition fails: the completion is then refused
	// with idemstore.ErrWriteRefused and nothing of it applies.
	Refuse func() bool
}

// WriteTypes implements memstore.WriteApplier: Effect values.
func (a *LedgerWrites) WriteTypes() []reflect.Type { return []reflect.Type{reflect.TypeFor[Effect]()} }

// ApplyWrites implements memstore.WriteApplier.
func (a *LedgerWrites) ApplyWrites(writes []any, commit func()) error {
	fx := make([]Effect, 0, len(writes))
	for _, w := range writes {
		e, ok := w.(Effect)
		if !ok {
			return fmt.Errorf("sim: %T: %w", w, idemstore.ErrUnsupportedWrite)
		}
		fx = append(fx, e)
	}
	if a.Refuse != nil && a.Refuse() {
		return fmt.Errorf("sim: effect's condition failed: %w", idemstore.ErrWriteRefused)
	}
	commit()
	for _, e := range fx {
		a.Ledger.Tx[e.Key] = append(a.Ledger.Tx[e.Key], e.By)
	}
	return nil
}

// EffectStore is a store that commits Effects itself, in its own atomic
// completion step (the Redis store's run, with Redis commands): when the
// scenario's store implements it, a scenario with Tx uses the store
// WithLedger returns instead of wrapping it in a TxStore, so the checker
// judges what the store committed. The store it returns must keep
// Ledger.Tx equal to the effects the store holds, and refuse a completion
// with idemstore.ErrWriteRefused, applying nothing, when refuse (if not
// nil) says so.
type EffectStore interface {
	idemstore.Store
	WithLedger(l *Ledger, refuse func() bool) idemstore.Store
}

// Ledger is where handlers' effects land; the checker reads it.
type Ledger struct {
	// Plain are effects a handler made itself, per key, in order.
	Plain map[string][]string
	// Tx are effects committed with the completion, per key.
	Tx map[string][]string
	// Keyed are the effect keys a keyed downstream applied an effect for
	// (Config.Keyed): a repeat of one does nothing.
	Keyed  map[string]bool
	tokens map[string]bool
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{Plain: map[string][]string{}, Tx: map[string][]string{}, Keyed: map[string]bool{}, tokens: map[string]bool{}}
}
