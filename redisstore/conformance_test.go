package redisstore_test

import (
	"testing"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/storetest"
	"github.com/lambdaidem/go-lambdaidem/redisstore"
)

// TestConformance runs the suite every Store must pass on a real
// redis-server. The subtests share one database: each uses a namespace of
// its own.
func TestConformance(t *testing.T) {
	client := newClient(t, addr(t))
	storetest.Run(t, func(t *testing.T) lambdaidem.Store {
		return redisstore.New(client, redisstore.Options{})
	})
}
