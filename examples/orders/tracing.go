package main

import (
	"io"

	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// NewTracerProvider returns the tracer provider cfg asks for, nil when
// tracing is off (the default). With TracesConsole each span is written to
// out as one JSON line as it ends, before the invocation returns, so none
// is lost when Lambda freezes the process between invocations. A function
// that exports to a collector (the AWS Distro for OpenTelemetry's layer,
// say) builds its provider with an OTLP exporter instead, and the rest
// stays as it is.
func NewTracerProvider(cfg Config, out io.Writer) (*sdktrace.TracerProvider, error) {
	if cfg.TracesExporter != TracesConsole {
		return nil, nil
	}
	exp, err := stdouttrace.New(stdouttrace.WithWriter(out))
	if err != nil {
		return nil, err
	}
	name := cfg.FunctionName
	if name == "" {
		name = "orders"
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(name)))
	if err != nil {
		return nil, err
	}
	return sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(res)), nil
}
