package lambdaidem

import (
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/lambdaidem/go-lambdaidem/internal/mutant"
	"github.com/lambdaidem/go-lambdaidem/internal/seam"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

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

// Handler names, for ConfigError.Handler.
const (
	handlerSQS  = "lambdaidem.SQS"
	handlerWrap = "lambdaidem.Wrap"
)

// sqsOnly are the options only the SQS handler uses: Wrap refuses them.
var sqsOnly = map[string]string{
	"WithKeyMessageID":          "Wrap has no SQS message",
	"WithKeyAttribute":          "Wrap has no message attributes",
	"WithKeyDeduplicationID":    "Wrap has no FIFO deduplication ID",
	"WithKeyFunc":               "Wrap keys by its input (WithWrapKey, WithKeyJSONField)",
	"WithMaxAttempts":           "Wrap counts no attempts: its caller sees each failure and decides whether to call again",
	"WithConcurrency":           "Wrap runs one call at a time per call",
	"WithCache":                 "Wrap must return the stored result of a duplicate, which the cache does not hold",
	"WithFailBatchOnAnyFailure": "Wrap has no batch",
	"WithAllFailedError":        "Wrap has no batch",
	"WithIsolateRedeliveries":   "Wrap has no redeliveries",
	"WithDeadLetterSink":        "Wrap has no message to dead-letter (its caller gets the error)",
	"WithVisibility":            "Wrap has no message whose visibility could change",
	"WithBackoff":               "Wrap has no message whose visibility could change",
	"WithInvocationHook":        "Wrap has no SQS invocation to report",
	"WithOptimisticCommit":      "a Wrap caller waits on its one run, which only a lease taken before it keeps single",
	"WithBatchedWrites":         "Wrap has no batch",
}

// wrapOnly are the options only Wrap uses: SQS refuses them.
var wrapOnly = map[string]string{
	"WithWrapKey":        "the SQS handler keys messages (WithKeyJSONField, WithKeyFunc...)",
	"WithMaxResultBytes": "the SQS handler stores no results",
	// Refused with ErrWaitUnsupported, which says why.
	"WithWaitForCompletion": "",
}

// keyOptions are the options that set the key; at most one may be given.
var keyOptions = []string{"WithKeyMessageID", "WithKeyJSONField", "WithKeyAttribute", "WithKeyDeduplicationID", "WithKeyFunc", "WithWrapKey"}

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

// check refuses, when a handler is built, what could never work: an
// option's own value, a combination of options, an option the handler
// does not use, or one the store cannot serve (when the store declares
// its Capabilities). It panics with a *ConfigError.
func (c *config) check(handler string, store Store) {
	fail := func(e *ConfigError) {
		e.Handler = handler
		panic(e)
	}
	invalid := func(option, format string, args ...any) {
		fail(&ConfigError{Option: option, Err: fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...)})
	}
	if len(c.invalid) > 0 {
		fail(c.invalid[0].(*ConfigError))
	}
	for _, name := range c.given {
		why, refused := sqsOnly[name]
		if handler == handlerSQS {
			why, refused = wrapOnly[name]
		}
		if refused && name == "WithWaitForCompletion" {
			fail(&ConfigError{Option: name, Err: fmt.Errorf("%w: %w", ErrUnsupportedOption, ErrWaitUnsupported)})
		}
		if refused {
			fail(&ConfigError{Option: name, Err: fmt.Errorf("%w: %s", ErrUnsupportedOption, why)})
		}
	}
	var keys []string
	for _, name := range c.given {
		if slices.Contains(keyOptions, name) && !slices.Contains(keys, name) {
			keys = append(keys, name)
		}
	}
	if len(keys) > 1 {
		invalid(strings.Join(keys, " and "), "each sets the key; give one")
	}
	if c.has("WithPayloadHash") && c.has("WithHashJSONFields") {
		invalid("WithPayloadHash and WithHashJSONFields", "each sets the payload hash; give one")
	}
	if c.backoff != nil && c.visibility == nil {
		invalid("WithBackoff without WithVisibility", "a backoff is applied by changing the message's visibility, and there is no VisibilityChanger to do it")
	}
	if err := idemstore.CheckNamespace(c.namespace); err != nil {
		fail(&ConfigError{Option: "WithNamespace", Err: err})
	}
	acceptDeadLease := mutant.On("lease-margin-unchecked") // the bug: handlers would start with no time left
	if c.marginSet && c.margin >= c.maxLease && !acceptDeadLease {
		invalid(fmt.Sprintf("WithDeadlineMargin(%s) and WithLease(%s)", c.margin, c.maxLease), "the margin is not shorter than the lease: every handler would start with no time left")
	}
	if c.marginSet && c.margin >= c.leaseNoDeadline {
		// Only the default lease outside Lambda is shorter (an explicit
		// WithLease sets both): lengthen it rather than start dead.
		c.leaseNoDeadline = 4 * c.margin
	}
	// An unfinished record must outlive any lease on it, plus the grace,
	// or a second claimer would find it gone and claim it afresh while the
	// first still holds it.
	if floor := max(c.maxLease, c.leaseNoDeadline) + c.grace; c.unfinishedRetention <= floor {
		c.unfinishedRetention = floor + time.Minute
	}
	if c.heartbeat > 0 {
		lease := min(c.maxLease, c.leaseNoDeadline)
		if room := lease - c.leaseMargin(c.margin, lease); c.heartbeat >= room {
			invalid(fmt.Sprintf("WithHeartbeat(%s)", c.heartbeat), "it cannot keep a %s lease alive: the interval must be shorter than the lease minus the margin (%s)", lease, room)
		}
	}

	if e := c.checkOptimistic(store); e != nil {
		fail(e)
	}
	if e := c.checkBatched(store); e != nil {
		fail(e)
	}

	caps, ok := idemstore.CapabilitiesOf(store)
	if !ok {
		return
	}
	unsupported := func(option string, also error, format string, args ...any) {
		err := fmt.Errorf("%w: "+format, append([]any{ErrUnsupportedOption}, args...)...)
		if also != nil {
			// One text, the more specific error's, matching both.
			err = &reason{text: fmt.Sprintf("%s: "+format, append([]any{also}, args...)...), named: []error{also, ErrUnsupportedOption}}
		}
		fail(&ConfigError{Option: option, Store: caps.Store, Err: err})
	}
	if caps.CheckNamespace != nil {
		if err := caps.CheckNamespace(c.namespace); err != nil {
			unsupported("WithNamespace", ErrInvalidOption, "%s cannot keep the namespace %q: %v", storeName(caps), c.namespace, err)
		}
	}
	for _, t := range c.writeKinds {
		if !caps.CommitsWrite(t) {
			unsupported("WithCompletionWrites["+t.String()+"]", ErrUnsupportedWrite, "%s commits %s with a completion", storeName(caps), writeKinds(caps))
		}
	}
	if handler != handlerSQS && caps.MaxResultBytes > 0 && c.maxResultBytes > caps.MaxResultBytes {
		option := fmt.Sprintf("WithMaxResultBytes(%d)", c.maxResultBytes)
		if !c.has("WithMaxResultBytes") {
			option = fmt.Sprintf("the default result limit (%d bytes)", c.maxResultBytes)
		}
		unsupported(option, nil, "%s keeps results of at most %d bytes; set WithMaxResultBytes at most that", storeName(caps), caps.MaxResultBytes)
	}
}
