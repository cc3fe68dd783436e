// Command redis is an SQS-triggered function that keeps its idempotency
// records in ElastiCache Serverless (Valkey) or MemoryDB through package
// redisstore: a VPC-attached function, deployed with template.yaml next to
// this file (`sam build -t examples/redis/template.yaml`, then
// `sam deploy --guided`).
//
// It reads REDIS_ENDPOINT (host:port of the cache's cluster endpoint; TLS
// is always on, as ElastiCache Serverless and MemoryDB require) and
// DLQ_URL, and processes each message's body once per message ID.
package main
