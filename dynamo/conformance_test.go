package dynamo_test

import (
	"testing"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/storetest"
)

// TestConformance runs the suite every Store must pass on DynamoDB Local,
// through an Admin (a Store with the operator calls), so the operator
// cases run too. The subtests share one table: each uses a namespace of
// its own.
func TestConformance(t *testing.T) {
	client, table := newTable(t)
	storetest.Run(t, func(t *testing.T) lambdaidem.Store {
		return dynamo.NewAdmin(client, table)
	})
}
