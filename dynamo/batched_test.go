package dynamo_test

import (
	"testing"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/storetest"
)

// TestBatchedWritesRequests: a batch of 10 fresh records under
// WithBatchedWrites costs DynamoDB Local 4 requests, two
// TransactWriteItems claiming five records each (the two lanes) and two
// BatchExecuteStatements completing them, where one at a time costs 20
// UpdateItems; its redelivery costs 2 where one at a time costs 10. Every
// record ends as one at a time leaves it (storetest.BatchedWrites): the
// same outcomes, COMPLETED at attempt 1.
func TestBatchedWritesRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, testTuning)
	want := map[storetest.BatchedDelivery]map[string]int{
		storetest.DeliverSingle:       {"UpdateItem": 20},
		storetest.DeliverBatched:      {"TransactWriteItems": 2, "BatchExecuteStatement": 2},
		storetest.DeliverSingleAgain:  {"UpdateItem": 10},
		storetest.DeliverBatchedAgain: {"TransactWriteItems": 2},
	}
	storetest.BatchedWrites(t, b.store, b.ns, b.at(0), func(d storetest.BatchedDelivery, after bool) {
		if !after {
			b.proxy.ResetCounts()
			return
		}
		wantRequests(t, b.proxy, string(d), want[d])
	})
}
