package lambdaidemtest

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// The explorer's operators act: over 200 scenarios with every kind
// allowed, some releases, forgets, forced ones and redrives apply, and
// the library's promises hold throughout for a handler that keeps its
// own ledger.
func TestExplorerDrawsOperators(t *testing.T) {
	actions := 0
	x := Exploration{
		Messages:  []string{`{"order":"o-1"}`, `{"order":"o-2"}`, `{"order":"o-3"}`, `poison`},
		Options:   []lambdaidem.Option{lambdaidem.WithKeyJSONField("order")},
		Operators: &Operators{Redrive: true, Release: true, Forget: true, Force: true},
		Scenarios: 200,
		Setup: func() (lambdaidem.MessageHandler, func() error) {
			var charges []string
			paid := map[string]bool{}
			return func(_ context.Context, m events.SQSMessage) error {
				if !paid[m.Body] {
					charges = append(charges, m.Body)
					paid[m.Body] = true
				}
				return nil
			}, AtMostOnce(&charges)
		},
		// The body that is not JSON is dead-lettered as malformed.
		Expect:  func(k *Kit) { k.ExpectDeadLetter("", lambdaidem.ReasonMalformedBody) },
		observe: func(k *Kit) { actions += k.operatorActions },
	}
	if f := x.Search(); f != nil {
		t.Fatal(f)
	}
	if actions == 0 {
		t.Fatal("no operator action applied in 200 scenarios")
	}
	t.Logf("%d operator actions applied in 200 scenarios", actions)
}

// A failure is shrunk, and the shrunk world replays it exactly.
func TestExplorerShrinks(t *testing.T) {
	x := Exploration{
		Messages: []string{`{"order":"o-1"}`, `{"order":"o-2"}`, `{"order":"o-3"}`, `{"order":"o-4"}`},
		Options:  []lambdaidem.Option{lambdaidem.WithKeyJSONField("order")},
		Setup: func() (lambdaidem.MessageHandler, func() error) {
			var charges []string
			return func(_ context.Context, m events.SQSMessage) error {
				charges = append(charges, m.Body) // charges on every run
				return nil
			}, AtMostOnce(&charges)
		},
	}
	f := x.Search()
	if f == nil {
		t.Fatal("a handler that charges on every run passed")
	}
	if f.Shrunk == "" {
		t.Fatalf("the failure was not shrunk:\n%v", f)
	}
	again := Exploration{Messages: x.Messages, Options: x.Options, Setup: x.Setup, Seed: f.Seed, Scenarios: 1, World: f.Shrunk}.Search()
	if again == nil || again.Trace != f.Trace || again.Problems[0] != f.Problems[0] {
		t.Fatalf("the shrunk world did not replay the failure:\n%v\nthen:\n%v", f, again)
	}
}

// An at-most-once handler that charges on every run keeps its promise
// under the explorer's redrives: they leave its outcome_unknown copies in
// the dead-letter queue (sending them back would charge again), while
// they send its other copies back.
func TestExplorerRedriveLeavesOutcomeUnknown(t *testing.T) {
	actions := 0
	x := Exploration{
		Messages:  []string{`{"order":"o-1"}`, `{"order":"o-2"}`, `{"order":"o-3"}`},
		Options:   []lambdaidem.Option{lambdaidem.WithKeyJSONField("order"), lambdaidem.WithAtMostOnce()},
		Operators: &Operators{Redrive: true},
		Scenarios: 400,
		Setup: func() (lambdaidem.MessageHandler, func() error) {
			var charges []string
			return func(_ context.Context, m events.SQSMessage) error {
				charges = append(charges, m.Body) // charges on every run
				return nil
			}, AtMostOnce(&charges)
		},
		observe: func(k *Kit) { actions += k.operatorActions },
	}
	if f := x.Search(); f != nil {
		t.Fatal(f)
	}
	if actions == 0 {
		t.Fatal("no redrive ran in 400 scenarios")
	}
}
