package idemstore

import "context"

// Batcher is implemented by a Store that can claim several keys, and
// complete several leases, in fewer requests than one each: records
// claimed together in one request and those that finish together
// completed in one more. lambdaidem.SQS built WithBatchedWrites calls it
// once per lane of a batch (see lambdaidem.WithBatchedWrites). It is a
// separate interface so that a Store written before it still compiles; the
// in-memory, DynamoDB and Redis stores implement it, and the conformance
// suite checks every store that does.
//
// Batching changes the number of requests, never an outcome: each request
// of a batch gets the answer (and leaves the record) that the single call
// would have, as if the calls had run one after the other in the order
// given.
type Batcher interface {
	// ClaimBatch claims each of reqs as Claim would. out[i] answers
	// reqs[i]: a claim, a refusal with the record that refused it, or an
	// error (wrapping ErrStoreUnavailable when the store could not answer
	// for that key). Two requests for one key are answered in order.
	ClaimBatch(ctx context.Context, reqs []ClaimRequest) (out []BatchClaim)

	// CompleteBatch completes each of reqs as Complete would; errs[i]
	// answers reqs[i] (nil, ErrLeaseLost, ErrStoreUnavailable, ...).
	CompleteBatch(ctx context.Context, reqs []CompleteRequest) (errs []error)
}

// BatchClaim is one key's answer in a ClaimBatch.
type BatchClaim struct {
	Result ClaimResult
	Err    error
}
