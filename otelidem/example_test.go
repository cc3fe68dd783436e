package otelidem_test

import (
	"context"
	"fmt"

	"github.com/aws/aws-lambda-go/events"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
	"github.com/lambdaidem/go-lambdaidem/otelidem"
)

// An SQS handler traced with OpenTelemetry: a span for the invocation, one
// per record, and the handler's own spans under its record's. In a
// function, the tracer provider is the one the function exports with
// (OTLP to a collector, say), usually set globally, and New() needs no
// option.
func Example() {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer func() { _ = tp.Shutdown(context.Background()) }()

	handle := func(ctx context.Context, msg events.SQSMessage) error {
		_, span := tp.Tracer("orders").Start(ctx, "charge")
		defer span.End()
		return nil
	}
	h := lambdaidem.SQS(memstore.New(), handle,
		lambdaidem.WithNamespace("orders"),
		lambdaidem.WithObserver(otelidem.New(otelidem.WithTracerProvider(tp))))

	msg := events.SQSMessage{MessageId: "m-1", Body: `{"order_id":"o-1"}`, EventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:orders"}
	for range 2 { // the second delivery is a duplicate
		_, _ = h(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg}})
	}
	for _, s := range spans.Ended() {
		line := s.Name()
		for _, kv := range s.Attributes() {
			if kv.Key == otelidem.AttrOutcome {
				line += " " + kv.Value.AsString()
			}
		}
		fmt.Println(line)
	}
	// Output:
	// charge
	// lambdaidem orders processed
	// process orders
	// lambdaidem orders duplicate
	// process orders
}
