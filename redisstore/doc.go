// Package redisstore is the Redis implementation of [lambdaidem.Store], for
// Redis OSS 7, Valkey, Amazon ElastiCache (including Serverless) and Amazon
// MemoryDB. A record is one hash; every transition of it is one Lua script
// the server runs as one atomic step, so each costs one round trip.
//
// The smallest use:
//
//	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
//	store := redisstore.New(client, redisstore.Options{})
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
// that is lost without a re-send surfaces as lambdaidem.ErrStoreUnavailable,
// never as success.
//
// # Stored layout
//
// Keys start with Options.Prefix (default "lambdaidem") and carry the
// namespace as the cluster hash tag:
//
//	PREFIX:{NS}:r:KEY                   the record, a hash
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
//	ea  expires at ("" never)   e   last error, cut to Options.LastErrorBytes
//	dr  dead-letter reason      ds  dead-lettered (source) message ID
//	dc  dead-letter copy's ID   fa  first attempt at
//	ua  updated at              ps  status the latest claim replaced
//
// # Expiry
//
// Every script takes "now" from the caller and treats a record whose
// expires_at is before it as absent, as the other stores do. The key itself
// gets PEXPIREAT at expires_at plus Options.ExpirySlack (default a minute),
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
//	complete, fail, dead-letter, extend       1 EVALSHA
//	get                                       1 HGETALL
//	delete, release, forget                   1 EVALSHA
//	count                                     1 ZCOUNT (stuck records: a listing)
//	list, per page                            1 ZRANGE BYSCORE + 1 pipelined HGETALL batch
//
// The first call of a script on a server that has not cached it costs one
// more (NOSCRIPT, then EVAL); [Store.LoadScripts] at cold start avoids it.
//
// # What it does not do
//
// Transactional completion writes (CompleteRequest.Writes) are DynamoDB
// writes; this store refuses them with lambdaidem.ErrUnsupportedWrite and
// records nothing. Listing and counting need a namespace (ErrNoNamespace),
// and COMPLETED records are in no index (ErrNotIndexed). How durable a
// lease and a completion are depends on the server's persistence and
// replication: see the README's "Honest limits".
package redisstore
