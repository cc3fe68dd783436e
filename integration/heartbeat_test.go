package integration_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest/testclock"
)

// TestHeartbeatOnDynamoDB: with a heartbeat, the lease's lease_until on
// DynamoDB moves while the handler runs; once another instance has taken
// the lease over, the next extension is refused and the handler's context
// ends with cause ErrLeaseLost.
//
// The heartbeat ticks on the owner's fake clock: each Advance through a
// tick writes that extension before it returns. The thief's clock runs ten
// minutes ahead: to it the owner's lease ran out long ago, which is what it
// sees when the owner's process stalled for ten minutes without a
// heartbeat.
func TestHeartbeatOnDynamoDB(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	entered := make(chan struct{})
	var cause error
	var runs counter
	owner := lambdaidem.Wrap(e.store, func(ctx context.Context, p payment) (string, error) {
		runs.inc()
		close(entered)
		<-ctx.Done()
		cause = context.Cause(ctx)
		return "", cause
	}, e.wrapOpts(lambdaidem.WithKeyJSONField("id"), lambdaidem.WithHeartbeat(10*time.Second))...)
	done := make(chan error)
	go func() {
		_, err := owner(context.Background(), payment{ID: "job-1"})
		done <- err
	}()
	<-entered
	first := e.record(t, "job-1").LeaseUntil

	e.clock.Advance(10 * time.Second)
	if got, want := e.record(t, "job-1").LeaseUntil, e.clock.Now().Add(time.Minute); !got.After(first) || !got.Equal(want) {
		t.Errorf("lease until %s, want now plus the lease length, %s", got, want)
	}

	thiefClock := testclock.New(e.clock.Now().Add(10 * time.Minute))
	thief := lambdaidem.Wrap(e.store, func(_ context.Context, p payment) (string, error) {
		runs.inc()
		return "done by the thief", nil
	}, e.wrapOpts(lambdaidem.WithKeyJSONField("id"), lambdaidem.WithClock(thiefClock))...)
	if got, err := thief(context.Background(), payment{ID: "job-1"}); err != nil || got != "done by the thief" {
		t.Fatalf("takeover: %q, %v", got, err)
	}

	e.clock.Advance(10 * time.Second) // the next tick's extension is refused
	err := <-done
	if !errors.Is(cause, lambdaidem.ErrLeaseLost) {
		t.Fatalf("the owner's context ended with cause %v, want ErrLeaseLost", cause)
	}
	if !errors.Is(err, lambdaidem.ErrLeaseLost) {
		t.Errorf("the owner's Wrap returned %v, want ErrLeaseLost", err)
	}
	r := e.record(t, "job-1")
	if r.Status != lambdaidem.StatusCompleted || r.Fence.Claim != 2 || string(r.Result) != `"done by the thief"` {
		t.Errorf("record %s claim %d result %s: the owner's failure touched the new owner's record", r.Status, r.Fence.Claim, r.Result)
	}
	if runs.get() != 2 {
		t.Errorf("%d runs, want 2", runs.get())
	}
}
