package otelidem

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
)

// TraceInjector returns what producer.WithTraceContext takes: the trace
// context of a message's sending context, as prop writes it
// (propagation.TraceContext: traceparent and tracestate). A nil prop is
// propagation.TraceContext. The record spans of this package link to it.
func TraceInjector(prop propagation.TextMapPropagator) func(ctx context.Context, set func(field, value string)) {
	if prop == nil {
		prop = propagation.TraceContext{}
	}
	return func(ctx context.Context, set func(field, value string)) {
		prop.Inject(ctx, setter(set))
	}
}

// setter is a carrier that only writes.
type setter func(field, value string)

func (s setter) Get(string) string       { return "" }
func (s setter) Set(field, value string) { s(field, value) }
func (s setter) Keys() []string          { return nil }
