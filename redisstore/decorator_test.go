package redisstore_test

import (
	"testing"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/storetest"
)

// TestDecoratorRequestsPerMessage: the decorator on the real store, counted
// at the proxy: first delivery 1+1 round trips, duplicate 1, cached
// duplicate 0, handler failure 1+1. Connection set-up (HELLO) is not a
// store request and is not counted.
func TestDecoratorRequestsPerMessage(t *testing.T) {
	b := setup(t, 2)
	storetest.RequestsPerMessage(t, b.store, b.ns, b.proxy.ResetCounts, func() int {
		return b.proxy.Count("EVALSHA") + b.proxy.Count("EVAL") + b.proxy.Count("HGETALL")
	})
}

// A dead-letter copy whose final mark the store did not take is never
// stranded, on a real redis-server (storetest.UnwrittenFinalMark).
func TestDecoratorUnwrittenFinalMark(t *testing.T) {
	b := setup(t, 2)
	storetest.UnwrittenFinalMark(t, b.store, b.ns)
}
