package lambdaidem

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lambdaidem/go-lambdaidem/internal/mutant"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

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
