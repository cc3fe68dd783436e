package lambdaidem_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest"
)

// The test kit, package lambdaidemtest, runs a handler with its options on
// a simulated queue, store and clock, one failure mode at a time. Here a
// crash after the effect and before the completion is recorded: the
// message comes back and the handler runs again. A handler that charges
// blindly charges twice; one that checks its own ledger first charges
// once.
func Example_testing() {
	for _, checksLedger := range []bool{false, true} {
		charges := map[string]int{}
		charge := func(ctx context.Context, msg events.SQSMessage) error {
			var o struct {
				Order string `json:"order"`
			}
			if err := json.Unmarshal([]byte(msg.Body), &o); err != nil {
				return lambdaidem.Poison(err)
			}
			if checksLedger && charges[o.Order] > 0 {
				return nil
			}
			charges[o.Order]++
			return nil
		}
		k := lambdaidemtest.New(charge, lambdaidem.WithKeyJSONField("order"))
		k.CrashAfterEffect(`{"order":"o-1"}`)
		fmt.Println("checks its ledger:", checksLedger, "runs:", k.Runs("o-1"), "charges:", charges["o-1"], "status:", k.Status("o-1"))
	}
	// Output:
	// checks its ledger: false runs: 2 charges: 2 status: COMPLETED
	// checks its ledger: true runs: 2 charges: 1 status: COMPLETED
}
