package lambdaidemtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest"
)

// payments is an example's fake payment provider: the charges it made,
// per order, and the orders it refuses.
type payments struct {
	charges map[string]int
	refuse  map[string]bool
}

// chargeOrders is the handler under test: it checks its own ledger before
// it charges, stops when its lease has ended, and refuses orders without
// an ID as poison.
func chargeOrders(p *payments) lambdaidem.MessageHandler {
	return func(ctx context.Context, msg events.SQSMessage) error {
		var o struct {
			Order string `json:"order"`
		}
		if err := json.Unmarshal([]byte(msg.Body), &o); err != nil || o.Order == "" {
			return lambdaidem.Poison(fmt.Errorf("no order in %q", msg.Body))
		}
		if p.charges[o.Order] > 0 || ctx.Err() != nil {
			return ctx.Err()
		}
		if p.refuse[o.Order] {
			return errors.New("card declined")
		}
		p.charges[o.Order]++
		return nil
	}
}

func newPayments() *payments { return &payments{charges: map[string]int{}, refuse: map[string]bool{}} }

func ExampleKit_DeliverTwice() {
	p := newPayments()
	k := lambdaidemtest.New(chargeOrders(p), lambdaidem.WithKeyJSONField("order"))
	k.DeliverTwice(`{"order":"o-1"}`)
	fmt.Println("runs:", k.Runs("o-1"), "charges:", p.charges["o-1"])
	fmt.Println("outcomes:", k.Outcomes("o-1"))
	// Output:
	// runs: 1 charges: 1
	// outcomes: [processed duplicate]
}

func ExampleKit_ProducerDuplicate() {
	p := newPayments()
	k := lambdaidemtest.New(chargeOrders(p), lambdaidem.WithKeyJSONField("order"))
	k.ProducerDuplicate(`{"order":"o-1"}`)
	fmt.Println("runs:", k.Runs("o-1"), "charges:", p.charges["o-1"])
	fmt.Println("outcomes:", k.Outcomes("o-1"))
	// Output:
	// runs: 1 charges: 1
	// outcomes: [processed duplicate]
}

func ExampleKit_RedeliverWhileRunning() {
	p := newPayments()
	k := lambdaidemtest.New(chargeOrders(p), lambdaidem.WithKeyJSONField("order"))
	k.RedeliverWhileRunning(`{"order":"o-1"}`)
	fmt.Println("runs:", k.Runs("o-1"), "charges:", p.charges["o-1"])
	fmt.Println("outcomes:", k.Outcomes("o-1"))
	// Output:
	// runs: 1 charges: 1
	// outcomes: [in_progress processed duplicate]
}

func ExampleKit_CrashAfterEffect() {
	p := newPayments()
	k := lambdaidemtest.New(chargeOrders(p), lambdaidem.WithKeyJSONField("order"))
	k.CrashAfterEffect(`{"order":"o-1"}`)
	// The handler ran twice, but checked its own ledger the second time.
	fmt.Println("runs:", k.Runs("o-1"), "charges:", p.charges["o-1"])
	fmt.Println("status:", k.Status("o-1"))
	// Output:
	// runs: 2 charges: 1
	// status: COMPLETED
}

func ExampleKit_TakeoverFromPaused() {
	p := newPayments()
	k := lambdaidemtest.New(chargeOrders(p), lambdaidem.WithKeyJSONField("order"))
	k.TakeoverFromPaused(`{"order":"o-1"}`)
	// The paused instance woke after the takeover, saw its context ended
	// and charged nothing.
	fmt.Println("runs:", k.Runs("o-1"), "charges:", p.charges["o-1"])
	fmt.Println("outcomes:", k.Outcomes("o-1"))
	// Output:
	// runs: 2 charges: 1
	// outcomes: [processed failed]
}

func ExampleKit_Poison() {
	p := newPayments()
	k := lambdaidemtest.New(chargeOrders(p), lambdaidem.WithKeyJSONField("order"))
	k.Poison(`{"order":"o-1","amount":"ten"`)
	for _, d := range k.DeadLetters() {
		fmt.Println(d.Reason, d.Body)
	}
	// Poison declares the dead letter of what it sends, so Check accepts
	// it; a message it sent that was not dead-lettered would be reported.
	fmt.Println("check:", k.Check())
	// Output:
	// malformed_body {"order":"o-1","amount":"ten"
	// check: <nil>
}

func ExampleKit_StopGroup() {
	p := newPayments()
	p.refuse["o-2"] = true
	k := lambdaidemtest.New(chargeOrders(p), lambdaidem.WithKeyJSONField("order"), lambdaidem.WithMaxAttempts(3))
	k.ExpectDeadLetter("o-2", lambdaidem.ReasonMaxAttempts)
	k.StopGroup("customer-7", `{"order":"o-1"}`, `{"order":"o-2"}`, `{"order":"o-3"}`)
	// o-3 waited until o-2 had failed three times and was dead-lettered.
	fmt.Println("runs:", k.RunOrder())
	for _, d := range k.DeadLetters() {
		fmt.Println("dead-lettered:", d.Key, d.Reason, d.Error)
	}
	fmt.Println("check:", k.Check())
	// Output:
	// runs: [o-1 o-2 o-2 o-2 o-3]
	// dead-lettered: o-2 max_attempts card declined
	// check: <nil>
}

func ExampleKit_Redrive() {
	p := newPayments()
	p.refuse["o-1"] = true
	k := lambdaidemtest.New(chargeOrders(p), lambdaidem.WithKeyJSONField("order"), lambdaidem.WithMaxAttempts(2))
	k.Send(`{"order":"o-1"}`)
	k.Run()
	fmt.Println("before:", k.Status("o-1"), len(k.DeadLetters()), "in the DLQ")

	p.refuse["o-1"] = false // the card works now
	sum, err := k.Redrive()
	fmt.Println("redriven:", sum.Moved, err)
	fmt.Println("after:", k.Status("o-1"), "charges:", p.charges["o-1"])
	k.ExpectDeadLetter("o-1", lambdaidem.ReasonMaxAttempts)
	fmt.Println("check:", k.Check())
	// Output:
	// before: DEAD_LETTERED 1 in the DLQ
	// redriven: 1 <nil>
	// after: COMPLETED charges: 1
	// check: <nil>
}

func ExampleExploration() {
	x := lambdaidemtest.Exploration{
		Setup: func() (lambdaidem.MessageHandler, func() error) {
			p := newPayments()
			return chargeOrders(p), func() error {
				for o, n := range p.charges {
					if n > 1 {
						return fmt.Errorf("order %s charged %d times", o, n)
					}
				}
				return nil
			}
		},
		Options:   []lambdaidem.Option{lambdaidem.WithKeyJSONField("order")},
		Messages:  []string{`{"order":"o-1"}`, `{"order":"o-2"}`},
		Scenarios: 200,
	}
	fmt.Println("failure:", x.Search())
	// Output:
	// failure: <nil>
}

func ExampleMessage() {
	msg := lambdaidemtest.Message(`{"order":"o-1"}`,
		lambdaidemtest.WithGroup("customer-7"),
		lambdaidemtest.WithReceiveCount(2),
		lambdaidemtest.WithAttribute("tenant", "acme"))
	ev := lambdaidemtest.Event(msg)
	fmt.Println(ev.Records[0].EventSourceARN)
	fmt.Println(msg.Attributes["MessageGroupId"], msg.Attributes["ApproximateReceiveCount"], *msg.MessageAttributes["tenant"].StringValue)
	// Output:
	// arn:aws:sqs:us-east-1:123456789012:queue.fifo
	// customer-7 2 acme
}
