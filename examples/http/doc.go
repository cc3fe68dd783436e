// Command http is the example Lambda function behind an API Gateway HTTP
// API route "POST /payments". Each request creates a payment: one row in a
// DynamoDB table under a fresh random ID, so a second run would be a second
// payment. httpidem makes a client's retry with the same Idempotency-Key
// header get the first response back instead; the payment row is committed
// in one transaction with the idempotency record's completion, so a crash
// can never leave a payment without its stored response or the reverse.
//
// Request body: {"amount_cents": 2500, "currency": "EUR"}. Answers: 201
// with {"payment_id": ..., "amount_cents": ..., "currency": ...}, 400 for a
// malformed body, and httpidem's answers for the key (see its package
// documentation).
//
// Configuration comes from the environment (see ConfigFromEnv):
// IDEMPOTENCY_TABLE, EFFECTS_TABLE (the payments table) and
// IDEMPOTENCY_NAMESPACE, the names every example and template.yaml use;
// endpoints follow the SDK's AWS_ENDPOINT_URL_* variables.
package main
