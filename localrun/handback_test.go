package localrun_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/localrun"
)

// The queues here hide a received message for an hour: a test that sees
// the message again within its deadline saw it handed back, not timed out.
const hourVisibility = "3600"

// visible returns how many messages of the queue are visible now.
func (b *bundle) visible() int {
	b.t.Helper()
	out, err := b.client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(b.url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages},
	})
	if err != nil {
		b.t.Fatalf("queue attributes: %v", err)
	}
	var n int
	fmt.Sscan(out.Attributes["ApproximateNumberOfMessages"], &n)
	return n
}

// A Stop whose context ends kills the invocation in flight and hands its
// records back: they are visible when Stop returns, and a restarted runner
// runs them at once.
func TestStopHandsBackKilledInvocation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := func(c *localrun.Config) {
		c.BatchSize = 1
		c.FunctionTimeout = 10 * time.Minute
		c.Env = []string{"LOCALRUN_BARRIER_DIR=" + dir}
	}
	b := setup(t, queueOpts{visibility: hourVisibility}, cfg)
	id := b.send("barrier")[0]
	// The first run waits in the barrier for a second run that never
	// comes while this runner lives.
	testenv.WaitFor(t, "the function to enter the barrier", func() bool { e, _ := os.ReadDir(dir); return len(e) == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.runner.Stop(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop with an ended context = %v, want context.Canceled", err)
	}
	inv := b.next(nil)
	if inv.Outcome != localrun.OutcomeStopped || !slices.Equal(inv.Returned, []string{id}) || inv.ReturnErr != nil {
		t.Fatalf("killed invocation: outcome %s, returned %v (%v), want stopped returning %s", inv.Outcome, inv.Returned, inv.ReturnErr, id)
	}
	if n := b.visible(); n != 1 {
		t.Fatalf("%d messages visible after Stop returned, want the one handed back", n)
	}

	// The restart: its run is the barrier's second entry, so it returns.
	invs := make(chan localrun.Invocation, 10)
	c := localrun.Config{Bootstrap: bootstrap, QueueURL: b.url, SQS: b.client, MaxConcurrency: 1,
		ReportBatchItemFailures: true, Output: b.out, OnInvoke: func(inv localrun.Invocation) { invs <- inv }}
	cfg(&c)
	r, err := localrun.New(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	select {
	case inv := <-invs:
		if inv.Outcome != localrun.OutcomeSuccess || !slices.Equal(inv.Deleted, []string{id}) || !slices.Equal(inv.ReceiveCounts, []int{2}) {
			t.Fatalf("restarted runner: outcome %s, deleted %v, receive counts %v; want success deleting %s on its second receive", inv.Outcome, inv.Deleted, inv.ReceiveCounts, id)
		}
	case <-time.After(testenv.Patience):
		t.Fatalf("the restarted runner did not receive the handed-back message within %s (its visibility timeout is an hour); stats %+v", testenv.Patience, r.Stats())
	}
}

// A graceful Stop hands back the records a batching window holds instead
// of invoking them, and lets the receive in flight come back rather than
// leave it to take the next message on the server's side.
func TestStopHandsBackHeldRecordsAndLeavesNoReceive(t *testing.T) {
	t.Parallel()
	b := setup(t, queueOpts{visibility: hourVisibility}, func(c *localrun.Config) {
		c.BatchSize = 10
		c.BatchingWindow = 5 * time.Minute
	})
	b.send("ok")
	// Received and held: in flight on the queue, not yet invoked.
	testenv.WaitFor(t, "the runner to hold the message", func() bool { return b.onQueue() == 1 && b.visible() == 0 })
	if err := b.runner.Stop(context.Background()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if s := b.runner.Stats(); s.Batches != 0 || s.Returned != 1 {
		t.Fatalf("after Stop: %d invocations, %d handed back; want 0 and 1", s.Batches, s.Returned)
	}
	if n := b.visible(); n != 1 {
		t.Fatalf("%d messages visible after Stop returned, want the one handed back", n)
	}

	// Nothing of the stopped runner receives any more: a message sent now
	// is received by the next receive, not hidden by an abandoned one.
	second := b.send("ok")[0]
	deadline := time.Now().Add(testenv.Patience)
	seen := map[string]bool{}
	for !seen[second] {
		if time.Now().After(deadline) {
			t.Fatalf("the message sent after Stop was not received within %s (seen %v): a receive of the stopped runner took it", testenv.Patience, seen)
		}
		out, err := b.client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(b.url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			seen[aws.ToString(m.MessageId)] = true
		}
	}
}
