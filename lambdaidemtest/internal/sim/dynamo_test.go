package sim

import (
	"context"
	"flag"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

var flagDynamoBudget = flag.Duration("sim.dynamo-budget", 20*time.Second, "how long TestSimulationDynamoDB explores")

// TestSimulationDynamoDB runs the same generator against the DynamoDB
// store on DynamoDB Local, so its conditional expressions are under the
// same invariants. It skips without an endpoint, unless
// LAMBDAIDEM_REQUIRE_SERVICES=1.
func TestSimulationDynamoDB(t *testing.T) {
	exploreStore(t, "DynamoDB Local", *flagDynamoBudget, dynamoStore(t))
}

// dynamoStore is the DynamoDB store on a table of its own on DynamoDB
// Local, deleted when t ends; t skips without an endpoint.
func dynamoStore(t *testing.T) idemstore.Store {
	t.Helper()
	client := testenv.DynamoDB(t, dynamo.ClientOptions(dynamo.Tuning{AttemptTimeout: 10 * time.Second, MaxBackoff: 20 * time.Millisecond}))
	table := testenv.Name("sim")
	// TTL off: DynamoDB Local would delete records the simulated clock
	// still needs.
	if err := dynamo.CreateTable(t.Context(), client, table, dynamo.TableOptions{NoTTL: true, PollInterval: 20 * time.Millisecond}); err != nil {
		t.Fatalf("create table: %v", err)
	}
	t.Cleanup(func() {
		if _, err := client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
			t.Logf("delete table %s: %v", table, err)
		}
	})
	return dynamo.NewAdmin(client, table)
}
