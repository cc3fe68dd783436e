// Command orders is the example Lambda function for a standard SQS queue of
// orders. Each message is a JSON order; the function records one "effect"
// per order in a DynamoDB table, and lambdaidem makes sure a duplicate
// delivery (an SQS redelivery, a producer sending twice, two consumers at
// once) does not record a second one.
//
// The effect is deliberately not idempotent on its own: every call writes
// a new row under a fresh random ID. More than one row for an order_id is a
// duplicate effect that the library failed to prevent.
//
// EFFECT_MODE chooses how the row is written. "plain" (the default) writes
// it with its own PutItem inside the handler; a crash after that write and
// before the library records completion repeats the effect on the next
// attempt — the one gap an idempotency lock leaves. "transactional" adds
// the row to the completion (lambdaidem.AddCompletionWrite), so the row and
// the COMPLETED mark commit in one TransactWriteItems after the handler
// returned, or neither does: no crash can repeat it.
//
// The body steers the function, for demos and tests:
//
//	{"order_id": "o-1"}                               process normally
//	{"order_id": "o-2", "poison": true}               lambdaidem.Poison: dead-lettered at once
//	{"order_id": "o-3", "fail_times": 2}              fail attempts 1 and 2, then succeed
//	{"order_id": "o-4", "sleep_ms": 5000}             take that long (honouring the deadline)
//	{"order_id": "o-5", "crash": "before_effect"}     exit the process before the effect, on attempt 1
//	{"order_id": "o-6", "crash": "after_effect",
//	 "crash_attempts": [1, 2]}                        exit after the effect, on attempts 1 and 2
//
// In transactional mode "after_effect" exits once the effect is prepared,
// before the handler returns: nothing has been written yet.
//
// Configuration comes from the environment (see ConfigFromEnv):
// IDEMPOTENCY_TABLE, EFFECTS_TABLE, IDEMPOTENCY_NAMESPACE, DLQ_URL,
// MAX_ATTEMPTS, EFFECT_MODE, DYNAMODB_ATTEMPT_TIMEOUT for a slow local
// DynamoDB, and OpenTelemetry's OTEL_TRACES_EXPORTER:
// unset or "none" traces nothing; "console" traces each invocation and
// record (package otelidem), linked to the trace the message carries, and
// prints the spans as JSON lines on standard output. The decorator's metrics are printed as
// CloudWatch Embedded Metric Format lines (package emf) in the namespace
// "lambdaidem" with the dimension FunctionName, which template.yaml's
// alarms and dashboard read. Logging follows Lambda's AWS_LAMBDA_LOG_FORMAT and
// AWS_LAMBDA_LOG_LEVEL; endpoints follow the SDK's AWS_ENDPOINT_URL_*
// variables.
package main
