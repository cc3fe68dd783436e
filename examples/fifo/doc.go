// Command fifo is the example Lambda function for a FIFO SQS queue. Each
// message carries a per-group sequence number; the function records one
// effect per message and appends the number to its message group's log, so
// a duplicate effect (two rows for one group and number) and an order
// violation (a log that is not 1, 2, 3, ...) are both visible.
//
// Records are keyed by MessageDeduplicationId, the key the producer already
// chose for SQS's own five-minute deduplication; the library extends it to
// the idempotency table's retention. Set DEDUP_PER_GROUP=true when the
// queue scopes deduplication to the message group (high-throughput FIFO):
// the group then becomes part of the key.
//
// The body steers the function, for demos and tests:
//
//	{"seq": 1}                       process normally
//	{"seq": 2, "poison": true}       lambdaidem.Poison: dead-lettered at once
//	{"seq": 3, "fail_times": 1}      fail attempt 1, then succeed
//	{"seq": 4, "sleep_ms": 2000}     take that long (honouring the deadline)
//
// Configuration comes from the environment (see ConfigFromEnv):
// IDEMPOTENCY_TABLE, EFFECTS_TABLE, IDEMPOTENCY_NAMESPACE, DLQ_URL (a FIFO
// queue), MAX_ATTEMPTS, DEDUP_PER_GROUP; logging follows Lambda's
// AWS_LAMBDA_LOG_FORMAT and AWS_LAMBDA_LOG_LEVEL; endpoints follow the SDK's
// AWS_ENDPOINT_URL_* variables.
package main
