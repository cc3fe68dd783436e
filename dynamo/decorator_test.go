package dynamo_test

import (
	"testing"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/storetest"
)

// The request floor, measured on DynamoDB Local through the fault proxy
// with the decorator on top of the real store: first delivery 2,
// duplicate 1, cached duplicate 0, handler failure 2.
func TestDecoratorRequestsPerMessage(t *testing.T) {
	t.Parallel()
	b := setup(t, testTuning)
	storetest.RequestsPerMessage(t, b.store, b.ns, b.proxy.ResetCounts, b.proxy.Total)
}

// A dead-letter copy whose final mark the store did not take is never
// stranded, on DynamoDB Local (storetest.UnwrittenFinalMark).
func TestDecoratorUnwrittenFinalMark(t *testing.T) {
	t.Parallel()
	b := setup(t, testTuning)
	storetest.UnwrittenFinalMark(t, b.store, b.ns)
}
