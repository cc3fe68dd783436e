// Package integration holds end-to-end tests of the decorator (package
// lambdaidem) on the real DynamoDB store (package dynamo) and, where a
// dead-letter queue is involved, a real SQS queue (package sqsqueue): one
// test per exactly-once extra of docs/design.md ("Beyond the basics") — transactional completion,
// at-most-once mode, the two retention windows, the lease heartbeat and the
// fencing number used in a handler's own conditional writes.
//
// The unit tests of package lambdaidem run the same behaviour on the
// in-memory store; these show that it holds on DynamoDB's conditions and
// transactions, which the in-memory store only imitates. The package has no
// code of its own. Run it against the local services (make test starts
// them):
//
//	AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:8000 AWS_ENDPOINT_URL_SQS=http://127.0.0.1:5000 \
//	  LAMBDAIDEM_REQUIRE_SERVICES=1 go test -race ./integration/
//
// Every test creates its own tables (TTL off: DynamoDB Local would delete
// expired records within seconds, and the store must never depend on TTL)
// and queues, and steers time with a fake clock (lambdaidem.WithClock)
// instead of sleeping.
package integration
