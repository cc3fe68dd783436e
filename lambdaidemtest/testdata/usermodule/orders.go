// Package usermodule is what a lambdaidem user writes: a handler that
// charges orders, and its tests (orders_test.go, charge_test.go), built on
// lambdaidemtest alone.
package usermodule

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// Order is a message's body.
type Order struct {
	ID    string `json:"order"`
	Cents int    `json:"cents"`
}

// Payments charges cards.
type Payments interface {
	Charge(ctx context.Context, order string, cents int) error
}

// Ledger is the service's own record of paid orders.
type Ledger interface {
	Paid(order string) bool
	Record(order string)
}

// ChargeOrders charges each order once: it checks its ledger first, stops
// when its context has ended (its lease is gone), and refuses bodies that
// are not orders as poison.
func ChargeOrders(pay Payments, ledger Ledger) lambdaidem.MessageHandler {
	return func(ctx context.Context, msg events.SQSMessage) error {
		var o Order
		if err := json.Unmarshal([]byte(msg.Body), &o); err != nil || o.ID == "" || o.Cents <= 0 {
			return lambdaidem.Poison(errors.New("not an order"))
		}
		if ledger.Paid(o.ID) {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := pay.Charge(ctx, o.ID, o.Cents); err != nil {
			return err
		}
		ledger.Record(o.ID)
		return nil
	}
}
