// Command redis is an SQS-triggered function that keeps its idempotency
// records in ElastiCache Serverless (Valkey) or MemoryDB through package
// redisstore: a VPC-attached function, deployed with template.yaml next to
// this file (`sam build -t examples/redis/template.yaml`, then
// `sam deploy --guided`).
//
// It processes orders such as {"order_id": "o-1"} once per message ID,
// dead-letters a body that is not an order, or that says "poison": true,
// with its reason, and prints its metrics (package emf). It reads
// REDIS_URL (the cache as redisstore.NewClient reads it:
// rediss+cluster://host:port for the cache's cluster endpoint, over TLS as
// ElastiCache Serverless and MemoryDB require; redis+cluster://host:port
// for a local redis-server without TLS), DLQ_URL, IDEMPOTENCY_NAMESPACE
// (default "orders") and MAX_ATTEMPTS. docs/local-development.md runs it
// under the local runner on the stack without DynamoDB.
package main
