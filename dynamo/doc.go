// Package dynamo is the DynamoDB implementation of [idemstore.Store]: one
// item per (namespace, key), moved between states by conditional writes
// fenced with the lease token. It is the only package of the library that
// talks to DynamoDB.
//
// The smallest use:
//
//	cfg, err := config.LoadDefaultConfig(ctx)
//	if err != nil { ... }
//	client := dynamodb.NewFromConfig(cfg, dynamo.ClientOptions(dynamo.Tuning{}))
//	store := dynamo.New(client, "idempotency")
//	lambda.Start(lambdaidem.SQS(store, handle, lambdaidem.WithNamespace("orders")))
//
// # The table
//
// A string partition key "pk", on-demand billing, TTL on expires_at, and a
// sparse global secondary index [OpenIndex]. [CreateTable] makes one for
// tests and tools; the project's template.yaml declares the same for
// production.
//
// # Operators
//
// [Admin] (from [NewAdmin]) is a Store with the operator calls of
// [idemstore.Admin], which the operator CLI uses: list and count the open
// index, release or revoke a lease, forget a key, resolve an unknown
// outcome (one UpdateItem conditioned on the token and dead-letter copy
// the operator read). Counting COMPLETED
// records takes a scan of the whole table, only with
// CountRequest.AllowScan.
//
// # Stored attributes
//
// This is the one place where the item layout is written down. Times in ms
// are Unix milliseconds, in s Unix seconds (DynamoDB's TTL wants seconds);
// times are rounded up when stored, so a record is kept at least as long
// and a lease lasts at least as long as asked.
//
//	attribute                 type  meaning
//	pk                        S     namespace + "#" + key (the namespace may not contain "#"; at most 2048 bytes)
//	schema_version            N     layout version, idemstore.SchemaVersion
//	status                    S     IN_PROGRESS, COMPLETED, FAILED or DEAD_LETTERED
//	lease_token               S     token of the latest claim; stays after complete/fail/dead-letter (the fence)
//	lease_until               N ms  when the lease runs out
//	attempts                  N     claims in this generation, including abandoned ones
//	takeovers                 N     claims that took over an expired lease (abandoned attempts)
//	generation                S     random, new each time the item is created afresh
//	claim                     N     fencing number within the generation, +1 per claim
//	payload_hash              S     the message content's hash (conflict detection; at most 1024 bytes)
//	message_id                S     message that made the latest claim (at most 1024 bytes)
//	result                    B     stored outcome of COMPLETED, when at most WithInlineResultBytes
//	                                (default 1 KiB); absent when empty or stored apart
//	result_apart              N     size in bytes of a result stored in a result item of its own
//	result_until              N s   end of result replay (absent: as long as the key)
//	expires_at                N s   the record counts as absent after it; the table's TTL attribute
//	last_error                S     latest failure text, cut to WithLastErrorBytes
//	dead_letter_reason        S     idemstore.Reason of DEAD_LETTERED
//	dead_lettered_message_id  S     the source message that was dead-lettered
//	dead_letter_message_id    S     the ID the dead-letter queue gave its copy
//	first_attempt_at          N ms  first claim of this generation
//	updated_at                N ms  latest write; range key of OpenIndex
//	open_status               S     = status while IN_PROGRESS, FAILED or DEAD_LETTERED; removed on COMPLETED;
//	                                hash key of the sparse index OpenIndex (see ListOpen)
//	redrives                  N     times a redrive reset this record (ResetDeadLetter); absent: never
//	redriven_from             S     the dead-letter copy the latest reset was for
//	resolution                S     an operator's decision on an unknown outcome (Admin.Resolve): applied,
//	                                not_applied or abandoned; absent: none. Kept through the generation's
//	                                later writes; a reset refuses an abandoned record
//	resolution_note           S     who decided, when, about which copy and why (idemstore.ResolveRequest.
//	                                StoredNote, at most 1024 bytes)
//
// A result larger than WithInlineResultBytes is kept in a result item of
// its own, so the record's item stays small: a refused claim returns the
// whole record (ALL_OLD) on every duplicate and is billed by its size. The
// result item's key is "#result#" and the hex SHA-256 of the record's pk
// (no record's pk starts with "#"). It holds record (S, the record's pk),
// lease_token (S, the completion that wrote it: a record only reads back
// the result its own completion wrote, never an earlier generation's),
// result (B), schema_version and expires_at (the result's end of replay,
// else the record's expiry). It is put in the same TransactWriteItems as
// the completion, and is at most MaxResultBytes (about 396 KiB); a larger
// result is idemstore.ErrResultTooLarge. Forgetting a record leaves its
// result item to TTL; nothing reads it after that.
//
// Expiry is enforced in every condition and read (expires_at < now counts
// as absent); TTL only cleans up. On AWS it deletes up to days late;
// DynamoDB Local deletes within seconds, which is why tests run with TTL
// off.
//
// # Requests per transition
//
//	claim, absent or FAILED           1 UpdateItem (ReturnValues ALL_NEW)
//	claim refused                     1 UpdateItem (the refusing item comes back as ALL_OLD)
//	claim refused by a COMPLETED      2: the refused UpdateItem, then a consistent GetItem of the
//	record whose result is stored        result item; only when the payload hash matches and the
//	apart (a Wrap replay)                result has not expired
//	Get of such a record              2 GetItem
//	claim of an expired record        2: the refused UpdateItem, then PutItem of a fresh generation
//	                                     conditioned on expires_at = the value seen
//	takeover of an abandoned lease    2: the refused UpdateItem, then UpdateItem conditioned on the
//	                                     token seen, which also adds 1 to takeovers
//	complete, fail, dead-letter,      1 UpdateItem conditioned on lease_token = ours AND
//	extend                              status = IN_PROGRESS AND not expired
//	complete with Writes, or with a   1 TransactWriteItems (the completion, the Writes, and the
//	result stored apart                  result item's Put)
//	reset (redrive), resolve (an      1 UpdateItem conditioned on what the copy or the operator
//	operator's decision)                 read; a refusal returns the item (ALL_OLD)
//
// The plain claim's condition is "absent, or FAILED with the same payload
// hash, unexpired". Takeovers are left out of it on purpose: DynamoDB's
// update expressions cannot add to takeovers on one branch of a condition
// only, and takeovers must stay exact (the decorator tells crashes from
// handler failures by it, see "Poison by crash" in docs/design.md). A takeover happens only after an
// instance crashed or timed out, so it may take a second request; the
// common paths take one.
//
// A successful claim returns the new item (ALL_NEW). Its previous state
// follows from the claim counter: the plain claim applies to an absent or a
// FAILED record only, and starts a generation exactly when the counter is
// 1. A refused write returns the current item through
// ReturnValuesOnConditionCheckFailure=ALL_OLD, so no write is followed by
// a read, except the replay of a result stored apart.
//
// # Retries
//
// The SDK retries timeouts and 5xx, so a write whose response was lost may
// have applied, and its retry then fails its own condition. A refused claim
// whose returned item carries the claim's fresh token, and a refused
// complete, fail or dead-letter whose item carries our token and already
// has the target state, are our own success (docs/design.md, rule 1).
//
// # Errors
//
// Throttling, 5xx, timeouts, connection failures, a canceled context, and
// anything else that leaves the store unable to answer (a missing table, a
// denied permission) wrap [idemstore.ErrStoreUnavailable], keeping the
// cause. A result over MaxResultBytes is refused before sending with
// [idemstore.ErrResultTooLarge] (as is DynamoDB's own item-size
// ValidationException); the record stays as it was, and lambdaidem.Wrap
// then completes the key without its result.
// Keys and fields that cannot be stored are [ErrInvalidKey].
//
// # Transactional completion
//
// CompleteRequest.Writes may hold types.TransactWriteItem values (or
// pointers to them); any other type is [idemstore.ErrUnsupportedWrite].
// They are committed with the completion in one TransactWriteItems: the
// effect and the COMPLETED mark apply together or not at all. DynamoDB's
// limits are checked when the handler adds a write (AddCompletionWrite
// returns [ErrTransactionLimit] for the write that breaks one) and again
// before sending: at most 100 actions including the completion, about 4
// MB, 400 KB an item, and one action per item (a write may not target the
// record itself or an item another write targets). So is everything
// DynamoDB, or the SDK before sending, refuses in a write's form whatever
// the tables hold: a table name, a key of one or two attributes, each a
// non-empty string, number or binary of at most 2048 bytes (one of them at
// most 1024), an item for a Put, an UpdateExpression for an Update and a
// ConditionExpression for a ConditionCheck; expressions of at most 4 KB;
// placeholders (#name, :value) of at most 255 bytes, every one defined
// used and every one used defined, at most 2 MB of them an action, and no
// empty map of them; values DynamoDB stores (no nil, a NULL only true, numbers
// of at most 38 digits from 1E-130 to below 1E+126, sets neither empty nor
// holding a member twice, at most 32 levels of nesting, no empty attribute
// name); a known ReturnValuesOnConditionCheckFailure. What DynamoDB checks
// against the tables or the expressions' grammar (a key schema, the IN
// operator's 100 operands) it refuses when the transaction arrives: a
// ValidationException is [ErrTransactionLimit] too, never
// [idemstore.ErrStoreUnavailable], so it is not retried (a missing table or
// a denied permission is, as under Errors). A canceled transaction is
// reported per write as a [*TransactionError]; a cancellation of the
// record's own update is [idemstore.ErrLeaseLost].
//
// # Tuning the SDK client
//
// [ClientOptions] shapes a client to fail closed quickly (docs/design.md, rule 7): a
// per-attempt timeout (default 1s), the standard retryer with 3 attempts
// and at most 200ms of jittered backoff, no client-side retry quota (the
// SDK's default token bucket would keep refusing retries for a while after
// an outage is over), and an HTTP transport keeping as many idle
// connections per host as the batch concurrency. The caller's context
// bounds the whole call.
package dynamo
