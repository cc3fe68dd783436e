package lambdaidemtest_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest"
)

// spanKey marks the contexts a user's observer returns, as a tracer's span
// would.
type spanKey struct{}

// userObserver is the kind of observer a user deploys (a tracing adapter):
// it marks each record's context and notes each record's outcome.
type userObserver struct {
	ended map[string][]lambdaidem.Outcome
}

func (o *userObserver) InvocationStart(ctx context.Context, _ lambdaidem.InvocationInfo) context.Context {
	return ctx
}

func (o *userObserver) InvocationEnd(context.Context, *lambdaidem.InvocationReport) {}

func (o *userObserver) RecordStart(ctx context.Context, info lambdaidem.RecordInfo) context.Context {
	return context.WithValue(ctx, spanKey{}, info.Key)
}

func (o *userObserver) RecordEnd(_ context.Context, rep *lambdaidem.RecordReport) {
	o.ended[rep.Key] = append(o.ended[rep.Key], rep.Outcome)
}

// The kit runs the observers a user deploys with, and its own check of
// the Observer contract beside them.
func TestKitRunsTheUsersObserver(t *testing.T) {
	o := &userObserver{ended: map[string][]lambdaidem.Outcome{}}
	var outside []string
	k := lambdaidemtest.New(func(ctx context.Context, msg events.SQSMessage) error {
		lease, _ := lambdaidem.LeaseFromContext(ctx)
		if ctx.Value(spanKey{}) != lease.Key {
			outside = append(outside, msg.MessageId)
		}
		if msg.Body == `{"order":"p-1"}` {
			return lambdaidem.Poison(errors.New("never"))
		}
		return nil
	}, byOrder, lambdaidem.WithObserver(o))
	k.DeliverTwice(`{"order":"o-1"}`)
	k.CrashAfterEffect(`{"order":"o-2"}`)
	k.Poison(`{"order":"p-1"}`)
	k.ExpectDeadLetter("p-1", lambdaidem.ReasonPoison)
	if err := k.Check(); err != nil {
		t.Fatal(err)
	}
	if len(outside) > 0 {
		t.Errorf("handlers of %v ran outside the context the user's observer returned", outside)
	}
	for _, key := range []string{"o-1", "o-2", "p-1"} {
		if got, want := o.ended[key], k.Outcomes(key); !slices.Equal(got, want) {
			t.Errorf("key %s: the user's observer saw %v, the kit reports %v", key, got, want)
		}
	}
}
