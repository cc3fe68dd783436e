// Package lambdaidem makes SQS-triggered AWS Lambda functions process each
// message exactly once in effect.
//
// It wraps a handler: for each record it derives an idempotency key, takes a
// fenced lease on that key with one conditional write, runs the handler only
// if it got the lease, records the outcome with a second conditional write
// fenced by the lease's token, skips duplicates, dead-letters messages that
// will never succeed, and reports per-record results as a partial batch
// response. [Wrap] does the same for any function of one input, and package
// httpidem builds the Idempotency-Key header of HTTP APIs on it.
//
// # Getting started
//
// An SQS handler keyed by a field of its JSON body, with its records in
// DynamoDB and the messages that will never succeed sent to a dead-letter
// queue with their reason:
//
//	cfg, err := config.LoadDefaultConfig(ctx)
//	if err != nil { ... }
//	sqsClient := sqs.NewFromConfig(cfg)
//	store := dynamo.New(dynamodb.NewFromConfig(cfg, dynamo.ClientOptions(dynamo.Tuning{})), os.Getenv("IDEMPOTENCY_TABLE"))
//	lambda.Start(lambdaidem.SQS(store, handle,
//		lambdaidem.WithNamespace("orders"),
//		lambdaidem.WithKeyJSONField("order_id"),
//		lambdaidem.WithDeadLetterSink(sqsqueue.NewSink(sqsClient, os.Getenv("DLQ_URL"))),
//		lambdaidem.WithVisibility(sqsqueue.NewVisibilityChanger(sqsClient)),
//	))
//
// The event source mapping must report batch item failures
// (FunctionResponseTypes: ReportBatchItemFailures), or the handler must be
// built with [WithFailBatchOnAnyFailure]. Set an explicit [WithNamespace]:
// the default, the function's name, changes when CloudFormation replaces
// the function, and every key would be forgotten with it. The guide
// docs/getting-started.md builds a consumer in its own module, with its
// table and queues; docs/deploying.md deploys it with SAM, and
// docs/local-development.md runs it on a laptop.
//
// # Keys and payload hashes
//
// The key decides what counts as "the same message". The default,
// [WithKeyMessageID], catches SQS's own redeliveries but not a producer
// that sends the same thing twice; for that, key by something the producer
// controls: a field of the JSON body ([WithKeyJSONField]), a message
// attribute ([WithKeyAttribute]), a FIFO queue's deduplication ID
// ([WithKeyDeduplicationID]), or a function of the message
// ([WithKeyFunc]). Keys live in a namespace, so functions can share one
// table. Long keys, and keys that are not valid UTF-8, are stored hashed
// ([idemstore.StoredKey]), never merged with another.
//
// Each record also keeps a hash of the message's content: the same key
// with a different payload is a key conflict, never a duplicate. The
// default hashes the whole body; [WithHashJSONFields] hashes only chosen
// fields, for envelopes (SNS, EventBridge) whose other fields differ on
// every delivery. A message with no key is [ErrMissingKey]; a body the key
// or hash options cannot read (not one JSON value, a field given twice, a
// string that is not valid Unicode) is [ErrMalformedBody]. Neither is ever
// run: both are dead-lettered, with [ReasonMissingKey] and
// [ReasonMalformedBody]. docs/handlers.md has every key and hash option.
//
// # Outcomes and the partial batch response
//
// Every record ends in one [Outcome]: processed, a duplicate (from the
// store, or from the optional local cache, [WithCache]), dead-lettered, or
// one of the outcomes that leave the message with SQS to come back later:
// failed by the handler, in progress under another holder's valid lease,
// a lost lease, a store that could not be reached, too little time left
// before the deadline. The response lists exactly the records that were
// not acknowledged, so SQS deletes the rest. Nothing is acknowledged that
// was not done, skipped as a duplicate, or dead-lettered. When every record
// failed the handler also returns a [*BatchError], so error alarms fire
// ([WithAllFailedError]). On a FIFO queue the records of a message group
// run in order, and the rest of a group stops at its first record that was
// not acknowledged. [WithInvocationHook] receives each invocation's
// [InvocationReport]: package emf turns it into CloudWatch metrics. What
// each record becomes, state by state, is the table of docs/design.md.
//
// # Poison messages and the dead-letter queue
//
// A handler error is retried: the record is marked FAILED and SQS brings
// the message back. [Poison] marks an error that will never succeed, and
// the message is dead-lettered at once; [RetryAfter] asks for the message
// back after a delay (it needs [WithVisibility]; [WithBackoff] does the
// same for every plain error). A message that fails on its last attempt
// ([WithMaxAttempts]) is dead-lettered too, and so is one that crashes or
// times out the function every time: attempts count claims, so a claim
// beyond the maximum dead-letters the message without running it.
//
// A dead-lettered message goes to the sink of [WithDeadLetterSink] (package
// sqsqueue sends it to an SQS queue) with its [Reason], the last error and
// its attempts, and is acknowledged only after that send succeeded. A
// holder first confirms its lease, so a holder that lost it never puts
// finished work in the dead-letter queue. Without a sink the record is
// reported failed and SQS's own redrive policy is the backstop. The
// reasons, and what each means, are in docs/design.md; docs/operations.md
// shows how to redrive the queue once the cause is fixed.
//
// # Exactly once in effect
//
// The lease makes a key run in one place at a time, and a completion
// recorded under it makes every later copy a duplicate. What remains is the
// window between the handler's effect and its completion: a crash there
// runs the handler again once the lease runs out. Four tools deal with it,
// by the kind of effect:
//
//   - Transactional completion. A handler whose effect is a write to the
//     store's own database adds it with [AddCompletionWrite]: the store
//     commits it in one transaction with the completion (for the DynamoDB
//     store, a TransactWriteItems), so the effect happens exactly once.
//   - At most once. [WithAtMostOnce] never runs a handler twice for a key:
//     an attempt abandoned without an outcome (a crash, a timeout), one
//     that panicked, and one that returned an error without declaring
//     that its effect did not happen ([NotApplied], [RetryAfter]) are
//     dead-lettered with [ReasonOutcomeUnknown] for a person to reconcile.
//     A handler that cannot tell whether its effect happened says so with
//     [OutcomeUnknown], which does the same in either mode.
//   - A key for the effect. [EffectKey] gives the handler a key, the same
//     for every attempt at the work, to pass downstream (an API's
//     Idempotency-Key header, a FIFO deduplication ID), so the downstream
//     system recognises a retry too.
//   - Heartbeat. [WithHeartbeat] extends the lease while a long handler
//     runs, and ends the handler's context a margin before the last
//     extension the store granted, so it never outlives its lease.
//   - Fencing. [LeaseFromContext] gives the handler its lease's Fence, a
//     number that rises with every claim of the key within a generation:
//     a downstream system that remembers the highest fence it saw can
//     refuse a stale holder's late write.
//
// The handler's context ends a margin before the invocation's deadline
// ([WithDeadlineMargin]) and before its lease ends ([WithLease]), so the
// outcome can still be recorded.
//
// # Wrap
//
// [Wrap] makes any func(context.Context, In) (Out, error) idempotent: the
// first call with a key runs it and stores its result as JSON; a repeat
// with the same key and input gets the stored result without running it.
// A call while another holds the key returns an [*InProgressError], or
// with [WithWaitForCompletion] waits for that run and answers with its
// outcome; the same key with another input returns [ErrKeyConflict]. The
// default key is the
// SHA-256 of the input's JSON encoding; [WithKeyJSONField] and [WithWrapKey]
// choose one. Wrap never records a failure after the function succeeded:
// a result that cannot be stored completes the key without it, and a
// repeat gets [ErrResultNotStored].
//
// # Stores
//
// A [Store] keeps the records. Package dynamo (DynamoDB) and package
// redisstore (Redis OSS, Valkey, ElastiCache, MemoryDB) are for
// production, and both commit completion writes; package memstore keeps
// them in memory, for tests. The contract they implement and the
// conformance suite they pass are package idemstore's; docs/stores.md
// compares them.
//
// # Testing
//
// Package lambdaidemtest runs a handler, decorated with its options,
// against a simulated queue, event source mapping, store and clock, with
// no AWS account or local services: one call per failure mode (delivered
// twice, a producer's duplicate, a crash after the effect, a poison
// message, a takeover from a paused holder, a redrive), and an explorer
// that checks the handler's own invariant over thousands of seeded
// scenarios. docs/testing.md shows how; docs/proof.md shows how the
// library itself is tested.
//
// # Operations
//
// The command lambdaidem (cmd/lambdaidem) inspects a key, lists stuck,
// failed and dead-lettered records, releases a stuck lease, forgets a key,
// counts records by status and redrives the dead-letter queue. Package emf
// publishes the metrics; docs/operations.md gives the alarms to set and
// what to do when one fires.
package lambdaidem
