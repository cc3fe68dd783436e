package lambdaidem

import "github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"

// The names of the store contract (package idemstore) that a function author
// meets, as aliases: the same types and values, so errors.Is and type
// switches see no difference. idemstore documents each.
type (
	// Store keeps the records: dynamo.New, redisstore.New and memstore.New
	// make one.
	Store = idemstore.Store
	// Lease identifies one claim of a key; LeaseFromContext gives a
	// handler its own.
	Lease = idemstore.Lease
	// Status is the stored state of a key.
	Status = idemstore.Status
	// Reason says why a message was dead-lettered.
	Reason = idemstore.Reason
	// ConfigError is what SQS, Wrap and the constructors built on them
	// panic with when their settings cannot work together (see Check).
	ConfigError = idemstore.ConfigError
)

// The states of a record, and the reasons a message is dead-lettered.
const (
	StatusInProgress      = idemstore.StatusInProgress
	StatusCompleted       = idemstore.StatusCompleted
	StatusFailed          = idemstore.StatusFailed
	StatusDeadLettered    = idemstore.StatusDeadLettered
	ReasonMaxAttempts     = idemstore.ReasonMaxAttempts
	ReasonPoison          = idemstore.ReasonPoison
	ReasonKeyConflict     = idemstore.ReasonKeyConflict
	ReasonKeyDeadLettered = idemstore.ReasonKeyDeadLettered
	ReasonOutcomeUnknown  = idemstore.ReasonOutcomeUnknown
	ReasonMissingKey      = idemstore.ReasonMissingKey
	ReasonMalformedBody   = idemstore.ReasonMalformedBody
	// DefaultGrace is how far past its end a lease must be before another
	// instance may take it over, to absorb clock skew.
	DefaultGrace = idemstore.DefaultGrace
)

// Errors of the store that handlers and callers tell apart, and the errors
// of construction a *ConfigError wraps.
var (
	ErrInProgress        = idemstore.ErrInProgress
	ErrLeaseLost         = idemstore.ErrLeaseLost
	ErrMissingKey        = idemstore.ErrMissingKey
	ErrStoreUnavailable  = idemstore.ErrStoreUnavailable
	ErrResultTooLarge    = idemstore.ErrResultTooLarge
	ErrUnsupportedWrite  = idemstore.ErrUnsupportedWrite
	ErrWriteRefused      = idemstore.ErrWriteRefused
	ErrInvalidOption     = idemstore.ErrInvalidOption
	ErrUnsupportedOption = idemstore.ErrUnsupportedOption
)
