package httpidem

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/lambdaidem/go-lambdaidem/internal/mutant"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// Header names this package reads and writes.
const (
	// HeaderKey is the request header carrying the idempotency key.
	HeaderKey = "Idempotency-Key"
	// HeaderReplayed is set to "true" on a response that was replayed from
	// the store rather than produced by running the handler.
	HeaderReplayed = "Idempotent-Replayed"
	// HeaderRetryAfter tells a client how many seconds to wait (409, 503).
	HeaderRetryAfter = "Retry-After"
	// ProblemContentType is the media type of the error bodies (RFC 9457).
	ProblemContentType = "application/problem+json"
)

// Defaults of the options.
const (
	// DefaultMaxKeyLength bounds the key a client may send, in bytes.
	DefaultMaxKeyLength = 255
	// DefaultUnavailableRetryAfter is the Retry-After of a 503 sent when
	// the store could not be reached.
	DefaultUnavailableRetryAfter = time.Second
	// Anonymous names, in logs and documents, the caller of a request
	// without an authorizer identity, accepted only with
	// WithAnonymousCallers. Such requests are not stored under this
	// string: their key space is marked apart from every caller's, so a
	// caller whose identity happens to be "anonymous" never shares it.
	Anonymous = "anonymous"
	// DefaultWriteRefusedStatus answers a request whose completion writes
	// the store refused for good (see WithWriteRefusedStatus).
	DefaultWriteRefusedStatus = http.StatusConflict
	// StatusOutcomeUnknown (424 Failed Dependency) answers a key whose
	// request's outcome is unknown (lambdaidem.ErrOutcomeUnknown): the
	// handler said it cannot tell whether its effect happened, or, in
	// at-most-once mode, failed without declaring that nothing happened
	// or left its lease without an outcome. The request that found it out
	// and every later one with the key get it; the handler never runs
	// again for the key. It is a 4xx because no retry with the key can
	// change the answer (a client that retries 5xx would retry in vain,
	// and one that gives up on a run of 5xx and sends a new key would
	// repeat the effect), and 424 because API Gateway never sends it and
	// nothing else here does, so a client can tell it from every other
	// answer: neither a replay nor a run.
	StatusOutcomeUnknown = http.StatusFailedDependency
)

// Named errors for bad keys. They are answered with 400 and never reach
// the store.
var (
	// ErrMissingKey: the request has no Idempotency-Key header.
	ErrMissingKey = errors.New("httpidem: Idempotency-Key header missing")
	// ErrInvalidKey: the header is empty, too long, repeated, or not a
	// string of visible ASCII characters.
	ErrInvalidKey = errors.New("httpidem: invalid Idempotency-Key header")
)

// Option configures REST and HTTP.
type Option func(*config)

type config struct {
	optional        bool
	anonymous       bool
	refusedStatus   int
	caller          any // func(Req) string, checked at construction
	wrapOpts        []lambdaidem.Option
	problemType     string
	unavailableWait time.Duration
	maxKeyLen       int
	// invalid holds the refusals options found in their own values.
	invalid []*lambdaidem.ConfigError
}

// refuse records that an option's value could never work; the handler
// being built panics with it.
func (c *config) refuse(option, format string, args ...any) {
	c.invalid = append(c.invalid, &lambdaidem.ConfigError{Option: option,
		Err: fmt.Errorf("%w: "+format, append([]any{lambdaidem.ErrInvalidOption}, args...)...)})
}

func newConfig(opts []Option) *config {
	c := &config{problemType: "about:blank", unavailableWait: DefaultUnavailableRetryAfter, maxKeyLen: DefaultMaxKeyLength,
		refusedStatus: DefaultWriteRefusedStatus}
	for _, o := range opts {
		o(c)
	}
	return c
}

// WithKeyOptional makes the header optional: a request without it runs the
// handler without idempotency. Default: required, a request without it
// gets 400. A present but invalid key gets 400 either way.
func WithKeyOptional() Option { return func(c *config) { c.optional = true } }

// WithAnonymousCallers accepts keyed requests that carry no caller
// identity (no authorizer, or one this package does not read and no
// WithCaller). All such requests share one key space per route: anyone who
// learns or guesses a key can replay that request's response or block it,
// so keys must be unguessable (the draft recommends UUIDs). Without this
// option such a request is refused with 500 (code
// idempotency-caller-unknown) and the handler does not run: an API that
// meant to identify its callers never silently mixes them.
func WithAnonymousCallers() Option { return func(c *config) { c.anonymous = true } }

// WithWriteRefusedStatus sets the status answered when the handler
// succeeded but the store refused its completion writes for good, most
// often because a condition of the caller's own write did not hold (a
// balance too low, a row that already exists). Nothing was written and
// the key may be retried. Default DefaultWriteRefusedStatus (409); 422
// suits conditions that check the request rather than the current state.
// A status outside 400-599 is refused when the handler is built.
func WithWriteRefusedStatus(status int) Option {
	return func(c *config) {
		if status < 400 || status > 599 {
			c.refuse("WithWriteRefusedStatus", "%d is not a 4xx or 5xx status", status)
			return
		}
		c.refusedStatus = status
	}
}

// WithCaller sets how the caller is told from the request, so two callers
// using the same key never see each other's responses. Req must be the
// wrapped handler's request type (events.APIGatewayProxyRequest for REST,
// events.APIGatewayV2HTTPRequest for HTTP), or construction panics. An
// empty result means the request has no caller (see
// WithAnonymousCallers). Default: the authorizer's identity (see the
// package documentation).
func WithCaller[Req any](f func(Req) string) Option {
	return func(c *config) { c.caller = f }
}

// WithWrapOptions passes options to lambdaidem.Wrap: the namespace, the
// retention, the lease, the logger, the clock. Set a fixed namespace in
// production (lambdaidem.WithNamespace). The key is always the header's,
// namespaced per route and caller: a key option of Wrap
// (lambdaidem.WithKeyJSONField, lambdaidem.WithWrapKey) is refused when
// the handler is built, as is any option Wrap refuses.
func WithWrapOptions(opts ...lambdaidem.Option) Option {
	return func(c *config) { c.wrapOpts = append(c.wrapOpts, opts...) }
}

// WithProblemType sets the "type" member of the problem bodies, typically
// a page documenting the API's idempotency rules, as the draft asks for.
// Default "about:blank", with the status phrase as the title. An empty
// URI is refused when the handler is built.
func WithProblemType(uri string) Option {
	return func(c *config) {
		if uri == "" {
			c.refuse("WithProblemType", "the URI is empty")
			return
		}
		c.problemType = uri
	}
}

// WithUnavailableRetryAfter sets the Retry-After of the 503 sent when the
// store is unavailable (default DefaultUnavailableRetryAfter). A duration
// that is not positive is refused when the handler is built.
func WithUnavailableRetryAfter(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.refuse("WithUnavailableRetryAfter", "a wait of %s", d)
			return
		}
		c.unavailableWait = d
	}
}

// WithMaxKeyLength bounds the key a client may send (default
// DefaultMaxKeyLength bytes). Longer keys get 400. A bound that is not
// positive is refused when the handler is built.
func WithMaxKeyLength(n int) Option {
	return func(c *config) {
		if n <= 0 {
			c.refuse("WithMaxKeyLength", "%d bytes; no key would fit", n)
			return
		}
		c.maxKeyLen = n
	}
}

// ParseKey reads an Idempotency-Key field value. The draft defines it as
// a Structured Field String (RFC 8941), `"8e03978e-..."`; a bare value of
// visible ASCII without quotes, backslashes, commas or spaces is accepted
// too, since many clients send one. Leading and trailing spaces are
// ignored. A comma outside quotes means the field was sent more than once
// (proxies join repeated fields with commas) and is refused.
func ParseKey(value string, maxLen int) (string, error) {
	v := trimOWS(value)
	if v == "" {
		return "", fmt.Errorf("%w: empty", ErrInvalidKey)
	}
	var key string
	if v[0] == '"' {
		k, rest, err := parseSFString(v)
		if err != nil {
			return "", err
		}
		if rest != "" {
			return "", fmt.Errorf("%w: text after the closing quote (sent more than once?)", ErrInvalidKey)
		}
		key = k
	} else {
		for i := 0; i < len(v); i++ {
			b := v[i]
			if b <= 0x20 || b >= 0x7f || b == '"' || b == '\\' || b == ',' {
				return "", fmt.Errorf("%w: byte %#x at %d is not allowed unquoted", ErrInvalidKey, b, i)
			}
		}
		key = v
	}
	switch {
	case key == "":
		return "", fmt.Errorf("%w: empty", ErrInvalidKey)
	case maxLen > 0 && len(key) > maxLen:
		return "", fmt.Errorf("%w: %d bytes, limit %d", ErrInvalidKey, len(key), maxLen)
	}
	return key, nil
}

// parseSFString parses an RFC 8941 sf-string at the start of s.
func parseSFString(s string) (str, rest string, err error) {
	buf := make([]byte, 0, len(s))
	for i := 1; i < len(s); i++ {
		b := s[i]
		switch {
		case b == '\\':
			i++
			if i == len(s) || (s[i] != '"' && s[i] != '\\') {
				return "", "", fmt.Errorf("%w: bad escape in quoted string", ErrInvalidKey)
			}
			buf = append(buf, s[i])
		case b == '"':
			return string(buf), trimOWS(s[i+1:]), nil
		case b < 0x20 || b >= 0x7f:
			return "", "", fmt.Errorf("%w: byte %#x is not allowed in a quoted string", ErrInvalidKey, b)
		default:
			buf = append(buf, b)
		}
	}
	return "", "", fmt.Errorf("%w: unterminated quoted string", ErrInvalidKey)
}

func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// keyFromValues reads the key from the header's values.
func keyFromValues(values []string, maxLen int) (string, error) {
	switch len(values) {
	case 0:
		return "", ErrMissingKey
	case 1:
		return ParseKey(values[0], maxLen)
	default:
		return "", fmt.Errorf("%w: sent %d times", ErrInvalidKey, len(values))
	}
}

// storeKey namespaces the client's key by route and caller. Route and
// caller are quoted so that no choice of either can make two different
// pairs produce the same stored key. A request without a caller ("") is
// stored under the bare word anonymous: a caller's identity is always
// quoted, so no caller, whatever it is called, shares that key space.
func storeKey(route, caller, key string) string {
	shareAnonymous := mutant.On("anonymous-shares-caller-key") // the bug: no caller stored as a caller named anonymous
	if shareAnonymous && caller == "" {
		caller = Anonymous
	}
	if caller == "" {
		return strconv.Quote(route) + " " + Anonymous + " " + key
	}
	return strconv.Quote(route) + " " + strconv.Quote(caller) + " " + key
}

// fingerprint is what the payload hash covers: the request line's method
// and path and the body. Its JSON encoding is what Wrap hashes; the body
// goes in as a digest so a large body is not copied into the encoding.
type fingerprint struct {
	Method     string `json:"method"`
	Path       string `json:"path"`
	BodySHA256 string `json:"body_sha256"`
	BodyBase64 bool   `json:"body_base64,omitempty"`
	// MethodHex and PathHex hold the method or path in hex, instead of
	// Method or Path, when it is not valid UTF-8: JSON would turn the bad
	// bytes into U+FFFD, and two different requests would hash alike.
	MethodHex string `json:"method_hex,omitempty"`
	PathHex   string `json:"path_hex,omitempty"`
}

func newFingerprint(method, path, body string, base64 bool) fingerprint {
	sum := sha256.Sum256([]byte(body))
	fp := fingerprint{Method: method, Path: path, BodySHA256: hex.EncodeToString(sum[:]), BodyBase64: base64}
	if !utf8.ValidString(method) {
		fp.Method, fp.MethodHex = "", hex.EncodeToString([]byte(method))
	}
	if !utf8.ValidString(path) {
		fp.Path, fp.PathHex = "", hex.EncodeToString([]byte(path))
	}
	return fp
}

// input is what Wrap sees. Only the fingerprint is JSON-encoded (and so
// hashed); the rest rides along unexported.
type input[Req, Resp any] struct {
	fingerprint
	key string
	req *Req
	st  *callState[Resp]
}

// callState tells the outer handler what happened inside Wrap during one
// call: Wrap's result alone cannot tell a fresh response from a replay.
type callState[Resp any] struct {
	ran      bool // the handler was called
	answered bool // the handler returned a response without error
	resp     Resp
}

// uncachedError carries a 5xx response through Wrap as a failure, so the
// key is left retryable instead of remembering a transient failure.
type uncachedError struct{ status int }

func (e *uncachedError) Error() string {
	return fmt.Sprintf("httpidem: handler answered %d; response not stored, the key may be retried", e.status)
}

// wrapKeyOptions are the options of Wrap that set the key, which the
// handlers set themselves.
var wrapKeyOptions = []string{"WithKeyJSONField", "WithWrapKey", "WithKeyMessageID", "WithKeyAttribute", "WithKeyDeduplicationID", "WithKeyFunc"}

// wrapNamed is lambdaidem.Wrap, whose refusals when built name the
// handler being built.
func wrapNamed[In, Out any](name string, store lambdaidem.Store, fn func(context.Context, In) (Out, error), opts []lambdaidem.Option) func(context.Context, In) (Out, error) {
	defer func() {
		if v := recover(); v != nil {
			if ce, ok := v.(*lambdaidem.ConfigError); ok {
				ce.Handler = name + " (lambdaidem.Wrap)"
			}
			panic(v)
		}
	}()
	return lambdaidem.Wrap(store, fn, opts...)
}

// adapter is what differs between the REST and HTTP API event types.
type adapter[Req, Resp any] struct {
	name        string // the constructor, for refusals when built
	keyValues   func(Req) []string
	route       func(Req) string
	caller      func(Req) string
	fingerprint func(Req) fingerprint
	status      func(Resp) int
	markReplay  func(*Resp)
	response    func(status int, headers map[string]string, body string) Resp
}

func newHandler[Req, Resp any](store lambdaidem.Store, h func(context.Context, Req) (Resp, error), a adapter[Req, Resp], opts []Option) func(context.Context, Req) (Resp, error) {
	if h == nil {
		panic("httpidem: nil handler")
	}
	c := newConfig(opts)
	fail := func(e *lambdaidem.ConfigError) {
		e.Handler = a.name
		panic(e)
	}
	if len(c.invalid) > 0 {
		fail(c.invalid[0])
	}
	if c.caller != nil {
		f, ok := c.caller.(func(Req) string)
		if !ok {
			fail(&lambdaidem.ConfigError{Option: "WithCaller",
				Err: fmt.Errorf("%w: the function %T does not take the handler's request type", lambdaidem.ErrInvalidOption, c.caller)})
		}
		a.caller = f
	}
	for _, name := range lambdaidem.OptionNames(c.wrapOpts...) {
		if slices.Contains(wrapKeyOptions, name) {
			fail(&lambdaidem.ConfigError{Option: "WithWrapOptions(" + name + ")",
				Err: fmt.Errorf("%w: the key is the Idempotency-Key header's, per route and caller", lambdaidem.ErrUnsupportedOption)})
		}
	}
	inner := func(ctx context.Context, in input[Req, Resp]) (Resp, error) {
		in.st.ran = true
		resp, err := h(ctx, *in.req)
		if err != nil {
			return resp, err
		}
		in.st.resp, in.st.answered = resp, true
		if s := a.status(resp); s >= 500 {
			return resp, &uncachedError{status: s}
		}
		return resp, nil
	}
	wopts := append(slices.Clone(c.wrapOpts), lambdaidem.WithEntryPoint(lambdaidem.EntryHTTP),
		lambdaidem.WithWrapKey(func(in input[Req, Resp]) (string, error) { return in.key, nil }))
	wrapped := wrapNamed(a.name, store, inner, wopts)

	return func(ctx context.Context, req Req) (Resp, error) {
		key, err := keyFromValues(a.keyValues(req), c.maxKeyLen)
		switch {
		case errors.Is(err, ErrMissingKey) && c.optional:
			return h(ctx, req)
		case errors.Is(err, ErrMissingKey):
			return writeProblem(a, c.problemType, http.StatusBadRequest, "idempotency-key-missing", "Idempotency-Key is missing",
				"This operation requires an Idempotency-Key header.", 0)
		case err != nil:
			return writeProblem(a, c.problemType, http.StatusBadRequest, "idempotency-key-invalid", "Idempotency-Key is invalid", err.Error(), 0)
		}
		caller := a.caller(req)
		if caller == "" && !c.anonymous {
			return writeProblem(a, c.problemType, http.StatusInternalServerError, "idempotency-caller-unknown", "Caller unknown",
				"This request carries no caller identity, so its Idempotency-Key cannot be kept apart from other callers' keys. It was not processed.", 0)
		}
		in := input[Req, Resp]{
			fingerprint: a.fingerprint(req),
			key:         storeKey(a.route(req), caller, key),
			req:         &req,
			st:          &callState[Resp]{},
		}
		resp, err := wrapped(ctx, in)
		var uncached *uncachedError
		answerUncommitted := mutant.On("http-answers-uncommitted-writes") // the bug: a 2xx claims an effect that did not commit
		switch {
		case in.st.answered && (err == nil || errors.As(err, &uncached) || answerUncommitted):
			// The handler's answer, stored, or a 5xx left unstored on
			// purpose. (Once the handler has answered without completion
			// writes, Wrap returns its answer even if recording it failed:
			// the effect has happened, and the client should learn of it.)
			return in.st.resp, nil
		case in.st.answered:
			// The handler answered, but Wrap reports that what had to
			// commit with the answer did not, or may not have: its answer
			// would claim an effect that did not happen.
		case in.st.ran && errors.Is(err, lambdaidem.ErrOutcomeUnknown):
			// The handler's error left the key dead-lettered as outcome
			// unknown: this request learns what every repeat will.
		case in.st.ran:
			return resp, err // the handler's own error, unchanged
		case err == nil:
			a.markReplay(&resp)
			return resp, nil
		}
		return answerError(a, c, err, in.st.answered)
	}
}

// answerError turns Wrap's error into a problem response. answered says
// the handler returned a response that must not be sent: an unexpected
// error then still gets a problem response, never the handler's answer.
func answerError[Req, Resp any](a adapter[Req, Resp], c *config, err error, answered bool) (Resp, error) {
	var ip *lambdaidem.InProgressError
	var rf *lambdaidem.RunFailedError
	switch {
	case errors.Is(err, lambdaidem.ErrDeadLettered):
		// ErrOutcomeUnknown wraps it; Wrap dead-letters a key for no
		// other reason, so a dead-lettered key's outcome is unknown.
		return writeProblem(a, c.problemType, StatusOutcomeUnknown, "idempotency-key-outcome-unknown", "Outcome of the original request is unknown",
			"It is not known whether the request with this Idempotency-Key took effect. It was set aside for reconciliation and will not be run again. Check the resource's state before you send the request with a new key.", 0)
	case errors.Is(err, lambdaidem.ErrWriteRefused):
		return writeProblem(a, c.problemType, c.refusedStatus, "idempotency-write-refused", "Request refused",
			"The request's changes were refused by a condition on the current state and nothing was written. The Idempotency-Key may be used again.", 0)
	case errors.Is(err, lambdaidem.ErrWritesNotCommitted) && (errors.Is(err, lambdaidem.ErrStoreUnavailable) || errors.Is(err, lambdaidem.ErrLeaseLost)):
		return writeProblem(a, c.problemType, http.StatusServiceUnavailable, "idempotency-not-committed", "Service unavailable",
			"The request's changes could not be confirmed. Retry with the same Idempotency-Key: you get the recorded response if they were made, and the request runs again if they were not.", c.unavailableWait)
	case errors.Is(err, lambdaidem.ErrWritesNotCommitted):
		return writeProblem(a, c.problemType, http.StatusInternalServerError, "idempotency-not-committed", "Internal Server Error",
			"The request's changes could not be written, and nothing was written.", 0)
	case errors.As(err, &ip):
		detail := "A request with the same Idempotency-Key is being processed; retry after the time in Retry-After."
		if ip.Waited > 0 {
			detail = "A request with the same Idempotency-Key is being processed; this request waited for it, and it had not finished. Retry after the time in Retry-After."
		}
		return writeProblem(a, c.problemType, http.StatusConflict, "idempotency-key-in-use", "A request is outstanding for this Idempotency-Key",
			detail, ip.RetryAfter)
	case errors.As(err, &rf):
		// The stored failure's text stays in the logs: it is the
		// server's, not the client's.
		return writeProblem(a, c.problemType, http.StatusServiceUnavailable, "idempotency-original-failed", "Service unavailable",
			"This request waited for an earlier request with the same Idempotency-Key, which failed; nothing of it was stored. Retry with the same Idempotency-Key: the request runs again.", c.unavailableWait)
	case errors.Is(err, lambdaidem.ErrKeyConflict):
		return writeProblem(a, c.problemType, http.StatusUnprocessableEntity, "idempotency-key-reused", "Idempotency-Key is already used",
			"This Idempotency-Key was used with a different request; a key must not be reused across different payloads.", 0)
	case errors.Is(err, lambdaidem.ErrLateReplay):
		return writeProblem(a, c.problemType, http.StatusUnprocessableEntity, "idempotency-key-expired", "Idempotency-Key result expired",
			"A request with this Idempotency-Key completed, but its response is no longer kept. It was not run again; check the resource's state and use a new key.", 0)
	case errors.Is(err, lambdaidem.ErrResultNotStored):
		return writeProblem(a, c.problemType, http.StatusUnprocessableEntity, "idempotency-response-not-stored", "Idempotency-Key response not stored",
			"A request with this Idempotency-Key completed, but its response could not be stored. It was not run again; check the resource's state and use a new key.", 0)
	case errors.Is(err, lambdaidem.ErrStoreUnavailable), errors.Is(err, context.DeadlineExceeded):
		return writeProblem(a, c.problemType, http.StatusServiceUnavailable, "idempotency-unavailable", "Service unavailable",
			"The request was not processed; retry it with the same Idempotency-Key.", c.unavailableWait)
	case answered:
		return writeProblem(a, c.problemType, http.StatusInternalServerError, "idempotency-not-recorded", "Internal Server Error",
			"The request's outcome could not be recorded. Retry with the same Idempotency-Key.", 0)
	default:
		var zero Resp
		return zero, err
	}
}

// problem is an RFC 9457 problem details object. Code is an extension
// member naming the case, stable for clients to switch on.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code"`
}

// writeProblem answers with an RFC 9457 problem body; retryAfter > 0 adds
// a Retry-After header in whole seconds, rounded up so a client never
// comes back too early.
func writeProblem[Req, Resp any](a adapter[Req, Resp], typ string, status int, code, title, detail string, retryAfter time.Duration) (Resp, error) {
	if typ == "about:blank" {
		// RFC 9457 section 4.2.1: with about:blank the title is the
		// status phrase.
		title = http.StatusText(status)
	}
	body, err := json.Marshal(problem{Type: typ, Title: title, Status: status, Detail: detail, Code: code})
	if err != nil {
		var zero Resp
		return zero, fmt.Errorf("httpidem: encode problem: %w", err)
	}
	headers := map[string]string{"Content-Type": ProblemContentType}
	if retryAfter > 0 {
		headers[HeaderRetryAfter] = strconv.FormatInt(retryAfterSeconds(retryAfter), 10)
	}
	return a.response(status, headers, string(body)), nil
}

func retryAfterSeconds(d time.Duration) int64 {
	return max(int64(math.Ceil(d.Seconds())), 1)
}
