// Command tracing is an SQS consumer traced with OpenTelemetry: a span per
// invocation and per record, each record's span linked to the trace of
// the request that sent its message, and the handler's own spans under it.
package main

import (
	"context"
	"log"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/otelidem"
)

var tracer = otel.Tracer("orders")

func handle(ctx context.Context, msg events.SQSMessage) error {
	// A child of the record's span: ctx carries it.
	ctx, span := tracer.Start(ctx, "charge")
	defer span.End()
	_ = ctx // call your payment API with ctx
	return nil
}

func main() {
	// Your exporter here: OTLP to a collector (the AWS Distro for
	// OpenTelemetry's layer) in production; stdout for this example.
	exp, err := stdouttrace.New()
	if err != nil {
		log.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	otel.SetTracerProvider(tp)

	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	store := dynamo.New(dynamodb.NewFromConfig(cfg, dynamo.ClientOptions(dynamo.Tuning{})), os.Getenv("IDEMPOTENCY_TABLE"))
	h := lambdaidem.SQS(store, handle,
		lambdaidem.WithNamespace("orders"),
		lambdaidem.WithKeyJSONField("order_id"),
		lambdaidem.WithObserver(otelidem.New()), // the global tracer provider
	)
	lambda.Start(func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		resp, err := h(ctx, ev)
		// Lambda freezes the process once the handler returns: export the
		// invocation's spans first.
		_ = tp.ForceFlush(ctx)
		return resp, err
	})
}
