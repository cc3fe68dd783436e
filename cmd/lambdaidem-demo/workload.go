package main

import (
	"encoding/json"
	"fmt"
	"time"
)

// Scenario names what an order of the workload is there to show.
type Scenario string

// The scenarios of the scripted workload.
const (
	// ScenarioPlain: an order sent once.
	ScenarioPlain Scenario = "plain"
	// ScenarioDuplicate: an order the producer sends more than once, each
	// copy a new SQS message with its own message ID.
	ScenarioDuplicate Scenario = "duplicate"
	// ScenarioSlow: a handler that runs longer than the queue's visibility
	// timeout, so SQS delivers the message again while the first attempt
	// still runs.
	ScenarioSlow Scenario = "slow"
	// ScenarioPoison: a message that can never succeed.
	ScenarioPoison Scenario = "poison"
	// ScenarioRetry: a handler that fails twice, then succeeds.
	ScenarioRetry Scenario = "retry"
	// ScenarioCrash: the process exits in the middle of the handler, before
	// the effect, on the first attempt.
	ScenarioCrash Scenario = "crash"
	// ScenarioCrashAfter: the process exits after the effect and before the
	// completion is recorded, on the first attempt. Only the transactional
	// function gets it: in plain mode it repeats the effect by design.
	ScenarioCrashAfter Scenario = "crash_after"
)

// Mode is the orders function's EFFECT_MODE an order is sent to.
type Mode string

// The two functions of the demo, one per effect mode of examples/orders.
const (
	// ModePlain: the effect is its own PutItem, then the completion.
	ModePlain Mode = "plain"
	// ModeTransactional: the effect commits with the completion in one
	// TransactWriteItems.
	ModeTransactional Mode = "transactional"
)

// Modes lists the modes in the order the summary shows them.
var Modes = []Mode{ModePlain, ModeTransactional}

// Order is one business order of the workload and how it is sent.
type Order struct {
	ID       string
	Scenario Scenario
	// Mode is the function the order is sent to.
	Mode Mode
	// Steering fields of the orders example's body (examples/orders).
	Poison    bool
	FailTimes int
	SleepMS   int
	Crash     string
	// Copies is how many messages carry the order in the main wave; the
	// copies are sent one after the other, so they often share a batch or
	// overlap in time.
	Copies int
	// LateCopies are sent once the main wave has drained: a producer that
	// retries long after its first send succeeded.
	LateCopies int
}

// Body is the message body, in the orders example's format.
func (o Order) Body() string {
	b, err := json.Marshal(struct {
		OrderID   string `json:"order_id"`
		Poison    bool   `json:"poison,omitempty"`
		FailTimes int    `json:"fail_times,omitempty"`
		SleepMS   int    `json:"sleep_ms,omitempty"`
		Crash     string `json:"crash,omitempty"`
	}{o.ID, o.Poison, o.FailTimes, o.SleepMS, o.Crash})
	if err != nil {
		panic(err) // a struct of strings, ints and bools always marshals
	}
	return string(b)
}

// Sends is the number of messages that carry the order.
func (o Order) Sends() int { return o.Copies + o.LateCopies }

// Workload is the scripted set of orders.
type Workload struct {
	Orders []Order
}

// Messages is the number of messages the workload sends.
func (w Workload) Messages() int {
	n := 0
	for _, o := range w.Orders {
		n += o.Sends()
	}
	return n
}

// find returns the order with the given ID.
func (w Workload) find(id string) (Order, bool) {
	for _, o := range w.Orders {
		if o.ID == id {
			return o, true
		}
	}
	return Order{}, false
}

// ordersOf returns the orders of one scenario, in workload order.
func (w Workload) ordersOf(s Scenario) []Order {
	var out []Order
	for _, o := range w.Orders {
		if o.Scenario == s {
			out = append(out, o)
		}
	}
	return out
}

// TransactionalOrders is how many ordinary orders the transactional
// function gets besides its crash: enough for duplicates to race.
const TransactionalOrders = 8

// NewWorkload returns, for the plain function, plain orders numbered
// 1..plain and the four special orders, and, for the transactional
// function, TransactionalOrders orders and one that crashes after the
// effect. Order i is sent three times when i is a multiple of 12 (two
// copies at once and one late), twice when a multiple of 5 (both at once),
// and once otherwise; transactional order i twice at once when i is even.
// slow is how long the slow order's handler sleeps. Everything is fixed:
// the same call gives the same workload.
func NewWorkload(plain int, slow time.Duration) Workload {
	var w Workload
	for i := 1; i <= plain; i++ {
		o := Order{ID: fmt.Sprintf("o-%03d", i), Scenario: ScenarioPlain, Mode: ModePlain, Copies: 1}
		switch {
		case i%12 == 0:
			o.Scenario, o.Copies, o.LateCopies = ScenarioDuplicate, 2, 1
		case i%5 == 0:
			o.Scenario, o.Copies = ScenarioDuplicate, 2
		}
		w.Orders = append(w.Orders, o)
	}
	w.Orders = append(w.Orders,
		Order{ID: "o-slow", Scenario: ScenarioSlow, Mode: ModePlain, SleepMS: int(slow / time.Millisecond), Copies: 1},
		Order{ID: "o-poison", Scenario: ScenarioPoison, Mode: ModePlain, Poison: true, Copies: 1},
		Order{ID: "o-retry", Scenario: ScenarioRetry, Mode: ModePlain, FailTimes: 2, Copies: 1},
		Order{ID: "o-crash", Scenario: ScenarioCrash, Mode: ModePlain, Crash: "before_effect", Copies: 1},
	)
	for i := 1; i <= TransactionalOrders; i++ {
		o := Order{ID: fmt.Sprintf("t-%03d", i), Scenario: ScenarioPlain, Mode: ModeTransactional, Copies: 1}
		if i%2 == 0 {
			o.Scenario, o.Copies = ScenarioDuplicate, 2
		}
		w.Orders = append(w.Orders, o)
	}
	w.Orders = append(w.Orders,
		Order{ID: "t-crash", Scenario: ScenarioCrashAfter, Mode: ModeTransactional, Crash: "after_effect", Copies: 1})
	return w
}

// inMode returns the orders sent to one function, in workload order.
func (w Workload) inMode(m Mode) []Order {
	var out []Order
	for _, o := range w.Orders {
		if o.Mode == m {
			out = append(out, o)
		}
	}
	return out
}
