package lambdaidem

import "github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"

// The names of package idemstore that a function author meets: the store
// a handler is built on, the lease its context carries, a record's status
// and a dead letter's reason, the errors a handler or a caller tells apart,
// and the refusal a constructor panics with. They are the same types and
// values as idemstore's, so errors.Is and type switches see no difference.
// Everything else a store implements (requests, records, admin, batches,
// commits, capabilities) is in package idemstore only.

// Store keeps one record per (namespace, key) and moves it between states
// with conditional writes: dynamo.New, redisstore.New and memstore.New
// make one. See [idemstore.Store] for the contract.
type Store = idemstore.Store

// Lease identifies one claim of a key; [LeaseFromContext] gives a handler
// its own. Its Token fences every later write of the claim, and its Fence
// orders claims (see [idemstore.Lease]).
type Lease = idemstore.Lease

// Status is the stored state of a key.
type Status = idemstore.Status

// The states of a record.
const (
	StatusInProgress   = idemstore.StatusInProgress
	StatusCompleted    = idemstore.StatusCompleted
	StatusFailed       = idemstore.StatusFailed
	StatusDeadLettered = idemstore.StatusDeadLettered
)

// Reason says why a message was dead-lettered.
type Reason = idemstore.Reason

// The reasons a message is dead-lettered; [idemstore.Reason] says what each
// means.
const (
	ReasonMaxAttempts     = idemstore.ReasonMaxAttempts
	ReasonPoison          = idemstore.ReasonPoison
	ReasonKeyConflict     = idemstore.ReasonKeyConflict
	ReasonKeyDeadLettered = idemstore.ReasonKeyDeadLettered
	ReasonOutcomeUnknown  = idemstore.ReasonOutcomeUnknown
	ReasonMissingKey      = idemstore.ReasonMissingKey
	ReasonMalformedBody   = idemstore.ReasonMalformedBody
)

// Errors of the store that handlers and callers tell apart; idemstore
// documents each.
var (
	ErrInProgress       = idemstore.ErrInProgress
	ErrLeaseLost        = idemstore.ErrLeaseLost
	ErrMissingKey       = idemstore.ErrMissingKey
	ErrStoreUnavailable = idemstore.ErrStoreUnavailable
	ErrResultTooLarge   = idemstore.ErrResultTooLarge
	ErrUnsupportedWrite = idemstore.ErrUnsupportedWrite
	ErrWriteRefused     = idemstore.ErrWriteRefused
)

// Errors of construction: SQS, Wrap and the handlers built on them refuse
// settings that cannot work by panicking with a [*ConfigError] wrapping
// one of them (see [Check]).
var (
	ErrInvalidOption     = idemstore.ErrInvalidOption
	ErrUnsupportedOption = idemstore.ErrUnsupportedOption
)

// ConfigError is the value SQS, Wrap, the stores' constructors and the
// handlers built on them panic with when their settings cannot work
// together; see [idemstore.ConfigError].
type ConfigError = idemstore.ConfigError

// DefaultGrace is how far past its end a lease must be before another
// instance may take it over, to absorb clock skew.
const DefaultGrace = idemstore.DefaultGrace
