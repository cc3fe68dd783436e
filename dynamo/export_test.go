package dynamo

// Classify exposes the error classification to the external tests, which
// feed it real DynamoDB Local errors.
var Classify = classify
