package sim

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// The checker must see each broken rule of the Observer contract: a check
// that never fires would let the simulation pass anything.
func TestObserverCheckCatchesBrokenContracts(t *testing.T) {
	msgs := []events.SQSMessage{{MessageId: "m0"}, {MessageId: "m1"}}
	start := func(o *ObserverCheck, ctx context.Context, i int) context.Context {
		return o.RecordStart(ctx, lambdaidem.RecordInfo{Entry: lambdaidem.EntrySQS, Key: "k" + fmt.Sprint(i), Message: &msgs[i], Index: i})
	}
	rep := func(i int, out lambdaidem.Outcome) *lambdaidem.RecordReport {
		return &lambdaidem.RecordReport{MessageID: msgs[i].MessageId, Key: "k" + fmt.Sprint(i), Outcome: out, Acked: true}
	}
	for _, tc := range []struct {
		name string
		want string
		run  func(o *ObserverCheck)
	}{
		{"kept", "", func(o *ObserverCheck) {
			inv := o.InvocationStart(context.Background(), lambdaidem.InvocationInfo{Records: msgs})
			for i := range msgs {
				r := start(o, inv, i)
				o.Handler(r, msgs[i].MessageId, "")
				o.RecordEnd(r, rep(i, lambdaidem.OutcomeProcessed))
			}
			o.InvocationEnd(inv, &lambdaidem.InvocationReport{Records: []lambdaidem.RecordReport{*rep(0, lambdaidem.OutcomeProcessed), *rep(1, lambdaidem.OutcomeProcessed)}})
		}},
		{"record never ended", "started and never ended", func(o *ObserverCheck) {
			inv := o.InvocationStart(context.Background(), lambdaidem.InvocationInfo{Records: msgs[:1]})
			start(o, inv, 0)
			o.InvocationEnd(inv, &lambdaidem.InvocationReport{Records: []lambdaidem.RecordReport{*rep(0, lambdaidem.OutcomeProcessed)}})
		}},
		{"other outcome", "the invocation reports", func(o *ObserverCheck) {
			inv := o.InvocationStart(context.Background(), lambdaidem.InvocationInfo{Records: msgs[:1]})
			o.RecordEnd(start(o, inv, 0), rep(0, lambdaidem.OutcomeProcessed))
			o.InvocationEnd(inv, &lambdaidem.InvocationReport{Records: []lambdaidem.RecordReport{*rep(0, lambdaidem.OutcomeFailed)}})
		}},
		{"after the end", "after its invocation", func(o *ObserverCheck) {
			inv := o.InvocationStart(context.Background(), lambdaidem.InvocationInfo{Records: msgs[:1]})
			r := start(o, inv, 0)
			o.InvocationEnd(inv, &lambdaidem.InvocationReport{Records: []lambdaidem.RecordReport{*rep(0, lambdaidem.OutcomeProcessed)}})
			o.RecordEnd(r, rep(0, lambdaidem.OutcomeProcessed))
		}},
		{"handler outside", "outside its record's context", func(o *ObserverCheck) {
			inv := o.InvocationStart(context.Background(), lambdaidem.InvocationInfo{Records: msgs[:1]})
			start(o, inv, 0)
			o.Handler(inv, "m0", "")
		}},
		{"end without start", "without the context", func(o *ObserverCheck) {
			o.RecordEnd(context.Background(), rep(0, lambdaidem.OutcomeProcessed))
		}},
		{"wrap call twice", "want one each", func(o *ObserverCheck) {
			ctx, call := o.Call(context.Background())
			for range 2 {
				r := o.RecordStart(ctx, lambdaidem.RecordInfo{Entry: lambdaidem.EntryWrap, Key: "k"})
				o.RecordEnd(r, &lambdaidem.RecordReport{Key: "k", Outcome: lambdaidem.OutcomeProcessed, Acked: true})
			}
			o.Done(call, "call", nil, true)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			o := &ObserverCheck{Violate: func(f string, a ...any) { got = append(got, fmt.Sprintf(f, a...)) }}
			tc.run(o)
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("violations %q for a kept contract", got)
			case tc.want != "" && !strings.Contains(strings.Join(got, "\n"), tc.want):
				t.Errorf("violations %q, want one saying %q", got, tc.want)
			}
		})
	}
}
