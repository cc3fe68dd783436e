package producer_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
	"github.com/lambdaidem/go-lambdaidem/otelidem"
	"github.com/lambdaidem/go-lambdaidem/producer"
)

// A message sent inside a span carries its trace context through SQS, and
// the consumer's record span links to the sender's span.
func TestTraceContextReachesTheConsumer(t *testing.T) {
	t.Parallel()
	client, rs := testenv.SQSWithResends(t)
	url, arn := newQueue(t, client, false)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer func() { _ = tp.Shutdown(context.Background()) }()

	p := producer.New(client, url, producer.WithTraceContext(otelidem.TraceInjector(propagation.TraceContext{})))
	ctx, send := tp.Tracer("checkout").Start(t.Context(), "place order")
	if _, err := p.Send(ctx, producer.Message{Key: "order-42", Body: `{"order_id":"42"}`}); err != nil {
		t.Fatal(err)
	}
	send.End()

	got := receiveN(t, client, rs, url, 1)
	if tp := aws.ToString(got[0].MessageAttributes["traceparent"].StringValue); tp == "" {
		t.Fatalf("message attributes %v lack traceparent", got[0].MessageAttributes)
	}
	h := lambdaidem.SQS(memstore.New(), func(context.Context, events.SQSMessage) error { return nil },
		lambdaidem.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		lambdaidem.WithNamespace("orders"), lambdaidem.WithKeyAttribute(producer.DefaultKeyAttribute),
		lambdaidem.WithObserver(otelidem.New(otelidem.WithTracerProvider(tp))))
	if _, err := h(t.Context(), events.SQSEvent{Records: []events.SQSMessage{toEvent(got[0], arn)}}); err != nil {
		t.Fatal(err)
	}
	var linked bool
	for _, s := range spans.Ended() {
		if s.Name() != "lambdaidem orders" {
			continue
		}
		for _, l := range s.Links() {
			linked = linked || (l.SpanContext.TraceID() == send.SpanContext().TraceID() && l.SpanContext.SpanID() == send.SpanContext().SpanID())
		}
	}
	if !linked {
		t.Errorf("no record span links to the sender's span %s", send.SpanContext().SpanID())
	}
}

// captureAPI keeps what the producer would send.
type captureAPI struct {
	producer.API
	in *sqs.SendMessageInput
}

func (c *captureAPI) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	c.in = in
	return &sqs.SendMessageOutput{MessageId: aws.String("m-1")}, nil
}

// The trace context takes only the attributes SQS has left, never one of
// the message's own, and never stops a send.
func TestTraceContextFitsTheAttributeLimit(t *testing.T) {
	t.Parallel()
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ts, err := trace.ParseTraceState("vendor=value")
	if err != nil {
		t.Fatal(err)
	}
	ctx, span := tp.Tracer("t").Start(t.Context(), "send")
	defer span.End()
	ctx = trace.ContextWithSpanContext(ctx, span.SpanContext().WithTraceState(ts))
	own := func(n int) map[string]types.MessageAttributeValue {
		m := map[string]types.MessageAttributeValue{}
		for i := range n {
			m[fmt.Sprintf("a%d", i)] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("v")}
		}
		return m
	}
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		attrs map[string]types.MessageAttributeValue
		want  []string // trace fields expected, in the attributes
		total int
	}{
		{"room for both", ctx, own(2), []string{"traceparent", "tracestate"}, 5},
		{"room for one", ctx, own(8), []string{"traceparent"}, 10},
		{"no room", ctx, own(9), nil, 10},
		{"no span", t.Context(), own(2), nil, 3},
		{"the message's own traceparent", ctx, map[string]types.MessageAttributeValue{
			"traceparent": {DataType: aws.String("String"), StringValue: aws.String("mine")}}, []string{"traceparent", "tracestate"}, 3},
	} {
		api := &captureAPI{}
		p := producer.New(api, "https://sqs.us-east-1.example/1/orders", producer.WithTraceContext(otelidem.TraceInjector(propagation.TraceContext{})))
		if _, err := p.Send(tc.ctx, producer.Message{Key: "k", Body: "b", Attributes: tc.attrs}); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := api.in.MessageAttributes
		if len(got) != tc.total {
			t.Errorf("%s: %d attributes, want %d: %v", tc.name, len(got), tc.total, got)
		}
		for _, f := range tc.want {
			if _, ok := got[f]; !ok {
				t.Errorf("%s: no %s attribute", tc.name, f)
			}
		}
		if tc.name == "the message's own traceparent" && aws.ToString(got["traceparent"].StringValue) != "mine" {
			t.Errorf("%s: traceparent replaced by %q", tc.name, aws.ToString(got["traceparent"].StringValue))
		}
		if len(tc.want) == 0 && got["traceparent"].StringValue != nil && tc.attrs["traceparent"].StringValue == nil {
			t.Errorf("%s: traceparent added", tc.name)
		}
	}
}
