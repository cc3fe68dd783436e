// Command fn is the Lambda function the fault-injection run (package chaos,
// `make chaos`) drives: an SQS handler decorated with lambdaidem, on the
// DynamoDB store, with the SQS dead-letter sink. It is built into a
// provided.al2023 `bootstrap` and run unmodified under localrun.
//
// Every message body names a key and may steer the function:
//
//	{"key":"k-000042"}                                            a plain message
//	{"key":"k-000043","poison":true}                              returns lambdaidem.Poison
//	{"key":"k-000044","sleep_ms":2500}                            outlives the queue's visibility timeout
//	{"key":"k-000045","crash":"after_effect","crash_attempts":[1]} exits the process at that step
//
// Crash points, each on the listed attempts only (default [1]):
//
//   - after_claim: the lease is held, nothing else happened;
//   - after_effect: the effect is written (CHAOS_MODE=plain) or staged
//     with the completion (tx), the completion is not;
//   - during_completion: the process exits from inside the DynamoDB
//     client as soon as the completion request (UpdateItem or
//     TransactWriteItems of this key, setting COMPLETED) has been
//     answered, before the library sees the answer. The write normally
//     applied; a fault the proxy injected on that very request may have
//     refused it. The log line records the answer's HTTP status.
//
// The effect is one row per execution in EFFECTS_TABLE, never
// deduplicated, so the table is the run's independent record of effects:
// pk = key#random, with the key, attempt, fencing number, message ID and
// Lambda request ID. CHAOS_MODE=plain writes it with its own PutItem before
// returning (at-least-once); CHAOS_MODE=tx adds it with
// lambdaidem.AddCompletionWrite, committed with the completion (exactly
// once).
//
// CHAOS_MODE=optimistic is tx under lambdaidem.WithOptimisticCommit: a
// first delivery runs without a claim (LeaseFromContext reports attempt
// 0, and the effect row says so) and its commit decides; its crash
// points are asked of the delivery's ApproximateReceiveCount instead of
// the lease's attempt, after_claim meaning before the effect.
// CHAOS_BATCHED=1 adds lambdaidem.WithBatchedWrites; a crash during a
// batched completion exits once the whole batched request (a DynamoDB
// BatchExecuteStatement, a Redis pipeline) has been answered.
//
// Environment: IDEMPOTENCY_TABLE, EFFECTS_TABLE (required), DLQ_URL,
// CHAOS_MODE (plain, tx or optimistic, required), CHAOS_BATCHED,
// IDEMPOTENCY_NAMESPACE (default "chaos"),
// MAX_ATTEMPTS (default lambdaidem.DefaultMaxAttempts), and the usual AWS
// variables; AWS_ENDPOINT_URL_DYNAMODB points at the fault proxy.
//
// Log lines the harness reads (JSON, with requestId): "chaos: effect",
// "chaos: effect staged", "chaos: effect write failed", "chaos: poison",
// "chaos: crashing", and the library's own lines.
package main
