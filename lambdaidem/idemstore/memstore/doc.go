// Package memstore is an in-memory [idemstore.Store] for unit tests and
// examples: one mutex, one map, no wall clock (every condition compares
// against the request's Now), and the same contract as the DynamoDB store,
// checked by the same conformance suite (package storetest).
//
// It is not for production: records live in one process and vanish with
// it, so it cannot stop a duplicate delivered to another Lambda instance.
//
// It implements [idemstore.DeadLetterResetter] and [idemstore.Admin]
// like the DynamoDB and Redis stores, so redrive and operator calls can be
// tested on it too.
//
// Two extras make tests of code built on a Store short: [Store.Stats]
// counts calls per operation (how many store requests a message cost), and
// [Store.SetFault] makes chosen operations fail as if the store were
// unreachable.
//
//	store := memstore.New()
//	store.SetFault(func(op string) error {
//		if op == memstore.OpComplete {
//			return errors.New("throttled")
//		}
//		return nil
//	})
//	h := lambdaidem.SQS(store, handle)
package memstore
