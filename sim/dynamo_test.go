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
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

var flagDynamoBudget = flag.Duration("sim.dynamo-budget", 20*time.Second, "how long TestSimulationDynamoDB explores")

// TestSimulationDynamoDB runs the same generator against the DynamoDB
// store on DynamoDB Local, so its conditional expressions are under the
// same invariants. It skips without an endpoint, unless
// LAMBDAIDEM_REQUIRE_SERVICES=1.
func TestSimulationDynamoDB(t *testing.T) {
	client := testenv.DynamoDB(t, dynamo.ClientOptions(dynamo.Tuning{AttemptTimeout: 2 * time.Second, MaxBackoff: 20 * time.Millisecond}))
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
	store := dynamo.New(client, table)
	budget := *flagDynamoBudget
	if testing.Short() {
		budget = min(budget, 3*time.Second)
	}
	seed := freshSeed()
	t.Logf("exploring DynamoDB Local from seed %d for %s", seed, budget)
	st := Explore(Options{Budget: budget, Seed: seed, Known: known(), Filter: *flagFilter, Shrink: true,
		Store: func() lambdaidem.Store { return store }})
	t.Logf("%d scenarios, %d messages, %d invocations in %s (seeds %d..%d)",
		st.Scenarios, st.Messages, st.Invocations, st.Elapsed.Round(time.Millisecond), seed, seed+uint64(st.Scenarios)-1)
	if st.Failure != nil {
		t.Fatal(st.Report())
	}
}
