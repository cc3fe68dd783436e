package sim

import "strings"

// Invariant names one promise the checker holds the world to; every
// violation starts with its invariant in brackets. docs/simulation.md
// says how each is checked, docs/promises.md which promise it checks.
type Invariant string

// The invariants.
const (
	InvLost         Invariant = "nothing lost"
	InvTwoHandlers  Invariant = "never two live handlers on one key"
	InvTxOnce       Invariant = "transactional effects exactly once"
	InvStaleOutcome Invariant = "a holder whose lease was taken over records no outcome"
	InvAMO          Invariant = "at-most-once never twice"
	InvRepeats      Invariant = "at-least-once repeats only after an abandoned attempt"
	InvUnrecorded   Invariant = "an unrecorded completion is written, not re-run"
	InvAckEffect    Invariant = "no acknowledged success without its effect"
	InvReplay       Invariant = "replays return what the first call returned"
	InvRedriveReset Invariant = "redrive resets only what it dead-lettered"
	InvRedriveEnds  Invariant = "redrive terminates"
	InvRedriveKeeps Invariant = "redrive never strands or deletes an unrun copy"
	InvResolve      Invariant = "an operator's decision on an unknown outcome holds"
	InvKeyed        Invariant = "one effect key per generation"
	InvProgress     Invariant = "progress"
	InvReasons      Invariant = "every dead-letter copy has a true reason; no finished work in the DLQ"
	InvCache        Invariant = "the cache never contradicts the store"
	InvFinal        Invariant = "store and world agree at the end"
	InvFIFO         Invariant = "FIFO order within a group"
	InvWhose        Invariant = "whose effect: the payload of the generation's first claim"
	InvCallers      Invariant = "one caller's stored response never reaches another"
	InvWaiters      Invariant = "a waiter returns only what the store holds"
	InvObserver     Invariant = "observers see each record once, in its context"
	InvCommit       Invariant = "a commit without a lease applies only where a claim would"
)

// The invariants of every answer and of liveness.
const (
	InvOwnPayload Invariant = "a success answers only a completion of its own payload"
	InvLateReplay Invariant = "no replay after its result's retention ended"
	InvHeartbeat  Invariant = "a heartbeat keeps its lease until the deadline"
	InvSucceeds   Invariant = "what can succeed succeeds, within its attempts"
)

// InvariantOf returns the invariant a violation names ("" for none).
func InvariantOf(violation string) Invariant {
	_, rest, ok := strings.Cut(violation, " [")
	if !ok {
		return ""
	}
	name, _, ok := strings.Cut(rest, "] ")
	if !ok {
		return ""
	}
	return Invariant(name)
}
