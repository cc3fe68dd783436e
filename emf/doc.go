// Package emf publishes the decorator's metrics in CloudWatch Embedded
// Metric Format: JSON lines on standard output that CloudWatch Logs turns
// into metrics, with no API call and no extra latency.
//
// [Hook] counts what happened to each record of an SQS invocation
// (processed, duplicates skipped, conflicts, leases lost, dead letters,
// store errors and requests, handler latency; see README.md in this
// directory for the full table) and emits them through a [Writer], the
// small EMF encoder behind the [Emitter] interface, which enforces the
// format's limits (MaxMetrics, MaxDimensions, MaxValues, MaxEventBytes).
//
// Metrics are off unless the hook is passed: every EMF line is billed as
// CloudWatch Logs ingestion and every metric it creates as a custom metric,
// so a library should not start spending on its users' behalf. The example
// functions turn them on, and so should any function that runs in
// production:
//
//	h := lambdaidem.SQS(store, handle,
//		lambdaidem.WithNamespace("orders"),
//		lambdaidem.WithInvocationHook(emf.Hook(emf.WithIdempotencyNamespace("orders"))))
//	lambda.Start(h)
//
// Each invocation writes one event holding its metrics that are not zero
// (every metric, zeros included, with [WithAllMetrics]) under the
// dimensions FunctionName (from AWS_LAMBDA_FUNCTION_NAME) and Namespace
// (when given), in the namespace "lambdaidem", plus one small event per
// reason that occurred, carrying DuplicatesSkipped or DeadLettered under the
// same dimensions and Reason. Totals live only in the first event, so
// summing either view never counts a record twice. A batch of ten with
// nothing unusual to say writes about 600 bytes by default and 1.5 KB with
// every metric (README.md has the figures).
package emf
