package otelidem_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/lambdaidem/go-lambdaidem/httpidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
	"github.com/lambdaidem/go-lambdaidem/otelidem"
)

const queueARN = "arn:aws:sqs:eu-west-1:123456789012:orders"

// tracing is a real SDK tracer provider whose spans a test reads.
type tracing struct {
	rec *tracetest.SpanRecorder
	tp  *sdktrace.TracerProvider
}

func newTracing(t *testing.T) *tracing {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return &tracing{rec: rec, tp: tp}
}

func (tr *tracing) spans() []sdktrace.ReadOnlySpan { return tr.rec.Ended() }

// byName returns the ended spans with the given name.
func (tr *tracing) byName(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range tr.spans() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func attr(s sdktrace.ReadOnlySpan, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func str(s sdktrace.ReadOnlySpan, k attribute.Key) string {
	v, _ := attr(s, k)
	return v.Emit()
}

// recordSpan returns the record span of an SQS message's first delivery.
func (tr *tracing) recordSpan(t *testing.T, msgID string) sdktrace.ReadOnlySpan {
	t.Helper()
	var found []sdktrace.ReadOnlySpan
	for _, s := range tr.byName("lambdaidem orders") {
		if str(s, "messaging.message.id") == msgID {
			found = append(found, s)
		}
	}
	if len(found) == 0 {
		t.Fatalf("no record span for message %s (spans: %v)", msgID, names(tr.spans()))
	}
	return found[0] // the first delivery's
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name())
	}
	return out
}

func message(id, body string) events.SQSMessage {
	return events.SQSMessage{
		MessageId: id, Body: body, EventSourceARN: queueARN, ReceiptHandle: "rh-" + id,
		Attributes: map[string]string{"ApproximateReceiveCount": "1"},
	}
}

type sink struct {
	mu    sync.Mutex
	sends int
}

func (s *sink) Send(context.Context, lambdaidem.DeadLetter) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sends++
	return "dl-1", nil
}

// tracedStore starts a span for each store request, as an instrumented
// SDK client would, under the context it is given.
type tracedStore struct {
	lambdaidem.Store
	tracer trace.Tracer
}

func (s tracedStore) Claim(ctx context.Context, r idemstore.ClaimRequest) (idemstore.ClaimResult, error) {
	_, span := s.tracer.Start(ctx, "store Claim")
	defer span.End()
	return s.Store.Claim(ctx, r)
}

func (s tracedStore) Complete(ctx context.Context, r idemstore.CompleteRequest) error {
	_, span := s.tracer.Start(ctx, "store Complete")
	defer span.End()
	return s.Store.Complete(ctx, r)
}

func quiet() lambdaidem.Option {
	return lambdaidem.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func TestSQSSpans(t *testing.T) {
	tr := newTracing(t)
	store := tracedStore{Store: memstore.New(), tracer: tr.tp.Tracer("store")}
	handle := func(ctx context.Context, m events.SQSMessage) error {
		_, span := tr.tp.Tracer("user").Start(ctx, "user work "+m.MessageId)
		defer span.End()
		switch m.Body {
		case "fail":
			return errors.New("downstream says no")
		case "poison":
			return lambdaidem.Poison(errors.New("cannot parse order k-poison"))
		}
		return nil
	}
	h := lambdaidem.SQS(store, handle, quiet(), lambdaidem.WithNamespace("orders"),
		lambdaidem.WithKeyFunc(func(m events.SQSMessage) (string, error) { return "k-" + m.Body, nil }),
		lambdaidem.WithDeadLetterSink(&sink{}),
		lambdaidem.WithObserver(otelidem.New(otelidem.WithTracerProvider(tr.tp))))

	// The producer's spans: one traced by X-Ray, one by W3C trace context.
	producer := tr.tp.Tracer("producer")
	_, xraySpan := producer.Start(context.Background(), "send with x-ray")
	xraySpan.End()
	pctx, w3cSpan := producer.Start(context.Background(), "send with traceparent")
	w3cSpan.End()
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(pctx, carrier)

	ok := message("m-ok", "ok")
	ok.Attributes[otelidem.AWSTraceHeader] = otelidem.FormatAWSTraceHeader(xraySpan.SpanContext())
	failing := message("m-fail", "fail")
	tp := carrier.Get("traceparent")
	failing.MessageAttributes = map[string]events.SQSMessageAttribute{"traceparent": {DataType: "String", StringValue: &tp}}
	poison := message("m-poison", "poison")

	// The Lambda instrumentation's span is the invocation's parent.
	lctx, lambdaSpan := tr.tp.Tracer("lambda").Start(context.Background(), "lambda invocation")
	lctx, cancel := context.WithTimeout(lctx, time.Minute)
	defer cancel()
	if _, err := h(lctx, events.SQSEvent{Records: []events.SQSMessage{ok, failing, poison}}); err != nil {
		t.Fatal(err)
	}
	// The same message again: a duplicate.
	dup := ok
	dup.Attributes = map[string]string{"ApproximateReceiveCount": "2", otelidem.AWSTraceHeader: ok.Attributes[otelidem.AWSTraceHeader]}
	if _, err := h(lctx, events.SQSEvent{Records: []events.SQSMessage{dup}}); err != nil {
		t.Fatal(err)
	}
	lambdaSpan.End()

	invs := tr.byName("process orders")
	if len(invs) != 2 {
		t.Fatalf("%d invocation spans, want 2: %v", len(invs), names(tr.spans()))
	}
	inv := invs[0]
	if inv.Parent().SpanID() != lambdaSpan.SpanContext().SpanID() || inv.SpanKind() != trace.SpanKindConsumer {
		t.Errorf("invocation span: parent %s kind %s, want the Lambda span and consumer", inv.Parent().SpanID(), inv.SpanKind())
	}
	for k, want := range map[attribute.Key]string{"messaging.system": "aws_sqs", "messaging.operation.type": "process",
		"messaging.destination.name": "orders", "messaging.batch.message_count": "3", otelidem.AttrFailed: "1", otelidem.AttrNamespace: "orders"} {
		if got := str(inv, k); got != want {
			t.Errorf("invocation span %s = %q, want %q", k, got, want)
		}
	}
	if len(inv.Links()) != 2 {
		t.Errorf("invocation span has %d links, want its records' 2", len(inv.Links()))
	}

	cases := []struct {
		id, outcome, reason string
		attempt             int64
		status              codes.Code
		replayed            bool
		link                trace.SpanContext
		source              string
	}{
		{"m-ok", "processed", "", 1, codes.Unset, false, xraySpan.SpanContext(), otelidem.AWSTraceHeader},
		{"m-fail", "failed", "", 1, codes.Error, false, w3cSpan.SpanContext(), "message_attributes"},
		{"m-poison", "dead_lettered", "poison", 1, codes.Error, false, trace.SpanContext{}, ""},
	}
	for _, c := range cases {
		s := tr.recordSpan(t, c.id)
		if s.Parent().SpanID() != inv.SpanContext().SpanID() || s.SpanKind() != trace.SpanKindConsumer {
			t.Errorf("%s: parent %s kind %s, want the invocation span and consumer", c.id, s.Parent().SpanID(), s.SpanKind())
		}
		if got := str(s, otelidem.AttrOutcome); got != c.outcome {
			t.Errorf("%s: outcome %q, want %q", c.id, got, c.outcome)
		}
		if got := str(s, otelidem.AttrReason); got != c.reason {
			t.Errorf("%s: reason %q, want %q", c.id, got, c.reason)
		}
		if v, _ := attr(s, otelidem.AttrAttempt); v.AsInt64() != c.attempt {
			t.Errorf("%s: attempt %v, want %d", c.id, v.AsInt64(), c.attempt)
		}
		if s.Status().Code != c.status {
			t.Errorf("%s: status %v (%q), want %v", c.id, s.Status().Code, s.Status().Description, c.status)
		}
		if str(s, "messaging.system") != "aws_sqs" || str(s, "messaging.destination.name") != "orders" || str(s, "messaging.operation.type") != "process" {
			t.Errorf("%s: messaging attributes %v", c.id, s.Attributes())
		}
		if _, raw := attr(s, otelidem.AttrKey); raw || len(str(s, otelidem.AttrKeyHash)) != 64 {
			t.Errorf("%s: key attributes %v, want the hash only", c.id, s.Attributes())
		}
		switch {
		case c.link.IsValid() && (len(s.Links()) != 1 || !s.Links()[0].SpanContext.Equal(c.link.WithRemote(true))):
			t.Errorf("%s: links %+v, want one to %s", c.id, s.Links(), c.link.SpanID())
		case c.link.IsValid() && s.Links()[0].Attributes[0].Value.AsString() != c.source:
			t.Errorf("%s: link attributes %v, want source %s", c.id, s.Links()[0].Attributes, c.source)
		case !c.link.IsValid() && len(s.Links()) != 0:
			t.Errorf("%s: links %+v, want none", c.id, s.Links())
		}
		// The user's span and the store's requests nest under the record.
		for _, child := range []string{"user work " + c.id, "store Claim"} {
			if !hasChild(tr.spans(), s, child) {
				t.Errorf("%s: no %q span under the record span", c.id, child)
			}
		}
	}
	if s := tr.recordSpan(t, "m-poison"); !strings.Contains(s.Status().Description, "cannot parse") || str(s, "error.type") != "dead_lettered" {
		t.Errorf("poison status %q, error.type %q", s.Status().Description, str(s, "error.type"))
	}
	if !hasChild(tr.spans(), tr.recordSpan(t, "m-ok"), "store Complete") {
		t.Errorf("the completion did not run under the record span")
	}

	// The duplicate: replayed, not an error, still linked.
	var dupSpan sdktrace.ReadOnlySpan
	for _, s := range tr.byName("lambdaidem orders") {
		if str(s, otelidem.AttrOutcome) == "duplicate" {
			dupSpan = s
		}
	}
	if dupSpan == nil {
		t.Fatal("no duplicate record span")
	}
	if v, _ := attr(dupSpan, otelidem.AttrReplayed); !v.AsBool() || dupSpan.Status().Code != codes.Unset || len(dupSpan.Links()) != 1 {
		t.Errorf("duplicate span: replayed %v, status %v, links %d", v.AsBool(), dupSpan.Status().Code, len(dupSpan.Links()))
	}
	if v, _ := attr(dupSpan, otelidem.AttrReceiveCount); v.AsInt64() != 2 {
		t.Errorf("duplicate span receive count %v", v.AsInt64())
	}
}

func hasChild(spans []sdktrace.ReadOnlySpan, parent sdktrace.ReadOnlySpan, name string) bool {
	for _, s := range spans {
		if s.Name() == name && s.Parent().SpanID() == parent.SpanContext().SpanID() {
			return true
		}
	}
	return false
}

func TestRawKeysAndHashedErrors(t *testing.T) {
	for _, raw := range []bool{false, true} {
		tr := newTracing(t)
		opts := []otelidem.Option{otelidem.WithTracerProvider(tr.tp)}
		if raw {
			opts = append(opts, otelidem.WithRawKeys())
		}
		store := memstore.New()
		mk := func() func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
			return lambdaidem.SQS(store, func(context.Context, events.SQSMessage) error { return nil }, quiet(),
				lambdaidem.WithNamespace("orders"), lambdaidem.WithKeyJSONField("order"),
				lambdaidem.WithObserver(otelidem.New(opts...)))
		}
		h := mk()
		_, _ = h(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", `{"order":"alice@example.com"}`)}})
		// The same key, another body: a conflict, whose error quotes the key.
		_, _ = h(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m2", `{"order":"alice@example.com","n":2}`)}})
		s := tr.recordSpan(t, "m2")
		leaked := strings.Contains(s.Status().Description, "alice@example.com")
		if _, hasRaw := attr(s, otelidem.AttrKey); hasRaw != raw || leaked != raw {
			t.Errorf("raw keys %t: key attribute %t, key in the status %q", raw, hasRaw, s.Status().Description)
		}
		if str(s, otelidem.AttrOutcome) != "conflict" || s.Status().Code != codes.Error {
			t.Errorf("conflict span: %v %v", s.Attributes(), s.Status())
		}
	}
}

func TestWrapAndHTTPSpans(t *testing.T) {
	tr := newTracing(t)
	obs := otelidem.New(otelidem.WithTracerProvider(tr.tp))
	store := memstore.New()
	f := lambdaidem.Wrap(store, func(ctx context.Context, in string) (string, error) {
		_, span := tr.tp.Tracer("user").Start(ctx, "user work")
		defer span.End()
		if in == "bad" {
			return "", errors.New("refused")
		}
		return in + "!", nil
	}, quiet(), lambdaidem.WithNamespace("calls"), lambdaidem.WithObserver(obs))
	ctx, parent := tr.tp.Tracer("caller").Start(context.Background(), "caller")
	for _, in := range []string{"a", "a", "bad"} {
		_, _ = f(ctx, in)
	}
	parent.End()
	spans := tr.byName("lambdaidem calls")
	if len(spans) != 3 {
		t.Fatalf("%d call spans, want 3: %v", len(spans), names(tr.spans()))
	}
	want := []struct {
		outcome string
		status  codes.Code
	}{{"processed", codes.Unset}, {"duplicate", codes.Unset}, {"failed", codes.Error}}
	for i, s := range spans {
		if s.Parent().SpanID() != parent.SpanContext().SpanID() || s.SpanKind() != trace.SpanKindInternal || str(s, otelidem.AttrEntry) != "wrap" {
			t.Errorf("call %d: parent %s kind %s entry %q", i, s.Parent().SpanID(), s.SpanKind(), str(s, otelidem.AttrEntry))
		}
		if str(s, otelidem.AttrOutcome) != want[i].outcome || s.Status().Code != want[i].status {
			t.Errorf("call %d: outcome %q status %v, want %s %v", i, str(s, otelidem.AttrOutcome), s.Status().Code, want[i].outcome, want[i].status)
		}
		if _, ok := attr(s, "messaging.system"); ok {
			t.Errorf("call %d has messaging attributes", i)
		}
	}
	if !hasChild(tr.spans(), spans[0], "user work") {
		t.Error("the function's span is not under its call's span")
	}

	h := httpidem.HTTP(store, func(ctx context.Context, r events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{StatusCode: 201}, nil
	}, httpidem.WithAnonymousCallers(), httpidem.WithWrapOptions(quiet(), lambdaidem.WithNamespace("api"), lambdaidem.WithObserver(obs)))
	req := events.APIGatewayV2HTTPRequest{RawPath: "/pay", RouteKey: "POST /pay", Headers: map[string]string{"idempotency-key": "k-1"}}
	req.RequestContext.HTTP.Method = "POST"
	for range 2 {
		if resp, err := h(context.Background(), req); err != nil || resp.StatusCode != 201 {
			t.Fatalf("HTTP answered %d, %v", resp.StatusCode, err)
		}
	}
	hs := tr.byName("lambdaidem api")
	if len(hs) != 2 || str(hs[0], otelidem.AttrEntry) != "http" || str(hs[1], otelidem.AttrOutcome) != "duplicate" {
		t.Fatalf("HTTP spans %d: %v / %v", len(hs), hs[0].Attributes(), hs[len(hs)-1].Attributes())
	}
	if v, _ := attr(hs[1], otelidem.AttrReplayed); !v.AsBool() {
		t.Errorf("the replayed request's span does not say so")
	}
}

func TestUnsampledSpansCostNoAttributes(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()), sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	h := lambdaidem.SQS(memstore.New(), func(context.Context, events.SQSMessage) error { return nil }, quiet(),
		lambdaidem.WithObserver(otelidem.New(otelidem.WithTracerProvider(tp))))
	resp, err := h(context.Background(), events.SQSEvent{Records: []events.SQSMessage{message("m1", "x")}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v, %v", resp.BatchItemFailures, err)
	}
	if n := len(rec.Ended()); n != 0 {
		t.Errorf("%d spans recorded by a sampler that never samples", n)
	}
}

// An end without its start (the start panicked, say) never ends the span
// above it: the Lambda instrumentation's span is not otelidem's to end.
func TestEndsOnlyItsOwnSpans(t *testing.T) {
	tr := newTracing(t)
	obs := otelidem.New(otelidem.WithTracerProvider(tr.tp))
	ctx, lambdaSpan := tr.tp.Tracer("lambda").Start(context.Background(), "lambda invocation")
	obs.RecordEnd(ctx, &lambdaidem.RecordReport{Outcome: lambdaidem.OutcomeProcessed, Acked: true})
	obs.InvocationEnd(ctx, &lambdaidem.InvocationReport{})
	if n := len(tr.spans()); n != 0 || !lambdaSpan.IsRecording() {
		t.Errorf("%d spans ended, the Lambda span recording %t: otelidem ended a span it did not start", n, lambdaSpan.IsRecording())
	}
	lambdaSpan.End()
}
