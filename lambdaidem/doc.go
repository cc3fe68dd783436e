// Package lambdaidem makes SQS-triggered AWS Lambda functions process each
// message exactly once in effect.
//
// It wraps a handler: for each record it derives an idempotency key, takes a
// fenced lease on that key with one conditional write, runs the handler only
// if it got the lease, records the outcome with a second conditional write,
// skips duplicates, dead-letters messages that keep failing, and reports
// per-record results as a partial batch response.
//
//	store := dynamo.New(client, "idempotency")
//	lambda.Start(lambdaidem.SQS(store, handle, lambdaidem.WithNamespace("orders")))
package lambdaidem
