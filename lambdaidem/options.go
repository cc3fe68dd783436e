package lambdaidem

import (
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambdaidem/go-lambdaidem/internal/mutant"
	"github.com/lambdaidem/go-lambdaidem/internal/seam"
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
	DefaultMaxResultBytes = MinResultBytes
)

// Option configures SQS and Wrap.
type Option func(*config)

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

// OptionNames returns the names of the options opts give, in order
// ("WithNamespace", "WithCache"). Packages that build a handler on SQS or
// Wrap use it to refuse, when they are built, options they override or
// do not use, as httpidem refuses key options.
func OptionNames(opts ...Option) []string {
	c := &config{}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	return c.given
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
	if err := CheckNamespace(c.namespace); err != nil {
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

	caps, ok := CapabilitiesOf(store)
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

// WithCompletionWrites declares that the handler adds completion writes
// of type W with AddCompletionWrite (for the DynamoDB store,
// types.TransactWriteItem; for the Redis store, redisstore.Command). SQS,
// Wrap and httpidem then refuse, when they are built, a store that
// declares it cannot commit them (a *ConfigError wrapping
// ErrUnsupportedWrite and ErrUnsupportedOption), instead of failing every
// message that adds one. Give it once per type. Without it, a write of a
// type the store does not commit is refused by AddCompletionWrite itself,
// while the handler runs.
func WithCompletionWrites[W any]() Option {
	t := reflect.TypeFor[W]()
	return func(c *config) {
		c.note("WithCompletionWrites")
		if !slices.Contains(c.writeKinds, t) {
			c.writeKinds = append(c.writeKinds, t)
		}
	}
}

// MessageIDHash is the payload hash of an SQS record keyed by its message
// ID with no WithPayloadHash set: a constant, since SQS never gives one
// message ID two bodies. Tools that write records as the decorator would
// (tests, benchmarks) use it.
const MessageIDHash = "none:message-id"

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

// WithNamespace sets the namespace that keys live in, so functions sharing
// a table never collide. Default: the function name from
// AWS_LAMBDA_FUNCTION_NAME, or "default" outside Lambda. A name generated by
// SAM or CloudFormation changes when the function is replaced, and every key
// would be forgotten with it: set an explicit namespace in production.
func WithNamespace(ns string) Option {
	return func(c *config) {
		c.note("WithNamespace")
		c.namespace = ns
	}
}

// WithKeyMessageID keys records by SQS messageId (the default). It catches
// SQS redeliveries but not a producer sending the same thing twice.
func WithKeyMessageID() Option {
	return func(c *config) {
		c.note("WithKeyMessageID")
		c.keyFunc, c.keyIsMessageID = keyFromMessageID, true
	}
}

// WithKeyJSONField keys records by a field of the JSON body, given as a
// dotted path ("order.id"). Strings and numbers are accepted. A missing field
// yields ErrMissingKey. A body that is not exactly one JSON value (trailing
// data included), a field on the path given twice, or a key that is not
// valid Unicode (a lone surrogate escape such as "\ud800", or bytes that
// are not UTF-8) yields ErrMalformedBody: decoding would otherwise turn
// such keys into U+FFFD and merge them. For Wrap the path is read from the
// JSON encoding of the input.
//
// Whatever its source, a key is stored as StoredKey gives it.
func WithKeyJSONField(path string) Option {
	return func(c *config) {
		c.note("WithKeyJSONField")
		if path == "" {
			c.refuse("WithKeyJSONField", "the path is empty")
		}
		f := newJSONKeyField(path)
		c.keyField = f
		c.keyFunc, c.keyIsMessageID = func(m events.SQSMessage) (string, error) { return f.key(bodyBytes(m.Body)) }, false
	}
}

// WithKeyAttribute keys records by a String message attribute, such as the
// one the producer helper sets.
func WithKeyAttribute(name string) Option {
	return func(c *config) {
		c.note("WithKeyAttribute")
		if name == "" {
			c.refuse("WithKeyAttribute", "the attribute name is empty")
		}
		c.keyFunc, c.keyIsMessageID = keyFromAttribute(name), false
	}
}

// WithKeyDeduplicationID keys records by a FIFO message's
// MessageDeduplicationId. Set perGroup when the queue scopes deduplication
// to the message group (high-throughput FIFO): the group becomes part of
// the key, as "group/id" (a group holding "/" or starting with a quote is
// written Go-quoted, so no two pairs make one key).
func WithKeyDeduplicationID(perGroup bool) Option {
	return func(c *config) {
		c.note("WithKeyDeduplicationID")
		c.keyFunc, c.keyIsMessageID = keyFromDedupID(perGroup), false
	}
}

// WithKeyFunc keys records by a function of the message. Return an error
// wrapping ErrMissingKey when the message has no key, or ErrMalformedBody
// when its body cannot be parsed (the message is then dead-lettered with
// ReasonMalformedBody). Any string is a valid key: one that is long, not
// valid UTF-8 or starts with HashedKeyPrefix is stored hashed (StoredKey),
// never merged with another. A panic in it (or in a WithPayloadHash
// function) is that message's missing key: it alone is dead-lettered with
// ReasonMissingKey, or reported failed without a sink.
func WithKeyFunc(f KeyFunc) Option {
	return func(c *config) {
		c.note("WithKeyFunc")
		if f == nil {
			c.refuse("WithKeyFunc", "the function is nil")
		}
		c.keyFunc, c.keyIsMessageID = f, false
	}
}

// WithWrapKey keys Wrap's records by a function of the input. Its In must be
// the wrapped function's input type, or Wrap panics at construction.
// Default for Wrap: the SHA-256 of the input's JSON encoding.
func WithWrapKey[In any](f func(In) (string, error)) Option {
	return func(c *config) {
		c.note("WithWrapKey")
		if f == nil {
			c.refuse("WithWrapKey", "the function is nil")
		}
		c.wrapKey = f
	}
}

// WithPayloadHash sets how a message's content is hashed. Default: SHA-256
// of the body (for Wrap, of the input's JSON encoding). With the default
// message-ID key and no WithPayloadHash, SQS records are not hashed: SQS
// gives one message ID to one body, so a hash could never disagree.
func WithPayloadHash(f HashFunc) Option {
	return func(c *config) {
		c.note("WithPayloadHash")
		if f == nil {
			c.refuse("WithPayloadHash", "the function is nil")
		}
		c.hash, c.hashFields = f, nil
	}
}

// WithHashJSONFields hashes only the selected fields (dotted paths) of the
// JSON body, for envelopes whose other fields differ between deliveries of
// one business message (SNS without raw delivery, EventBridge). A selected
// field holding a string that is not valid Unicode makes the body
// malformed (ErrMalformedBody), as for WithKeyJSONField.
func WithHashJSONFields(paths ...string) Option {
	return func(c *config) {
		c.note("WithHashJSONFields")
		if len(paths) == 0 || slices.Contains(paths, "") {
			c.refuse("WithHashJSONFields", "no fields, or an empty path")
		}
		h := newJSONHashFields(paths...)
		c.hash, c.hashFields = h.hash, h
	}
}

// WithMaxAttempts sets how many claims a key gets (default
// DefaultMaxAttempts). A handler failure on the last attempt dead-letters
// the message; a claim beyond the maximum (the previous holders crashed or
// timed out) dead-letters it without running the handler.
func WithMaxAttempts(n int) Option {
	return func(c *config) {
		c.note("WithMaxAttempts")
		if n < 1 {
			c.refuse("WithMaxAttempts", fmt.Sprintf("%d attempts; at least one is needed", n))
		}
		c.maxAttempts = max(n, 1)
	}
}

// WithConcurrency bounds the records of a standard-queue batch processed at
// once (default DefaultConcurrency). FIFO groups run one record at a time.
func WithConcurrency(n int) Option {
	return func(c *config) {
		c.note("WithConcurrency")
		if n < 1 {
			c.refuse("WithConcurrency", fmt.Sprintf("%d records at once; at least one is needed", n))
		}
		c.concurrency = max(n, 1)
	}
}

// WithLease caps the lease (default DefaultMaxLease). The lease is the
// invocation's remaining time, capped by d; with no deadline it is d (or
// DefaultLeaseWithoutDeadline when unset). The handler's context ends a
// margin before the lease does; when d is shorter than four deadline
// margins and no margin was set, that margin is a quarter of d. Combined
// with an explicit WithDeadlineMargin of d or more, SQS and Wrap panic.
func WithLease(d time.Duration) Option {
	return func(c *config) {
		c.note("WithLease")
		if d <= 0 {
			c.refuse("WithLease", fmt.Sprintf("a lease of %s", d))
			return
		}
		c.maxLease, c.leaseNoDeadline = d, d
	}
}

// WithGrace sets how long past its end a lease must be before another
// claimer may take it over (default DefaultGrace).
func WithGrace(d time.Duration) Option {
	return func(c *config) {
		c.note("WithGrace")
		if d < 0 {
			c.refuse("WithGrace", fmt.Sprintf("a negative grace (%s)", d))
		}
		c.grace = max(d, 0)
	}
}

// WithDeadlineMargin sets the time kept back before the invocation's
// deadline, and before the lease's end, for recording outcomes (default
// DefaultDeadlineMargin). The handler's context ends this long before the
// deadline, and no record is claimed once less than this remains. It must
// be shorter than WithLease, or SQS and Wrap panic; outside Lambda, the
// default lease is lengthened to four margins if it is not longer.
func WithDeadlineMargin(d time.Duration) Option {
	return func(c *config) {
		c.note("WithDeadlineMargin")
		if d < 0 {
			c.refuse("WithDeadlineMargin", fmt.Sprintf("a negative margin (%s)", d))
		}
		c.margin, c.marginSet = max(d, 0), true
	}
}

// WithRetention sets how long a completed key is remembered (default
// DefaultRetention).
func WithRetention(d time.Duration) Option {
	return func(c *config) {
		c.note("WithRetention")
		if d <= 0 {
			c.refuse("WithRetention", fmt.Sprintf("a retention of %s", d))
			return
		}
		c.retention = d
	}
}

// WithUnfinishedRetention sets how long unfinished records are kept
// (default DefaultUnfinishedRetention). Keep it at least the queue's message
// retention plus any RetryAfter horizon. A value not longer than the lease
// cap (WithLease) plus the grace is raised to that plus one minute, so a
// record is never forgotten while it is leased; a heartbeat's extensions
// move the record's expiry with the lease.
func WithUnfinishedRetention(d time.Duration) Option {
	return func(c *config) {
		c.note("WithUnfinishedRetention")
		if d <= 0 {
			c.refuse("WithUnfinishedRetention", fmt.Sprintf("a retention of %s", d))
			return
		}
		c.unfinishedRetention = d
	}
}

// WithResultRetention keeps Wrap's stored results for a shorter time than
// the key (default: as long as the key). A repeat after the result expired
// but while the key is remembered is a late replay (ErrLateReplay).
func WithResultRetention(d time.Duration) Option {
	return func(c *config) {
		c.note("WithResultRetention")
		if d <= 0 {
			c.refuse("WithResultRetention", fmt.Sprintf("a retention of %s", d))
		}
		c.resultRetention = d
	}
}

// WithMaxResultBytes bounds a stored Wrap result (default
// DefaultMaxResultBytes). A larger one is not stored: the call still
// returns it and completes the key, and a repeat gets ErrResultNotStored.
func WithMaxResultBytes(n int) Option {
	return func(c *config) {
		c.note("WithMaxResultBytes")
		if n < 1 {
			c.refuse("WithMaxResultBytes", fmt.Sprintf("%d bytes; no result could be stored", n))
		}
		c.maxResultBytes = n
	}
}

// WithCache keeps up to size completed keys in memory for ttl, so a repeated
// duplicate in a warm container costs no store request. An entry never
// outlives the key's retention nor its result retention, so the cache never
// answers "duplicate" where the store has forgotten the key or would answer
// "late replay". Off by default: a cached key goes stale when an operator
// forgets or redrives it, for up to ttl.
func WithCache(size int, ttl time.Duration) Option {
	return func(c *config) {
		c.note("WithCache")
		if size < 1 || ttl <= 0 {
			c.refuse("WithCache", fmt.Sprintf("%d keys for %s; both must be positive", size, ttl))
		}
		c.cacheSize, c.cacheTTL = size, ttl
	}
}

// WithLogger sets the logger (default slog.Default()). Use
// lambdacontext.NewLogHandler for Lambda-aware records. Bodies are never
// logged.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		c.note("WithLogger")
		if l != nil {
			c.logger = l
		}
	}
}

// Timer is a timer a Clock armed; *time.Timer is one.
type Timer = interface{ Stop() bool }

// Clock is the time the decorator measures everything with: see WithClock.
type Clock interface {
	// Now is the clock's current time.
	Now() time.Time
	// AfterFunc calls f once d of the clock's time has passed, unless the
	// returned Timer is stopped first. It must never call f before it
	// returns, nor on the goroutine that called it: on a goroutine of its
	// own, as time.AfterFunc does, or on the one that moves a test
	// clock's time.
	AfterFunc(d time.Duration, f func()) Timer
}

// WithClock sets the clock every time the decorator reads or waits for is
// measured by (default: the real one). With it, the invocation's deadline
// (the context's, read as a time of this clock), every decision (lease
// ends, takeovers, retention, the cache), the deadline of the handler's
// context, the heartbeat's ticks, the waits between a store write's
// retries and the polls of WithWaitForCompletion are all this clock's: a
// test that moves the clock moves all of them, and one that never moves it
// waits where the decorator waits (a store retry's backoff, a heartbeat's
// tick, a handler's deadline). A test clock keeps a time and its armed
// timers, and fires those that fall due when the test moves it. For tests
// that steer time against a real store; lambdaidemtest runs a handler in a
// simulated world whose clock moves by itself.
func WithClock(clock Clock) Option {
	return func(c *config) {
		c.note("WithClock")
		if isNil(clock) {
			c.refuse("WithClock", "the clock is nil")
			return
		}
		c.rt = seam.OnClock(clock)
	}
}

// WithFailBatchOnAnyFailure makes the SQS handler return an error whenever
// any record failed. Use it when the event source mapping does not enable
// ReportBatchItemFailures: Lambda then retries the whole batch, and records
// whose completion was recorded are skipped as duplicates. A record whose
// handler succeeded but whose completion could not be written (the store
// was unavailable) is skipped too when the retry reaches the same warm
// container: the completion is written then, fenced by that attempt's
// lease, without running the handler. If the retry reaches another
// container once the lease and grace are over, that container takes the
// key over and runs the handler again, as after a crash (with
// WithAtMostOnce, it dead-letters the message as outcome unknown instead).
func WithFailBatchOnAnyFailure() Option {
	return func(c *config) {
		c.note("WithFailBatchOnAnyFailure")
		c.failOnAny = true
	}
}

// WithAllFailedError sets whether the SQS handler returns an error when
// every record of a batch failed (default true, so error alarms fire).
func WithAllFailedError(on bool) Option {
	return func(c *config) {
		c.note("WithAllFailedError")
		c.allFailedError = on
	}
}

// WithIsolateRedeliveries sets whether records that were delivered before
// (ApproximateReceiveCount > 1) run one at a time after the rest of the
// batch (default true). A message that crashes the process then takes
// only itself down on its retries, so its batch-mates' attempt counts do
// not climb towards the dead-letter queue with it.
func WithIsolateRedeliveries(on bool) Option {
	return func(c *config) {
		c.note("WithIsolateRedeliveries")
		c.isolate = on
	}
}

// WithDeadLetterSink sets where dead-lettered messages go. Without a sink,
// a message that should be dead-lettered is reported failed and SQS's own
// redrive policy is the backstop.
func WithDeadLetterSink(s DeadLetterSink) Option {
	return func(c *config) {
		c.note("WithDeadLetterSink")
		if isNil(s) {
			c.refuse("WithDeadLetterSink", "the sink is nil (leave the option out for none)")
			return
		}
		c.sink = s
	}
}

// WithVisibility sets the VisibilityChanger used for RetryAfter, backoff and
// bringing back a message whose key is held by another lease when that lease
// ends. Without one, the queue's visibility timeout applies.
func WithVisibility(v VisibilityChanger) Option {
	return func(c *config) {
		c.note("WithVisibility")
		if isNil(v) {
			c.refuse("WithVisibility", "the visibility changer is nil (leave the option out for none)")
			return
		}
		c.visibility = v
	}
}

// WithBackoff sets the visibility timeout after a plain handler error as a
// function of the attempt number (see ExponentialBackoff). Default: none,
// the queue's visibility timeout applies. Needs WithVisibility.
func WithBackoff(f func(attempt int) time.Duration) Option {
	return func(c *config) {
		c.note("WithBackoff")
		if f == nil {
			c.refuse("WithBackoff", "the policy is nil")
		}
		c.backoff = f
	}
}

// WithInvocationHook is called once per SQS invocation with its report, for
// metrics.
func WithInvocationHook(f func(*InvocationReport)) Option {
	return func(c *config) {
		c.note("WithInvocationHook")
		if f == nil {
			c.refuse("WithInvocationHook", "the hook is nil")
		}
		c.hook = f
	}
}

// ExponentialBackoff returns a backoff policy: base doubled per attempt,
// capped at limit and at SQS's 12-hour visibility maximum.
func ExponentialBackoff(base, limit time.Duration) func(attempt int) time.Duration {
	const sqsMax = 12 * time.Hour
	limit = min(limit, sqsMax)
	return func(attempt int) time.Duration {
		d := base
		for i := 1; i < attempt && d < limit; i++ {
			d *= 2
		}
		return min(d, limit)
	}
}

// WithAtMostOnce never runs a handler twice for one key, for effects that
// must not repeat (a payment, a trade). When a claim finds a lease that ran
// out with no recorded outcome, the handler is not run again. The SQS
// decorator takes the abandoned lease over (conditioned on the old lease
// token, which fences the original owner's late completion), sends the
// message to the dead-letter queue with ReasonOutcomeUnknown for
// reconciliation, and then marks the record dead-lettered. Wrap marks the
// record under the old token and returns ErrOutcomeUnknown. A handler that
// returns an error after its context ended (the deadline margin, a lost
// lease, a cancelled invocation), or that panics, is treated the same way:
// what it started
// may have happened, so the message is dead-lettered with
// ReasonOutcomeUnknown (Wrap returns ErrOutcomeUnknown) instead of being
// recorded as a retryable failure. The default is at-least-once: an
// abandoned lease is taken over and the handler runs again.
func WithAtMostOnce() Option {
	return func(c *config) {
		c.note("WithAtMostOnce")
		c.atMostOnce = true
	}
}

// WithHeartbeat extends the lease every interval while the handler runs,
// for handlers whose lease is shorter than their work (Wrap outside Lambda,
// or WithLease below the invocation's timeout). Each extension moves the
// lease's end to now plus the original lease length. The handler's context
// ends a margin before the last lease end the store granted (and before the
// invocation's deadline): if extensions fail, for a throttled or
// unreachable store, the handler is stopped before its lease runs out
// rather than keep running while another instance takes the key over. If
// an extension is refused (the lease was taken over), the handler's context
// is cancelled at once and context.Cause reports ErrLeaseLost. The interval
// must be shorter than the lease minus the margin, or SQS and Wrap panic;
// a third of the lease leaves room for a failed extension or two.
// Default: off.
func WithHeartbeat(interval time.Duration) Option {
	return func(c *config) {
		c.note("WithHeartbeat")
		if interval < 0 {
			c.refuse("WithHeartbeat", fmt.Sprintf("a negative interval (%s)", interval))
		}
		c.heartbeat = max(interval, 0)
	}
}
