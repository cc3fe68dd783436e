package sqsqueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
)

// journal records, in order, the steps Redrive takes, while the calls go
// through to the emulator unchanged.
type journal struct {
	*sqs.Client
	mu    sync.Mutex
	steps []string
}

func (j *journal) add(s string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.steps = append(j.steps, s)
}

func (j *journal) Steps() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.steps)
}

func (j *journal) SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	out, err := j.Client.SendMessage(ctx, in, opts...)
	if err == nil {
		j.add("send " + *in.MessageBody)
	}
	return out, err
}

func (j *journal) DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	out, err := j.Client.DeleteMessage(ctx, in, opts...)
	if err == nil {
		j.add("delete")
	}
	return out, err
}

// journalResetter resets records of a real in-memory store, journalling
// each reset, and fails the keys it is told to.
type journalResetter struct {
	j     *journal
	store *memstore.Store
	fail  map[string]bool
}

func (r journalResetter) ResetDeadLetter(ctx context.Context, req idemstore.ResetRequest) (idemstore.Record, error) {
	if r.fail[req.Key] {
		r.j.add("reset-failed " + req.Namespace + "/" + req.Key)
		return idemstore.Record{}, fmt.Errorf("%w: store down", idemstore.ErrStoreUnavailable)
	}
	rec, err := r.store.ResetDeadLetter(ctx, req)
	if err == nil {
		r.j.add("reset " + req.Namespace + "/" + req.Key)
	}
	return rec, err
}

type redriveBundle struct {
	bundle
	src, dlq queue
	j        *journal
	store    *memstore.Store
}

func (rb redriveBundle) resetter(fail map[string]bool) journalResetter {
	return journalResetter{j: rb.j, store: rb.store, fail: fail}
}

// setupRedrive makes a source queue and a DLQ and dead-letters n messages
// (bodies body-0.., keys key-0..) from the source into the DLQ with the
// Sink. Message i carries i%11 attributes, so the packed form is covered.
func setupRedrive(t *testing.T, fifo bool, n int) redriveBundle {
	t.Helper()
	b := setup(t)
	rb := redriveBundle{bundle: b, src: b.newQueue(t, "src", fifo, nil), dlq: b.newQueue(t, "dlq", fifo, nil), j: &journal{Client: b.client}, store: memstore.New()}
	sink := NewSink(b.client, rb.dlq.url)
	for i := range n {
		msg := b.consume(t, rb.src, fmt.Sprintf("body-%d", i), originalAttrs(i), fmt.Sprintf("group-%d", i))
		dl := lambdaidem.DeadLetter{Message: msg, Namespace: "ns", Key: fmt.Sprintf("key-%d", i), Reason: idemstore.ReasonPoison, Attempts: 1}
		rb.deadLetter(t, dl, sink)
		// The decorator acknowledges the source message once dead-lettered.
		if _, err := b.client.DeleteMessage(b.ctx, &sqs.DeleteMessageInput{QueueUrl: &rb.src.url, ReceiptHandle: &msg.ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
	}
	return rb
}

// deadLetter records dl's key as the decorator would: claimed, the copy
// sent, the record marked DEAD_LETTERED with the copy's ID.
func (rb redriveBundle) deadLetter(t *testing.T, dl lambdaidem.DeadLetter, sink *Sink) string {
	t.Helper()
	now := time.Now()
	c, err := rb.store.Claim(rb.ctx, idemstore.ClaimRequest{
		Namespace: dl.Namespace, Key: dl.Key, PayloadHash: "h", MessageID: dl.Message.MessageId,
		Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour),
	})
	if err != nil || !c.Claimed {
		t.Fatalf("claim %s: %+v, %v", dl.Key, c, err)
	}
	id, err := sink.Send(rb.ctx, dl)
	if err != nil {
		t.Fatal(err)
	}
	if err := rb.store.DeadLetter(rb.ctx, idemstore.DeadLetterRequest{
		Lease: c.Lease, Now: now, Reason: dl.Reason, MessageID: dl.Message.MessageId,
		DeadLetterMessageID: id, ExpiresAt: now.Add(time.Hour),
	}); err != nil {
		t.Fatal(err)
	}
	return id
}

// originalAttrs are message i's attributes, with the idempotency key
// attribute the producer set.
func originalAttrs(i int) map[string]types.MessageAttributeValue {
	attrs := typedAttrs(max(i%11-1, 0))
	if attrs == nil {
		attrs = map[string]types.MessageAttributeValue{}
	}
	attrs["idempotency-key"] = types.MessageAttributeValue{DataType: ptr("String"), StringValue: ptr(fmt.Sprintf("key-%d", i))}
	return attrs
}

func bodies(ms []types.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, deref(m.Body))
	}
	slices.Sort(out)
	return out
}

func TestRedriveMovesMessages(t *testing.T) {
	t.Parallel()
	const n = 12
	rb := setupRedrive(t, false, n)
	var events []RedriveEvent
	sum, err := Redrive(rb.ctx, RedriveOptions{
		Client: rb.j, DeadLetterQueueURL: rb.dlq.url, Resetter: rb.resetter(nil), SourceQueues: []string{rb.src.arn},
		WaitTime: -1, Progress: func(e RedriveEvent) { events = append(events, e) },
	})
	if err != nil {
		t.Fatalf("Redrive: %v", err)
	}
	if sum != (RedriveSummary{Moved: n}) {
		t.Errorf("summary = %+v, want %d moved", sum, n)
	}
	if len(events) != n {
		t.Fatalf("%d progress events, want %d", len(events), n)
	}
	for _, e := range events {
		if e.Outcome != RedriveMoved || e.TargetQueueURL != rb.src.url || e.NewMessageID == "" || e.Err != nil {
			t.Errorf("event %+v, want moved to %s", e, rb.src.url)
		}
	}

	// Each message: reset, then send, then delete, in that order.
	steps := rb.j.Steps()
	if len(steps) != 3*n {
		t.Fatalf("steps = %q", steps)
	}
	for i := 0; i < len(steps); i += 3 {
		var k int
		if _, err := fmt.Sscanf(steps[i], "reset ns/key-%d", &k); err != nil {
			t.Fatalf("step %d = %q, want a reset", i, steps[i])
		}
		if want := []string{fmt.Sprintf("send body-%d", k), "delete"}; !slices.Equal(steps[i+1:i+3], want) {
			t.Errorf("after %q: %q, want %q", steps[i], steps[i+1:i+3], want)
		}
	}

	if left := rb.drainOnce(t, rb.dlq.url); len(left) != 0 {
		t.Errorf("DLQ still holds %d messages", len(left))
	}
	back := rb.drainOnce(t, rb.src.url)
	if len(back) != n {
		t.Fatalf("source holds %d messages, want %d", len(back), n)
	}
	for _, m := range back {
		var i int
		if _, err := fmt.Sscanf(deref(m.Body), "body-%d", &i); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(originalAttrs(i), m.MessageAttributes, attrOpt); diff != "" {
			t.Errorf("body-%d attributes not restored (-want +got):\n%s", i, diff)
		}
	}
}

func TestRedriveFIFO(t *testing.T) {
	t.Parallel()
	rb := setupRedrive(t, true, 2)
	sum, err := Redrive(rb.ctx, RedriveOptions{Client: rb.j, DeadLetterQueueURL: rb.dlq.url, Resetter: rb.resetter(nil), SourceQueues: []string{rb.src.arn}, WaitTime: -1})
	if err != nil || sum.Moved != 2 {
		t.Fatalf("Redrive = %+v, %v; want 2 moved", sum, err)
	}
	back := rb.drainOnce(t, rb.src.url)
	if len(back) != 2 {
		t.Fatalf("source holds %d messages, want 2", len(back))
	}
	for _, m := range back {
		var i int
		if _, err := fmt.Sscanf(deref(m.Body), "body-%d", &i); err != nil {
			t.Fatal(err)
		}
		if g := m.Attributes["MessageGroupId"]; g != fmt.Sprintf("group-%d", i) {
			t.Errorf("body-%d came back in group %q, want group-%d", i, g, i)
		}
	}
}

func TestRedriveMax(t *testing.T) {
	t.Parallel()
	rb := setupRedrive(t, false, 5)
	sum, err := Redrive(rb.ctx, RedriveOptions{Client: rb.j, DeadLetterQueueURL: rb.dlq.url, Resetter: rb.resetter(nil), SourceQueues: []string{rb.src.arn}, Max: 2, WaitTime: -1})
	if err != nil || sum != (RedriveSummary{Moved: 2}) {
		t.Fatalf("Redrive = %+v, %v; want 2 moved", sum, err)
	}
	if got := len(rb.drainOnce(t, rb.src.url)); got != 2 {
		t.Errorf("source holds %d messages, want 2", got)
	}
	if got := len(rb.drainOnce(t, rb.dlq.url)); got != 3 {
		t.Errorf("DLQ holds %d messages, want 3", got)
	}
}

func TestRedriveDryRun(t *testing.T) {
	t.Parallel()
	rb := setupRedrive(t, false, 3)
	var outcomes []RedriveOutcome
	sum, err := Redrive(rb.ctx, RedriveOptions{
		Client: rb.j, DeadLetterQueueURL: rb.dlq.url, DryRun: true, WaitTime: -1, SourceQueues: []string{rb.src.arn}, Records: rb.store,
		Progress: func(e RedriveEvent) {
			outcomes = append(outcomes, e.Outcome)
			if e.TargetQueueURL != rb.src.url || e.Metadata.Key == "" {
				t.Errorf("dry-run event %+v lacks target or key", e)
			}
		},
	})
	if err != nil || sum != (RedriveSummary{Moved: 3}) {
		t.Fatalf("Redrive = %+v, %v; want 3 listed", sum, err)
	}
	if want := []RedriveOutcome{RedriveWouldMove, RedriveWouldMove, RedriveWouldMove}; !slices.Equal(outcomes, want) {
		t.Errorf("outcomes = %v, want %v", outcomes, want)
	}
	if steps := rb.j.Steps(); len(steps) != 0 {
		t.Errorf("a dry run took steps: %q", steps)
	}
	if got := len(rb.drainOnce(t, rb.src.url)); got != 0 {
		t.Errorf("source holds %d messages after a dry run", got)
	}
	// Released at the end: visible again at once.
	if got := len(rb.drainOnce(t, rb.dlq.url)); got != 3 {
		t.Errorf("DLQ shows %d messages after a dry run, want 3", got)
	}
}

func TestRedriveResetFailureKeepsMessage(t *testing.T) {
	t.Parallel()
	rb := setupRedrive(t, false, 3)
	var failed []RedriveEvent
	sum, err := Redrive(rb.ctx, RedriveOptions{
		Client: rb.j, DeadLetterQueueURL: rb.dlq.url, Resetter: rb.resetter(map[string]bool{"key-1": true}), SourceQueues: []string{rb.src.arn}, WaitTime: -1,
		Progress: func(e RedriveEvent) {
			if e.Outcome == RedriveFailed {
				failed = append(failed, e)
			}
		},
	})
	if err != nil || sum != (RedriveSummary{Moved: 2, Failed: 1}) {
		t.Fatalf("Redrive = %+v, %v; want 2 moved, 1 failed", sum, err)
	}
	if len(failed) != 1 || failed[0].Step != StepReset || failed[0].Err == nil || failed[0].Metadata.Key != "key-1" {
		t.Fatalf("failed events = %+v, want key-1 at the reset step", failed)
	}
	if slices.Contains(rb.j.Steps(), "send body-1") {
		t.Errorf("body-1 was sent although its reset failed: %q", rb.j.Steps())
	}
	if got := bodies(rb.drainOnce(t, rb.dlq.url)); !slices.Equal(got, []string{"body-1"}) {
		t.Errorf("DLQ holds %q, want [body-1]", got)
	}
	if got := bodies(rb.drainOnce(t, rb.src.url)); !slices.Equal(got, []string{"body-0", "body-2"}) {
		t.Errorf("source holds %q, want [body-0 body-2]", got)
	}
}

func TestRedriveSendFailureKeepsMessage(t *testing.T) {
	t.Parallel()
	rb := setupRedrive(t, false, 1)
	// Send to a queue that does not exist: the message must stay.
	sum, err := Redrive(rb.ctx, RedriveOptions{
		Client: rb.j, DeadLetterQueueURL: rb.dlq.url, Resetter: rb.resetter(nil), SourceQueues: []string{rb.src.arn}, WaitTime: -1,
		TargetQueueURL: rb.src.url + "-gone",
		Progress: func(e RedriveEvent) {
			if e.Step != StepSend || !errors.Is(e.Err, ErrQueueNotFound) {
				t.Errorf("event %+v, want a send failure with ErrQueueNotFound", e)
			}
		},
	})
	if err != nil || sum != (RedriveSummary{Failed: 1}) {
		t.Fatalf("Redrive = %+v, %v; want 1 failed", sum, err)
	}
	if got := bodies(rb.drainOnce(t, rb.dlq.url)); !slices.Equal(got, []string{"body-0"}) {
		t.Errorf("DLQ holds %q, want [body-0]", got)
	}
}

func TestRedriveTargetAndForeignMessages(t *testing.T) {
	t.Parallel()
	rb := setupRedrive(t, false, 1)
	target := rb.newQueue(t, "target", false, nil)
	// A message SQS's own redrive policy would move here: no metadata.
	rb.send(t, rb.dlq, "foreign", nil, "")
	var skipped []RedriveEvent
	sum, err := Redrive(rb.ctx, RedriveOptions{
		Client: rb.j, DeadLetterQueueURL: rb.dlq.url, Resetter: rb.resetter(nil), SourceQueues: []string{rb.src.arn}, WaitTime: -1,
		TargetQueueURL: target.url,
		Progress: func(e RedriveEvent) {
			if e.Outcome == RedriveSkipped {
				skipped = append(skipped, e)
			}
		},
	})
	// The foreign message once, or again for each send the SDK retried.
	foreign := 1 + rb.resends.Count()
	if err != nil || sum.Moved != 1 || sum.Skipped < 1 || sum.Skipped > foreign || sum.Done+sum.Failed != 0 {
		t.Fatalf("Redrive = %+v, %v; want 1 moved, 1 skipped (up to %d with the SDK's resent copies)", sum, err, foreign)
	}
	if len(skipped) != sum.Skipped {
		t.Errorf("%d skipped events, want %d", len(skipped), sum.Skipped)
	}
	for _, e := range skipped {
		if !errors.Is(e.Err, ErrNotDeadLetter) {
			t.Errorf("skipped %+v, want ErrNotDeadLetter", e)
		}
	}
	if got := bodies(rb.drainOnce(t, target.url)); !slices.Equal(got, []string{"body-0"}) {
		t.Errorf("target holds %q", got)
	}
	if got := bodies(rb.drainOnce(t, rb.dlq.url)); !slices.Equal(got, []string{"foreign"}) {
		t.Errorf("DLQ holds %q, want [foreign]", got)
	}
}

func TestRedriveOptionsValidated(t *testing.T) {
	t.Parallel()
	c := sqs.New(sqs.Options{Region: "us-east-1"})
	for name, o := range map[string]RedriveOptions{
		"no client":      {DeadLetterQueueURL: "u", Resetter: memstore.New(), TargetQueueURL: "t"},
		"no DLQ":         {Client: c, Resetter: memstore.New(), TargetQueueURL: "t"},
		"no resetter":    {Client: c, DeadLetterQueueURL: "u", TargetQueueURL: "t"},
		"no destination": {Client: c, DeadLetterQueueURL: "u", Resetter: memstore.New()},
		"bad source":     {Client: c, DeadLetterQueueURL: "u", Resetter: memstore.New(), SourceQueues: []string{"arn:aws:sqs:evil.example/x:1:q"}},
		"negative max":   {Client: c, DeadLetterQueueURL: "u", DryRun: true, TargetQueueURL: "t", Max: -1},
	} {
		if _, err := Redrive(context.Background(), o); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: err = %v, want ErrInvalidOptions", name, err)
		}
	}
}
