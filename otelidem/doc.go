// Package otelidem traces lambdaidem with OpenTelemetry: one span per SQS
// invocation and one per record, around the claim, the handler and the
// completion, linked to the trace of the request that sent the message;
// and, as an option, the emf package's metrics through an OpenTelemetry
// meter, for functions that export OTLP instead of Embedded Metric Format.
//
// The smallest use:
//
//	h := lambdaidem.SQS(store, handle,
//		lambdaidem.WithNamespace("orders"),
//		lambdaidem.WithObserver(otelidem.New()))
//
// [New] uses the global tracer provider unless given one
// ([WithTracerProvider]); httpidem takes the same observer through
// httpidem.WithWrapOptions, Wrap directly.
//
// # Spans
//
// An SQS invocation's span, "process <queue>" (kind consumer), is a child
// of the span its context carries: the Lambda instrumentation's, when the
// function has one. It carries messaging.system=aws_sqs,
// messaging.operation.type=process, messaging.destination.name (the queue,
// from the event source ARN), messaging.batch.message_count and, at its
// end, lambdaidem.failed; it links to every record's producer.
//
// Each record's span, "lambdaidem <namespace>", is a child of its
// invocation's, and the context the record's work runs under: the claim,
// the handler, the completion, the dead-letter send and the visibility
// change. The handler's own spans, and the AWS SDK's instrumented calls
// made with its context, nest under it. An SQS record's span (kind
// consumer) follows the messaging conventions (messaging.message.id and
// the attributes above) and adds the library's own: lambdaidem.namespace,
// the key's SHA-256 (lambdaidem.key.sha256; the key itself,
// lambdaidem.key, with [WithRawKeys]), lambdaidem.message_group_id and
// lambdaidem.receive_count (past the first delivery) when they apply, and
// at its end lambdaidem.outcome and lambdaidem.attempt, and when they
// apply lambdaidem.acked (false: SQS keeps the message, or the call
// failed), lambdaidem.reason (dead letters), lambdaidem.replayed,
// lambdaidem.takeover, lambdaidem.handler.duration,
// lambdaidem.store.calls and .errors (when a store call failed), lambdaidem.wait
// (seconds spent between store retries) and lambdaidem.retry_delay
// (seconds the message was made invisible: another holder's lease,
// RetryAfter, backoff). A
// record whose work did not happen as asked (the handler failed, a dead
// letter, the store's trouble, a key conflict) has status Error with
// error.type set to its outcome and the error as description (the key in
// it hashed unless raw keys are on); a duplicate, a replay and a wait for
// another holder's lease do not. A Wrap call, and an httpidem request,
// is one record span (kind internal) under the span its context carries,
// with lambdaidem.entry wrap or http and no messaging attributes.
//
// # Links to the producer
//
// A record's span links to the trace its message carries, so a trace of
// the request that sent an order leads to the order's processing: the
// X-Ray header SQS delivers in the AWSTraceHeader system attribute when
// the sender was traced by X-Ray ([ParseAWSTraceHeader]), and the W3C
// traceparent message attribute, which the producer package writes when
// given an injector (producer.WithTraceContext([TraceInjector](nil))).
// Another propagator reads other fields ([WithPropagator]). The links follow the messaging
// conventions: a consumer's span links to, rather than continues, the
// producer's trace, as one batch holds messages of many traces.
//
// # Metrics
//
// [WithMeterProvider] turns on a counter per emf metric (Records,
// Processed, DuplicatesSkipped by reason, DeadLettered by reason,
// StoreErrors, ...; the Metric* constants name them) and a histogram of
// the handler's duration, with the attributes lambdaidem.namespace and
// lambdaidem.entry (and lambdaidem.tenant, the message group, with
// [WithTenantAttribute]). They count what emf counts, record by record.
//
// # Cost
//
// The core package has no OpenTelemetry dependency and, with no observer,
// no cost. With this one, most of what a sampled record adds is the SDK's
// own cost of its span; a span that is not sampled skips its attributes.
// BENCHMARKS.md has the figures and the benchmark that measures them
// (BenchmarkTracing, beside the SDK alone making the same spans).
package otelidem
