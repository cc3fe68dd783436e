package lambdaidemtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest"
)

// shop is a test's fake payment provider and ledger.
type shop struct {
	charged map[string]int
	ledger  map[string]bool
}

func newShop() *shop { return &shop{charged: map[string]int{}, ledger: map[string]bool{}} }

// charge is a handler; chargeFirst charges before it checks the ledger.
func (s *shop) charge(chargeFirst bool) lambdaidem.MessageHandler {
	return func(ctx context.Context, msg events.SQSMessage) error {
		var o struct {
			Order string `json:"order"`
		}
		if err := json.Unmarshal([]byte(msg.Body), &o); err != nil || o.Order == "" {
			return lambdaidem.Poison(fmt.Errorf("bad order %q", msg.Body))
		}
		if chargeFirst {
			s.charged[o.Order]++
		}
		if s.ledger[o.Order] {
			return nil
		}
		if !chargeFirst {
			s.charged[o.Order]++
		}
		s.ledger[o.Order] = true
		return nil
	}
}

func (s *shop) chargedOnce() error {
	for o, n := range s.charged {
		if n > 1 {
			return fmt.Errorf("order %s charged %d times", o, n)
		}
	}
	return nil
}

var orderKey = lambdaidem.WithKeyJSONField("order")

func TestScenarios(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(k *lambdaidemtest.Kit)
	}{
		{"twice", func(k *lambdaidemtest.Kit) { k.DeliverTwice(`{"order":"o-1"}`) }},
		{"producer", func(k *lambdaidemtest.Kit) { k.ProducerDuplicate(`{"order":"o-1"}`) }},
		{"running", func(k *lambdaidemtest.Kit) { k.RedeliverWhileRunning(`{"order":"o-1"}`) }},
		{"crash", func(k *lambdaidemtest.Kit) { k.CrashAfterEffect(`{"order":"o-1"}`) }},
		{"paused", func(k *lambdaidemtest.Kit) { k.TakeoverFromPaused(`{"order":"o-1"}`) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newShop()
			k := lambdaidemtest.New(s.charge(false), orderKey)
			k.SetTrace(true)
			tc.run(k)
			t.Logf("runs %d outcomes %v status %s charged %d\n%s", k.Runs("o-1"), k.Outcomes("o-1"), k.Status("o-1"), s.charged["o-1"], k.Trace())
			if err := k.Check(); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestExplorer(t *testing.T) {
	x := lambdaidemtest.Exploration{
		Messages:  []string{`{"order":"o-1"}`, `{"order":"o-2"}`, `{"order":"o-3"}`},
		Options:   []lambdaidem.Option{orderKey},
		Scenarios: 1000,
	}
	x.Setup = func() (lambdaidem.MessageHandler, func() error) { s := newShop(); return s.charge(true), s.chargedOnce }
	start := time.Now()
	f := x.Search()
	t.Logf("buggy: %v in %s", f != nil, time.Since(start))
	if f != nil {
		t.Log(f.Error()[:min(3000, len(f.Error()))])
	}
	x.Setup = func() (lambdaidem.MessageHandler, func() error) {
		s := newShop()
		return s.charge(false), s.chargedOnce
	}
	start = time.Now()
	f = x.Search()
	t.Logf("fixed: %v in %s", f, time.Since(start))
}
