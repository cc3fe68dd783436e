package lambdaidem

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/aws/aws-lambda-go/events"
)

// Observer watches the decorator's work as it happens, for tracing and
// metrics: package otelidem is one, turning each invocation and each
// record into an OpenTelemetry span.
//
// # The calls and their order
//
// An SQS invocation calls InvocationStart once, before anything else; then
// RecordStart and RecordEnd once each for every record of the batch (one
// that cannot be keyed, a cached duplicate, one skipped behind its FIFO
// group's failure included); then InvocationEnd, after every RecordEnd and
// before the handler returns. Nothing is called after InvocationEnd. Wrap
// (and httpidem, built on it) has no invocation: each call is one record,
// RecordStart then RecordEnd.
//
// The records of one invocation may run concurrently (WithConcurrency), so
// RecordStart and RecordEnd of different records may overlap and be
// called from different goroutines; the calls for one record are made in
// order by one goroutine. An Observer must be safe for that.
//
// # Contexts
//
// InvocationStart's context is the invocation's; the one it returns is
// what every record of the invocation descends from, and what
// InvocationEnd receives. RecordStart's returned context is the one the
// record's work runs under: the claim, the handler (its context descends
// from it, so the handler's own spans and the SDK's instrumented calls
// nest under what the observer put there), the completion or failure
// mark, the dead-letter send and the visibility change (these last with
// its values, detached from its cancellation); RecordEnd receives it. An
// SQS record's context given to RecordStart ends when its handler's must,
// a margin before the invocation's deadline (WithDeadlineMargin). A
// returned context must descend from the one given and only add values to
// it (context.WithValue; never a deadline or a cancellation of its own),
// or the record's timing changes and it costs a timer. A nil return keeps
// the given context.
//
// # Reports
//
// RecordEnd receives the record's final report: the one the invocation's
// report holds (SQS) or what the call returned (Wrap; see RecordReport).
// InvocationEnd receives the invocation's report, the same one
// WithInvocationHook gets. Both are the decorator's: read them during the
// call, never change them, never keep them.
//
// # Failures
//
// An observer never changes a record's outcome. A panic in any of its
// methods is recovered and logged at ERROR with its stack; the decorator
// goes on as if the method had returned the context it was given, and the
// matching End call still comes.
//
// With no observer the decorator makes none of these calls and costs
// nothing more.
type Observer interface {
	InvocationStart(ctx context.Context, info InvocationInfo) context.Context
	InvocationEnd(ctx context.Context, rep *InvocationReport)
	RecordStart(ctx context.Context, info RecordInfo) context.Context
	RecordEnd(ctx context.Context, rep *RecordReport)
}

// EntryPoint names what a record came through, for observers.
type EntryPoint string

// The entry points of the library. An adapter built on Wrap names its own
// with WithEntryPoint.
const (
	// EntrySQS: a record of an SQS batch (SQS).
	EntrySQS EntryPoint = "sqs"
	// EntryWrap: a call of a function made idempotent by Wrap.
	EntryWrap EntryPoint = "wrap"
	// EntryHTTP: a request through package httpidem.
	EntryHTTP EntryPoint = "http"
)

// InvocationInfo is what an observer learns as an SQS invocation starts.
type InvocationInfo struct {
	// Namespace is the idempotency namespace of the decorated handler.
	Namespace string
	// RequestID is the Lambda request ID, when the context carries one.
	RequestID string
	// Records is the batch as Lambda delivered it. Read it, never change
	// it.
	Records []events.SQSMessage
}

// RecordInfo is what an observer learns as a record starts: its entry
// point and, once derived, its key.
type RecordInfo struct {
	Entry     EntryPoint
	Namespace string
	// Key is the record's key as the store holds it (StoredKey); "" when
	// none could be derived, and KeyErr says why (ErrMissingKey, or
	// ErrMalformedBody). Keys come from message bodies and requests:
	// treat them as user data.
	Key    string
	KeyErr error
	// Message is the SQS record as delivered, nil for Wrap and httpidem:
	// its attributes carry what links the record to its producer's trace
	// (the AWSTraceHeader system attribute, a traceparent message
	// attribute). Read it, never change it.
	Message *events.SQSMessage
	// Index is the record's position in its batch (0 for Wrap).
	Index int
}

// observed reports whether any observer is set.
func (e *engine) observed() bool { return len(e.c.observers) > 0 }

// invocationStart calls every observer's InvocationStart in order.
func (e *engine) invocationStart(ctx context.Context, info InvocationInfo) context.Context {
	for _, o := range e.c.observers {
		ctx = e.startOne(ctx, "InvocationStart", func(ctx context.Context) context.Context { return o.InvocationStart(ctx, info) })
	}
	return ctx
}

// invocationEnd calls every observer's InvocationEnd in reverse order.
func (e *engine) invocationEnd(ctx context.Context, rep *InvocationReport) {
	for i := len(e.c.observers) - 1; i >= 0; i-- {
		o := e.c.observers[i]
		e.endOne(ctx, "InvocationEnd", func() { o.InvocationEnd(ctx, rep) })
	}
}

// recordStart calls every observer's RecordStart in order.
func (e *engine) recordStart(ctx context.Context, info RecordInfo) context.Context {
	for _, o := range e.c.observers {
		ctx = e.startOne(ctx, "RecordStart", func(ctx context.Context) context.Context { return o.RecordStart(ctx, info) })
	}
	return ctx
}

// recordEnd calls every observer's RecordEnd in reverse order.
func (e *engine) recordEnd(ctx context.Context, rep *RecordReport) {
	for i := len(e.c.observers) - 1; i >= 0; i-- {
		o := e.c.observers[i]
		e.endOne(ctx, "RecordEnd", func() { o.RecordEnd(ctx, rep) })
	}
}

// startOne runs one Start method; a panic or a nil context keeps ctx.
func (e *engine) startOne(ctx context.Context, method string, f func(context.Context) context.Context) (out context.Context) {
	out = ctx
	defer e.observerPanicked(ctx, method)
	if c := f(ctx); c != nil {
		out = c
	}
	return out
}

// endOne runs one End method, surviving its panic.
func (e *engine) endOne(ctx context.Context, method string, f func()) {
	defer e.observerPanicked(ctx, method)
	f()
}

// observerPanicked logs an observer's panic; deferred by the calls above.
func (e *engine) observerPanicked(ctx context.Context, method string) {
	if v := recover(); v != nil {
		e.log(ctx, slog.LevelError, "lambdaidem: observer panicked; the record goes on",
			slog.String("method", method), slog.String("panic", fmt.Sprint(v)), slog.String("stack", string(debug.Stack())))
	}
}
