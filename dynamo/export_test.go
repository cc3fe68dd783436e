package dynamo

// Classify exposes the error classification to the external tests, which
// feed it real DynamoDB Local errors.
var Classify = classify

// RefusedForShape exposes how a transaction's refusal is read, for an
// error the SDK raises before sending.
var RefusedForShape = refusedForShape
