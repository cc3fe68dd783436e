// Package redisstore is the Redis implementation of [idemstore.Store], for
// Redis OSS 7, Valkey, Amazon ElastiCache (including Serverless) and Amazon
// MemoryDB. A record is one hash; every transition of it is one Lua script
// the server runs as one atomic step, so each costs one round trip.
//
// The smallest use:
//
//	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
//	store := redisstore.New(client, "lambdaidem")
//	lambda.Start(lambdaidem.SQS(store, handle, lambdaidem.WithNamespace("orders")))
//
// # The client
//
// The store is written on github.com/redis/go-redis/v9 rather than
// github.com/redis/rueidis: go-redis's UniversalClient covers a single
// node, a cluster (ElastiCache Serverless and MemoryDB speak cluster mode)
// and Sentinel behind one interface; its Script type sends EVALSHA and
// falls back to EVAL on NOSCRIPT; a ClusterClient routes a script by its
// first key. rueidis's strengths, automatic pipelining and client-side
// caching, buy nothing here: a message costs one script per transition and
// reads must never come from a cache.
//
// go-redis re-sends a command whose connection failed (Options.MaxRetries,
// default 3). That is safe for every script of this package: a claim
// carries a fresh token made by the caller, so a re-sent claim that finds
// its own token knows its first try applied, and a re-sent fenced write
// that finds the target status under its own token is a success. A reply
// that is lost without a re-send surfaces as idemstore.ErrStoreUnavailable,
// never as success.
//
// # Stored layout
//
// Keys start with the prefix given to New (default "lambdaidem") and carry the
// namespace as the cluster hash tag:
//
//	PREFIX:{NS}:r:KEY                   the record, a hash
//	PREFIX:{NS}:res:KEY                 its result when kept apart, a hash: t (the
//	                                    completion's token) and r (the result)
//	PREFIX:{NS}:open:IN_PROGRESS        sorted sets of the namespace's open records:
//	PREFIX:{NS}:open:FAILED             member KEY, score its expires_at in Unix ms
//	PREFIX:{NS}:open:DEAD_LETTERED      (+inf when it never expires)
//
// The record's hash fields (times in Unix ms, rounded up):
//
//	v   schema version          g   generation (random, new per fresh record)
//	s   status                  c   claim, the fencing number in the generation
//	t   lease token             h   payload hash
//	lu  lease until             m   message ID of the latest claim
//	a   attempts                r   result (absent when empty)
//	to  takeovers               ru  result until ("" or absent: as long as the key)
//	ea  expires at ("" never)   e   last error, cut to WithLastErrorBytes
//	dr  dead-letter reason      ds  dead-lettered (source) message ID
//	dc  dead-letter copy's ID   fa  first attempt at
//	ua  updated at              ps  status the latest claim replaced
//	rl  length of the result kept apart (absent: none apart)
//	rd  redrives                rf  the DLQ copy the latest redrive was for
//	rv  an operator's decision on an unknown outcome (Admin.Resolve): applied,
//	    not_applied or abandoned; absent: none. Kept through the generation's
//	    later writes; a reset refuses an abandoned record
//	rn  who decided, when, about which copy and why (ResolveRequest.StoredNote)
//
// # Results
//
// A result of at most WithInlineResultBytes (default 1 KiB) is the
// record's field r. A larger one, up to WithMaxResultBytes (default 1
// MiB, well over the decorator's 350 KiB), is kept apart under the res
// key, with the same hash tag, written by the completion's own script and
// expiring at its ResultUntil (or the record's expiry). Every script reads
// the whole record and a refused claim returns it, so a large inline
// result would ride along on every duplicate and every conflicting claim;
// kept apart, it is read only by a claim that replays it (the record
// COMPLETED with the claim's payload hash and the result unexpired), in the
// same script, and by Get (one MULTI more). A new generation, Delete and
// Forget delete it with the record, and a reader checks that it carries
// the record's token, so no generation ever sees another's result.
//
// # Expiry
//
// Every script takes "now" from the caller and treats a record whose
// expires_at is before it as absent, as the other stores do. The key itself
// gets PEXPIREAT at expires_at plus WithExpirySlack (default a minute),
// so the server frees the memory without ever deciding what counts as
// expired: a server clock that runs ahead cannot delete a live record. Each
// claim also drops expired members from its namespace's open sets.
//
// # Cluster mode
//
// The hash tag is the namespace, so a record and its namespace's open sets
// share one slot and every script touches one slot only, as Redis Cluster
// requires. The cost: a namespace lives on one shard, and its traffic goes
// to that shard. Spread load across shards with several namespaces (one
// per function, which is the default namespace). Namespaces may not
// contain '{' or '}' (ErrInvalidKey).
//
// # Requests per transition
//
//	claim (any outcome, refusals included)    1 EVALSHA
//	complete, fail, dead-letter, extend       1 EVALSHA (a pending dead-letter mark too)
//	ClaimBatch, CompleteBatch                 1 EVALSHA per namespace in the batch
//	                                          (more when one would pass WithMaxRequestArgs)
//	get                                       1 HGETALL (+1 MULTI for a result kept apart)
//	delete, release, forget, reset, resolve   1 EVALSHA
//	count                                     1 ZCOUNT (stuck records: a listing)
//	list, per page                            1 ZRANGE BYSCORE + 1 pipelined HGETALL batch
//
// The first call of a script on a server that has not cached it costs one
// more (NOSCRIPT, then EVAL); [Store.LoadScripts] at cold start avoids it.
//
// # Limits of a request
//
// ElastiCache Serverless refuses a request of more than 3,999 arguments,
// and every server one argument over 512 MiB (proto-max-bulk-len), whole
// and before running anything, on every try. The store counts each
// script call's arguments and bytes against WithMaxRequestArgs
// (DefaultMaxRequestArgs, 3,999) and MaxRequestBytes (512 MiB):
// AddCompletionWrite refuses the [Command] that would make its
// completion's request too long (ErrRequestTooLarge), Complete, Commit and
// CompleteBatch refuse such a completion before sending, and a batch goes
// out in as many calls as the limit needs. On a server of your own,
// raise WithMaxRequestArgs to commit longer commands.
//
// Within a script, nothing Redis can refuse comes between a completion's
// first command and the write of its record's outcome (see [Command]):
// Lua's limit on the values unpack takes at once (the script sends a long
// command in parts), the keys' types and integers (checked first), lack
// of memory (Redis refuses a script without flags only at a first write
// that may grow memory), a cluster slot in migration (no script touches a
// key again once it may have deleted it). While a slot migrates, Redis
// may still refuse a later update of the open sets (an optimistic commit
// prunes them first); the completion has applied by then, and the same
// call sent again finds it so.
//
// # Dead letters and redrive
//
// A pending dead-letter mark (DeadLetterRequest.Pending) is the same
// fenced script with IN_PROGRESS as its target: it records the reason,
// error and message ID and leaves the status, token, lease, expiry and
// dead-letter copy's ID as they are. The store implements
// [idemstore.DeadLetterResetter]: [Store.ResetDeadLetter] is one script
// that applies only to a DEAD_LETTERED record carrying the redriven copy's
// ID, and leaves it FAILED with attempts 0, one more redrive and a new
// token, as the in-memory and DynamoDB stores do; sqsqueue's Redrive and
// the operator CLI's redrive use it. The store implements
// [idemstore.Admin] too: release, forget and resolve are one script each,
// listing and counting read a namespace's open sets.
//
// # What it does not do
//
// Completion writes (CompleteRequest.Writes) must be this package's
// [Command] values, which the completion's script runs in the same atomic
// step; any other write is refused with idemstore.ErrUnsupportedWrite
// and nothing is recorded. Listing and counting need a namespace
// (idemstore.ErrNamespaceRequired), and COMPLETED records are in no index
// (idemstore.ErrNotIndexed, even with AllowScan). How durable a
// lease and a completion are depends on the server's persistence and
// replication: see "Redis durability" in docs/limits.md.
package redisstore
