package usermodule

import (
	"context"
	"errors"
	"testing"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest"
)

// fakes is the payment provider and the ledger the tests read.
type fakes struct {
	charges []string
	paid    map[string]bool
	decline map[string]bool
}

func newFakes() *fakes { return &fakes{paid: map[string]bool{}, decline: map[string]bool{}} }

func (f *fakes) Charge(_ context.Context, order string, _ int) error {
	if f.decline[order] {
		return errors.New("card declined")
	}
	f.charges = append(f.charges, order)
	return nil
}
func (f *fakes) Paid(order string) bool { return f.paid[order] }
func (f *fakes) Record(order string)    { f.paid[order] = true }

// options are the decorator options the function is deployed with.
var options = []lambdaidem.Option{lambdaidem.WithKeyJSONField("order"), lambdaidem.WithMaxAttempts(3)}

func TestEachFailureModeChargesOnce(t *testing.T) {
	const body = `{"order":"o-1","cents":1250}`
	for name, scenario := range map[string]func(*lambdaidemtest.Kit){
		"delivered twice":             func(k *lambdaidemtest.Kit) { k.DeliverTwice(body) },
		"producer duplicate":          func(k *lambdaidemtest.Kit) { k.ProducerDuplicate(body) },
		"redelivered while running":   func(k *lambdaidemtest.Kit) { k.RedeliverWhileRunning(body) },
		"crash after the charge":      func(k *lambdaidemtest.Kit) { k.CrashAfterEffect(body) },
		"takeover from paused holder": func(k *lambdaidemtest.Kit) { k.TakeoverFromPaused(body) },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakes()
			k := lambdaidemtest.New(ChargeOrders(f, f), options...)
			scenario(k)
			if len(f.charges) != 1 {
				t.Errorf("charged %d times, want once (handler runs %d, outcomes %v)", len(f.charges), k.Runs("o-1"), k.Outcomes("o-1"))
			}
			if err := k.Check(); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestHandlerRefusesWhatIsNotAnOrder(t *testing.T) {
	h := ChargeOrders(newFakes(), newFakes())
	for _, body := range []string{`{"order":"o-1"}`, `{"cents":5}`, lambdaidemtest.SNSBody("orders", `{"order":"o-1","cents":5}`, nil)} {
		var poison *lambdaidem.PoisonError
		if err := h(context.Background(), lambdaidemtest.Message(body)); !errors.As(err, &poison) {
			t.Errorf("%s: error %v, want poison", body, err)
		}
	}
}

func TestNotAnOrderIsDeadLettered(t *testing.T) {
	k := lambdaidemtest.New(ChargeOrders(newFakes(), newFakes()), options...)
	k.ExpectDeadLetter("o-2", lambdaidem.ReasonPoison)
	k.Poison(`{"order":"o-2","cents":-5}`)
	dl := k.DeadLetters()
	if len(dl) != 1 || dl[0].Reason != lambdaidem.ReasonPoison || k.Runs("o-2") != 1 {
		t.Fatalf("dead letters %+v after %d runs, want one poison copy after one run", dl, k.Runs("o-2"))
	}
	if err := k.Check(); err != nil {
		t.Error(err)
	}
}

func TestDeclinedCardHoldsTheCustomersLaterOrders(t *testing.T) {
	f := newFakes()
	f.decline["o-2"] = true
	k := lambdaidemtest.New(ChargeOrders(f, f), options...)
	k.ExpectDeadLetter("o-2", lambdaidem.ReasonMaxAttempts)
	k.StopGroup("alice", `{"order":"o-1","cents":1}`, `{"order":"o-2","cents":1}`, `{"order":"o-3","cents":1}`)
	if got := k.RunOrder(); len(got) != 5 || got[4] != "o-3" {
		t.Errorf("runs %v: o-3 ran before o-2 was given up on", got)
	}
	f.decline["o-2"] = false
	if _, err := k.Redrive(); err != nil || k.Status("o-2") != lambdaidem.StatusCompleted {
		t.Errorf("after the redrive o-2 is %s (%v), want COMPLETED", k.Status("o-2"), err)
	}
	if err := k.Check(); err != nil {
		t.Error(err)
	}
}

func TestChargesAtMostOnceUnderAnyFailure(t *testing.T) {
	lambdaidemtest.Explore(t, lambdaidemtest.Exploration{
		Options:  options,
		Messages: []string{`{"order":"o-1","cents":100}`, `{"order":"o-2","cents":200}`, `not an order`},
		Setup: func() (lambdaidem.MessageHandler, func() error) {
			f := newFakes()
			return ChargeOrders(f, f), lambdaidemtest.AtMostOnce(&f.charges)
		},
		// The body that is not JSON is dead-lettered as malformed.
		Expect: func(k *lambdaidemtest.Kit) { k.ExpectDeadLetter("", lambdaidem.ReasonMalformedBody) },
	})
}
