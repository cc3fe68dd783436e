// Package bench measures lambdaidem against DynamoDB Local and the local
// Lambda runner, for `make bench` and BENCHMARKS.md (the in-process
// overhead benchmark lives in package lambdaidem as BenchmarkSQS).
//
// RunDynamo times the first delivery, the duplicate, a 10-record batch and
// a FIFO group of 10 through lambdaidem.SQS with the DynamoDB store, each
// next to its floor (the bare DynamoDB requests of the same shape, issued
// directly with the SDK) and, when the harness is installed, next to
// Powertools for AWS Lambda (TypeScript) on Node.js against the same
// DynamoDB Local. The variants run interleaved in one run on one client, in
// an order in which each follows each other equally often. It then counts
// the requests per message of every path through a counting proxy. RunRedis
// does the same for the first delivery and the duplicate on the Redis
// store, in the same order, next to the store's own scripts and to
// Powertools' cache layer. RunWait counts the requests of a call that
// waits for a run in progress (lambdaidem.WithWaitForCompletion) on both
// stores, and how long after the run it returns. RunColdStart measures
// the orders bootstrap's cold start and memory next to the same job on
// Powertools. RunE2E pushes messages through the orders example's real
// bootstrap under package localrun and reports messages per second. Both
// are scenarios on internal/harness, which the demo and the chaos run
// share.
//
// The smallest use, with DynamoDB Local on port 8000:
//
//	res, err := bench.RunDynamo(ctx, bench.DynamoConfig{Endpoint: "http://127.0.0.1:8000", N: 1000})
//	if err != nil { ... }
//	res.WriteLatency(os.Stdout)
//
// The command cmd/lambdaidem-bench runs everything and prints
// Markdown; README.md says what each number means.
package bench
