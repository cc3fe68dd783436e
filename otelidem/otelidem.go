package otelidem

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-lambda-go/events"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// ScopeName is the instrumentation scope of the spans and metrics.
const ScopeName = "github.com/lambdaidem/go-lambdaidem/otelidem"

// The attributes this package adds beside OpenTelemetry's messaging
// conventions (messaging.system, messaging.operation.type and .name,
// messaging.destination.name, messaging.message.id,
// messaging.batch.message_count, error.type).
const (
	// AttrNamespace is the idempotency namespace (lambdaidem.WithNamespace).
	AttrNamespace = attribute.Key("lambdaidem.namespace")
	// AttrEntry is the entry point of a Wrap or httpidem record (wrap,
	// http: lambdaidem.EntryPoint); SQS records carry messaging.system.
	AttrEntry = attribute.Key("lambdaidem.entry")
	// AttrKeyHash is the hex SHA-256 of the record's stored key: the same
	// key always hashes alike, so one key's spans can be found without
	// the key itself being exported. Set unless WithRawKeys.
	AttrKeyHash = attribute.Key("lambdaidem.key.sha256")
	// AttrKey is the stored key itself, with WithRawKeys only.
	AttrKey = attribute.Key("lambdaidem.key")
	// AttrKeyError says why no key could be derived (the error's kind:
	// missing_key or malformed_body).
	AttrKeyError = attribute.Key("lambdaidem.key.error")
	// AttrOutcome is the record's lambdaidem.Outcome.
	AttrOutcome = attribute.Key("lambdaidem.outcome")
	// AttrAcked is false when the record was not acknowledged (SQS) or
	// the call returned an error (Wrap, httpidem); absent otherwise.
	AttrAcked = attribute.Key("lambdaidem.acked")
	// AttrAttempt is the claim's attempt number (1 on first delivery).
	AttrAttempt = attribute.Key("lambdaidem.attempt")
	// AttrReason is the dead-letter reason (lambdaidem.Reason).
	AttrReason = attribute.Key("lambdaidem.reason")
	// AttrReplayed is true when the record was answered from a completed
	// key without running the handler (a duplicate, a stored result).
	AttrReplayed = attribute.Key("lambdaidem.replayed")
	// AttrTakeover is true when the claim took over an abandoned lease.
	AttrTakeover = attribute.Key("lambdaidem.takeover")
	// AttrHandlerDuration is the handler's run time in seconds, when it ran.
	AttrHandlerDuration = attribute.Key("lambdaidem.handler.duration")
	// AttrStoreCalls and AttrStoreErrors count the store requests the
	// record made and those that failed, when some failed.
	AttrStoreCalls  = attribute.Key("lambdaidem.store.calls")
	AttrStoreErrors = attribute.Key("lambdaidem.store.errors")
	// AttrWait is the time, in seconds, the record spent waiting rather
	// than working (between store retries).
	AttrWait = attribute.Key("lambdaidem.wait")
	// AttrRetryDelay is how long, in seconds, the message was made
	// invisible before its next delivery (another holder's lease,
	// RetryAfter, backoff).
	AttrRetryDelay = attribute.Key("lambdaidem.retry_delay")
	// AttrMessageGroup is an SQS record's MessageGroupId.
	AttrMessageGroup = attribute.Key("lambdaidem.message_group_id")
	// AttrReceiveCount is an SQS record's ApproximateReceiveCount, past
	// its first delivery.
	AttrReceiveCount = attribute.Key("lambdaidem.receive_count")
	// AttrFailed counts an invocation's records that were not
	// acknowledged.
	AttrFailed = attribute.Key("lambdaidem.failed")
	// AttrLinkSource says where a link to the producer's trace was read:
	// AWSTraceHeader, or message_attributes (the propagator's fields).
	AttrLinkSource = attribute.Key("lambdaidem.link.source")
)

// Option configures New.
type Option func(*config)

type config struct {
	tp         trace.TracerProvider
	mp         metric.MeterProvider
	prop       propagation.TextMapPropagator
	rawKeys    bool
	tenants    bool
	noInvLinks bool
}

// WithTracerProvider sets where spans go (default: the global provider,
// otel.GetTracerProvider, as it is when New is called).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) {
		if tp != nil {
			c.tp = tp
		}
	}
}

// WithMeterProvider turns on the metrics, through mp: the counts the emf
// package writes as CloudWatch metrics, for functions that
// export OTLP instead. Off by default. The doc of this package lists them.
func WithMeterProvider(mp metric.MeterProvider) Option { return func(c *config) { c.mp = mp } }

// WithPropagator sets how an SQS message's attributes are read for the
// producer's trace context (default propagation.TraceContext: the
// traceparent and tracestate message attributes, as the producer package
// writes them). The AWSTraceHeader system attribute is read as well,
// whatever the propagator.
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(c *config) {
		if p != nil {
			c.prop = p
		}
	}
}

// WithRawKeys puts the stored key itself on record spans (AttrKey),
// instead of its hash (AttrKeyHash). Keys come from message bodies and
// requests: an order ID is harmless, an e-mail address is not. Off by
// default.
func WithRawKeys() Option { return func(c *config) { c.rawKeys = true } }

// WithTenantAttribute adds the record's MessageGroupId to its metrics as
// lambdaidem.tenant, as emf.WithTenantDimension does: one series per
// group, so use it when groups are a bounded set of tenants.
func WithTenantAttribute() Option { return func(c *config) { c.tenants = true } }

// Observer turns the decorator's work into spans (and, with
// WithMeterProvider, metrics). Pass it with lambdaidem.WithObserver; it
// is safe for concurrent use by any number of decorators.
type Observer struct {
	c       config
	tracer  trace.Tracer
	metrics *meters
	names   sync.Map // namespace -> record span name
}

var _ lambdaidem.Observer = (*Observer)(nil)

// New returns an Observer.
func New(opts ...Option) *Observer {
	c := config{prop: propagation.TraceContext{}}
	for _, o := range opts {
		o(&c)
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	o := &Observer{c: c, tracer: c.tp.Tracer(ScopeName)}
	if c.mp != nil {
		o.metrics = newMeters(c.mp, c.tenants)
	}
	return o
}

// invocation is what a record span reads of its invocation, and the
// span InvocationEnd ends.
type invocation struct {
	span  trace.Span
	queue string
	links [][]trace.Link // per record, by index
}

type invocationKey struct{}

// record is what RecordEnd reads of its record's start.
type record struct {
	span      trace.Span
	entry     lambdaidem.EntryPoint
	namespace string
	group     string
}

type recordKey struct{}

var (
	sqsSystem   = semconv.MessagingSystemAWSSQS
	processType = semconv.MessagingOperationTypeProcess
	processName = semconv.MessagingOperationName("process")
)

// InvocationStart starts the invocation's span, a child of the span the
// context carries (the Lambda instrumentation's, when there is one), and
// reads the records' links to their producers.
func (o *Observer) InvocationStart(ctx context.Context, info lambdaidem.InvocationInfo) context.Context {
	inv := &invocation{links: make([][]trace.Link, len(info.Records))}
	var all []trace.Link
	for i := range info.Records {
		m := &info.Records[i]
		if inv.queue == "" {
			inv.queue = queueName(m.EventSourceARN)
		}
		inv.links[i] = o.producerLinks(m)
		all = append(all, inv.links[i]...)
	}
	ctx, inv.span = o.tracer.Start(ctx, spanName("process", inv.queue), trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithLinks(all...),
		trace.WithAttributes(sqsSystem, processType, processName,
			semconv.MessagingDestinationName(inv.queue),
			semconv.MessagingBatchMessageCount(len(info.Records)),
			AttrNamespace.String(info.Namespace)))
	return context.WithValue(ctx, invocationKey{}, inv)
}

// InvocationEnd ends the invocation's span with its counts.
func (o *Observer) InvocationEnd(ctx context.Context, rep *lambdaidem.InvocationReport) {
	// Only a span this observer started: never the Lambda span above it.
	inv, ok := ctx.Value(invocationKey{}).(*invocation)
	if !ok || inv.span == nil {
		return
	}
	inv.span.SetAttributes(AttrFailed.Int(rep.Failed))
	inv.span.End()
}

// RecordStart starts the record's span. An SQS record's span is a child
// of its invocation's, links to the trace its message carries, and
// follows the messaging conventions; a Wrap call's span is a child of the
// span its context carries.
func (o *Observer) RecordStart(ctx context.Context, info lambdaidem.RecordInfo) context.Context {
	buf := attrPool.Get().(*[]attribute.KeyValue)
	defer putAttrs(buf)
	// What samplers read goes to the start; the rest only to a span that
	// records.
	attrs := append((*buf)[:0], AttrNamespace.String(info.Namespace))
	kind := spanInternal
	var links []trace.Link
	m := info.Message
	if m != nil {
		kind = spanConsumer
		queue := ""
		if inv, ok := ctx.Value(invocationKey{}).(*invocation); ok && info.Index < len(inv.links) {
			links, queue = inv.links[info.Index], inv.queue
		} else {
			links = o.producerLinks(m)
		}
		if queue == "" {
			queue = queueName(m.EventSourceARN)
		}
		attrs = append(attrs, sqsSystem, processType, processName,
			semconv.MessagingDestinationName(queue), semconv.MessagingMessageID(m.MessageId))
	} else {
		attrs = append(attrs, AttrEntry.String(string(info.Entry)))
	}
	var span trace.Span
	if len(links) > 0 {
		ctx, span = o.tracer.Start(ctx, o.name(info.Namespace), kind, trace.WithAttributes(attrs...), trace.WithLinks(links...))
	} else {
		ctx, span = o.tracer.Start(ctx, o.name(info.Namespace), kind, trace.WithAttributes(attrs...))
	}
	*buf = attrs
	recording := span.IsRecording()
	if !recording && o.metrics == nil {
		// Nothing to add or to count: the context carries the span's
		// context for the handler's own spans, and RecordEnd has nothing
		// to do.
		return ctx
	}
	rec := &record{span: span, entry: info.Entry, namespace: info.Namespace}
	if m != nil {
		rec.group = m.Attributes["MessageGroupId"]
	}
	if recording {
		attrs = attrs[:0]
		switch {
		case info.KeyErr != nil:
			attrs = append(attrs, AttrKeyError.String(keyErrorKind(info.KeyErr)))
		case o.c.rawKeys:
			attrs = append(attrs, AttrKey.String(info.Key))
		default:
			attrs = append(attrs, AttrKeyHash.String(hashKey(info.Key)))
		}
		if rec.group != "" {
			attrs = append(attrs, AttrMessageGroup.String(rec.group))
		}
		if m != nil {
			if n, err := strconv.Atoi(m.Attributes["ApproximateReceiveCount"]); err == nil && n > 1 {
				attrs = append(attrs, AttrReceiveCount.Int(n))
			}
		}
		span.SetAttributes(attrs...)
		*buf = attrs
	}
	return context.WithValue(ctx, recordKey{}, rec)
}

// attrPool holds the attribute lists records are built in: the SDK copies
// what it is given, so a list serves the next record once a span call
// returned.
var attrPool = sync.Pool{New: func() any { s := make([]attribute.KeyValue, 0, 16); return &s }}

func putAttrs(buf *[]attribute.KeyValue) {
	clear(*buf) // no reference to a record's strings outlives it
	*buf = (*buf)[:0]
	attrPool.Put(buf)
}

// The span kinds, made once.
var (
	spanInternal = trace.WithSpanKind(trace.SpanKindInternal)
	spanConsumer = trace.WithSpanKind(trace.SpanKindConsumer)
)

// name is the span name of a namespace's records, made once per namespace.
func (o *Observer) name(namespace string) string {
	if v, ok := o.names.Load(namespace); ok {
		return v.(string)
	}
	n := spanName("lambdaidem", namespace)
	o.names.Store(namespace, n)
	return n
}

// RecordEnd ends the record's span with its outcome, and counts the
// record in the metrics. Attributes with their usual value (no reason, no
// takeover, no wait) are left out.
func (o *Observer) RecordEnd(ctx context.Context, rep *lambdaidem.RecordReport) {
	rec, ok := ctx.Value(recordKey{}).(*record)
	if !ok {
		return
	}
	if o.metrics != nil {
		o.metrics.record(ctx, rec, rep)
	}
	span := rec.span
	if !span.IsRecording() {
		span.End()
		return
	}
	buf := attrPool.Get().(*[]attribute.KeyValue)
	defer putAttrs(buf)
	attrs := append((*buf)[:0], AttrOutcome.String(string(rep.Outcome)))
	if rep.Attempt > 0 {
		attrs = append(attrs, AttrAttempt.Int(rep.Attempt))
	}
	if !rep.Acked {
		attrs = append(attrs, AttrAcked.Bool(false))
	}
	if replayed(rep.Outcome) {
		attrs = append(attrs, AttrReplayed.Bool(true))
	}
	if rep.Reason != "" {
		attrs = append(attrs, AttrReason.String(string(rep.Reason)))
	}
	if rep.Takeover {
		attrs = append(attrs, AttrTakeover.Bool(true))
	}
	if rep.HandlerRan {
		attrs = append(attrs, AttrHandlerDuration.Float64(rep.HandlerDuration.Seconds()))
	}
	if rep.StoreErrors > 0 {
		attrs = append(attrs, AttrStoreCalls.Int(rep.StoreCalls), AttrStoreErrors.Int(rep.StoreErrors))
	}
	if rep.Waited > 0 {
		attrs = append(attrs, AttrWait.Float64(rep.Waited.Seconds()))
	}
	if rep.RetryDelay > 0 {
		attrs = append(attrs, AttrRetryDelay.Float64(rep.RetryDelay.Seconds()))
	}
	if failed(rep) {
		attrs = append(attrs, semconv.ErrorTypeKey.String(string(rep.Outcome)))
		span.SetStatus(codes.Error, o.describe(rep))
	}
	span.SetAttributes(attrs...)
	*buf = attrs
	span.End()
}

// failed reports whether a record's span carries an error status: its
// work did not happen as asked (a handler's failure, a dead letter, the
// store's trouble, a conflict), not merely a wait for another holder.
func failed(rep *lambdaidem.RecordReport) bool {
	return rep.Err != nil && rep.Outcome != lambdaidem.OutcomeInProgress
}

// describe is the status description of a failed record: its error, with
// the key replaced by its hash unless raw keys are on (errors quote keys).
func (o *Observer) describe(rep *lambdaidem.RecordReport) string {
	text := rep.Err.Error()
	if o.c.rawKeys || rep.Key == "" {
		return text
	}
	h := "sha256:" + hashKey(rep.Key)
	if q := strconv.Quote(rep.Key); strings.Contains(text, q) {
		text = strings.ReplaceAll(text, q, h)
	}
	return strings.ReplaceAll(text, rep.Key, h)
}

// replayed reports whether an outcome answered from a completed key.
func replayed(o lambdaidem.Outcome) bool {
	return o == lambdaidem.OutcomeDuplicate || o == lambdaidem.OutcomeCachedDuplicate
}

// hashKey is the hex SHA-256 of a stored key.
func hashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	var h [2 * sha256.Size]byte
	hex.Encode(h[:], sum[:])
	return string(h[:])
}

// keyErrorKind names a key error by its kind, never its text (which may
// quote the body).
func keyErrorKind(err error) string {
	if errors.Is(err, lambdaidem.ErrMalformedBody) {
		return string(lambdaidem.ReasonMalformedBody)
	}
	return string(lambdaidem.ReasonMissingKey)
}

// queueName is the last field of a queue ARN ("" when there is none).
func queueName(arn string) string {
	if i := strings.LastIndexByte(arn, ':'); i >= 0 {
		return arn[i+1:]
	}
	return arn
}

func spanName(op, name string) string {
	if name == "" {
		return op
	}
	return op + " " + name
}

// producerLinks are the links from a message to the traces it carries:
// the X-Ray header SQS delivers as AWSTraceHeader, and whatever the
// propagator reads from its message attributes. A header that cannot be
// read gives no link; two naming one span give one.
func (o *Observer) producerLinks(m *events.SQSMessage) []trace.Link {
	var links []trace.Link
	if h := m.Attributes[AWSTraceHeader]; h != "" {
		if sc, err := ParseAWSTraceHeader(h); err == nil {
			links = append(links, trace.Link{SpanContext: sc, Attributes: fromTraceHeader})
		}
	}
	if len(m.MessageAttributes) > 0 {
		sc := trace.SpanContextFromContext(o.c.prop.Extract(context.Background(), messageCarrier(m.MessageAttributes)))
		if sc.IsValid() && (len(links) == 0 || !sameSpan(links[0].SpanContext, sc)) {
			links = append(links, trace.Link{SpanContext: sc, Attributes: fromMessageAttributes})
		}
	}
	return links
}

// The attributes of links, by where they were read; never changed.
var (
	fromTraceHeader       = []attribute.KeyValue{AttrLinkSource.String(AWSTraceHeader)}
	fromMessageAttributes = []attribute.KeyValue{AttrLinkSource.String("message_attributes")}
)

func sameSpan(a, b trace.SpanContext) bool {
	return a.TraceID() == b.TraceID() && a.SpanID() == b.SpanID()
}

// messageCarrier reads an SQS record's String message attributes for a
// propagator. Extraction only: Set does nothing.
type messageCarrier map[string]events.SQSMessageAttribute

func (c messageCarrier) Get(key string) string {
	a, ok := c[key]
	if !ok || a.StringValue == nil || (a.DataType != "String" && !strings.HasPrefix(a.DataType, "String.")) {
		return ""
	}
	return *a.StringValue
}

func (c messageCarrier) Set(string, string) {}

func (c messageCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
