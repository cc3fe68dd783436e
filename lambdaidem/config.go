package lambdaidem

import (
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"time"

	"github.com/lambdaidem/go-lambdaidem/internal/seam"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// Defaults of the options. Each option's doc says how to change it.
const (
	// DefaultMaxAttempts is how many claims a key gets before its message is
	// dead-lettered.
	DefaultMaxAttempts = 5
	// DefaultConcurrency bounds records processed at once on standard queues.
	DefaultConcurrency = 10
	// DefaultMaxLease caps the lease; Lambda's own maximum timeout.
	DefaultMaxLease = 15 * time.Minute
	// DefaultLeaseWithoutDeadline is the lease when the context has no
	// deadline (outside Lambda): never "forever".
	DefaultLeaseWithoutDeadline = time.Minute
	// DefaultDeadlineMargin is the time kept back before the invocation's
	// deadline to record outcomes. It covers one store call at its slowest
	// with the DynamoDB store's default client tuning (three tries of at
	// most one second plus backoff: 3.4 s); the library retries a store
	// write only while the time left covers another try as slow as the
	// slowest so far. For invocations shorter than four margins, a quarter
	// of the remaining time is kept instead.
	DefaultDeadlineMargin = 4 * time.Second
	// DefaultRetention is how long a completed key is remembered.
	DefaultRetention = 24 * time.Hour
	// DefaultUnfinishedRetention is how long an IN_PROGRESS, FAILED or
	// DEAD_LETTERED record is kept: SQS's longest message retention, so a
	// poison message's attempt count never silently restarts.
	DefaultUnfinishedRetention = 14 * 24 * time.Hour
	// DefaultMaxResultBytes bounds a stored Wrap result: the smallest
	// result every store holds.
	DefaultMaxResultBytes = idemstore.MinResultBytes
)

// Option configures SQS and Wrap.
type Option func(*config)

// option is an option named name: given, it is noted (for OptionNames and
// the checks of construction) and applied with set, or, when its own value
// can never work (why is not empty), refused when the handler is built.
func option(name, why string, set func(*config)) Option {
	return func(c *config) {
		c.note(name)
		if why != "" {
			c.refuse(name, why)
			return
		}
		set(c)
	}
}

// whenf is the reason to refuse an option's value, or "" when bad is false.
func whenf(bad bool, format string, args ...any) string {
	if !bad {
		return ""
	}
	return fmt.Sprintf(format, args...)
}

// config is what the options set: SQS and Wrap build one from their
// options (newConfig) and check it against the store (check) before they
// run anything.
type config struct {
	namespace           string
	keyFunc             KeyFunc
	keyIsMessageID      bool            // keyFunc is SQS's message ID
	keyField            *jsonKeyField   // set by WithKeyJSONField
	hashFields          *jsonHashFields // the hash reads these fields
	wrapKey             any             // func(In) (string, error), checked by Wrap
	hash                HashFunc
	maxAttempts         int
	concurrency         int
	maxLease            time.Duration
	leaseNoDeadline     time.Duration
	grace               time.Duration
	margin              time.Duration
	marginSet           bool
	retention           time.Duration
	unfinishedRetention time.Duration
	resultRetention     time.Duration
	maxResultBytes      int
	cacheSize           int
	cacheTTL            time.Duration
	logger              *slog.Logger
	rt                  seam.Runtime // the clock, waits, randomness and scheduling
	failOnAny           bool
	allFailedError      bool
	isolate             bool
	sink                DeadLetterSink
	visibility          VisibilityChanger
	backoff             func(attempt int) time.Duration
	hook                func(*InvocationReport)
	observers           []Observer
	entry               EntryPoint // what Wrap reports to observers
	atMostOnce          bool
	heartbeat           time.Duration
	optimistic          bool           // WithOptimisticCommit
	batched             bool           // WithBatchedWrites
	wait                time.Duration  // WithWaitForCompletion; 0: off
	writeKinds          []reflect.Type // WithCompletionWrites
	// given names the options given, in order, for the checks of
	// construction; invalid holds the refusals options found in their
	// own values.
	given   []string
	invalid []error
}

func newConfig(opts []Option) *config {
	c := &config{
		namespace:           os.Getenv("AWS_LAMBDA_FUNCTION_NAME"),
		keyFunc:             keyFromMessageID,
		keyIsMessageID:      true,
		maxAttempts:         DefaultMaxAttempts,
		concurrency:         DefaultConcurrency,
		maxLease:            DefaultMaxLease,
		leaseNoDeadline:     DefaultLeaseWithoutDeadline,
		grace:               DefaultGrace,
		margin:              DefaultDeadlineMargin,
		retention:           DefaultRetention,
		unfinishedRetention: DefaultUnfinishedRetention,
		maxResultBytes:      DefaultMaxResultBytes,
		logger:              slog.Default(),
		rt:                  seam.Real,
		allFailedError:      true,
		isolate:             true,
		entry:               EntryWrap,
	}
	if c.namespace == "" {
		c.namespace = "default"
	}
	for _, o := range opts {
		o(c)
	}
	if c.resultRetention <= 0 || c.resultRetention > c.retention {
		c.resultRetention = c.retention
	}
	return c
}

// leaseMargin is the time kept back before a lease of the given length
// ends: the deadline margin, or a quarter of the lease when the lease is
// shorter than four margins and no margin was set.
func (c *config) leaseMargin(margin, length time.Duration) time.Duration {
	if !c.marginSet && length < 4*margin {
		return max(length/4, 0)
	}
	return margin
}

// note records that an option was given.
func (c *config) note(name string) { c.given = append(c.given, name) }

// refuse records that an option's own value can never work; the handler
// being built panics with it.
func (c *config) refuse(option, why string) {
	c.invalid = append(c.invalid, &ConfigError{Option: option, Err: fmt.Errorf("%w: %s", ErrInvalidOption, why)})
}

// isNil reports whether v is nil or an interface holding a nil pointer.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch r := reflect.ValueOf(v); r.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Slice, reflect.Interface:
		return r.IsNil()
	}
	return false
}

// given reports whether the option was given.
func (c *config) has(name string) bool { return slices.Contains(c.given, name) }

// useHash settles the payload hash: the one set by an option, else SHA-256
// of the body; but for SQS records keyed by message ID, with no hash set, a
// constant, since one message ID never carries two bodies.
func (c *config) useHash(sqs bool) {
	switch {
	case c.hash != nil:
	case sqs && c.keyIsMessageID:
		c.hash = func([]byte) (string, error) { return MessageIDHash, nil }
	default:
		c.hash = hashBody
	}
}
