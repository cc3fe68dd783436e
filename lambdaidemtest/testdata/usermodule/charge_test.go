package usermodule

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest"
)

// orders explores a payment handler that keeps its own ledger of paid orders.
func orders(chargeFirst bool) lambdaidemtest.Exploration {
	return lambdaidemtest.Exploration{Scenarios: 10000,
		Messages: []string{`{"order":"o-1"}`, `{"order":"o-2"}`, `{"order":"o-3"}`},
		Options:  []lambdaidem.Option{lambdaidem.WithKeyJSONField("order")},
		Setup: func() (lambdaidem.MessageHandler, func() error) {
			charges, ledger := []string{}, map[string]bool{}
			return func(_ context.Context, m events.SQSMessage) error {
				if chargeFirst {
					charges = append(charges, m.Body) // the bug: it charges before it checks its ledger
				} else if !ledger[m.Body] {
					charges = append(charges, m.Body)
				}
				ledger[m.Body] = true
				return nil
			}, lambdaidemtest.AtMostOnce(&charges)
		}}
}

func TestChargingFirstIsCaught(t *testing.T) {
	f := orders(true).Search()
	if f == nil {
		t.Fatal("the double charge went unnoticed")
	}
	t.Logf("caught: seed %d: %s", f.Seed, f.Problems[0])
}

func TestCheckingFirstPasses(t *testing.T) { lambdaidemtest.Explore(t, orders(false)) }
