// Command provision creates the project's tables and queues, as described by
// localstack/resources.json, in a local AWS: DynamoDB Local and the SQS
// emulator started by localstack/stack.sh, or LocalStack.
//
// It talks only to the endpoints named by AWS_ENDPOINT_URL_DYNAMODB and
// AWS_ENDPOINT_URL_SQS and refuses to run without them (without the
// first, with -tables=false), so it can never create anything in a real
// AWS account by accident.
//
// Usage:
//
//	provision create [-resources localstack/resources.json] [-prefix P] [-wait 30s] [-tables=false]
//	provision wait [-wait 30s] [-tables=false]
//	provision freeport [N]
//
// create waits (up to -wait) for both services to answer, then creates every
// table and queue; it is idempotent, so running it against a stack that
// already has the resources changes nothing, and it fails if an existing
// table's schema differs from the description. -prefix prepends a string to
// every name, for tests that need their own copy. -tables=false creates
// only the queues and needs only AWS_ENDPOINT_URL_SQS (the stack without
// DynamoDB, for the Redis store). -resources may name your own file of the
// same shape, for your own tables and queues. freeport prints N distinct
// free TCP ports on 127.0.0.1, one a line, for stack.sh.
package main
