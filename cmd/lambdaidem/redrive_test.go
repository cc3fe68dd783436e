package main

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
	"github.com/lambdaidem/go-lambdaidem/sqsqueue"
)

type redriveBundle struct {
	*bundle
	sqs      *sqs.Client
	src, dlq string // queue URLs
	srcARN   string
}

func setupRedrive(t *testing.T) *redriveBundle {
	t.Helper()
	b := setup(t)
	rb := &redriveBundle{bundle: b, sqs: testenv.SQS(t)}
	b.env["AWS_ENDPOINT_URL_SQS"] = testenv.Endpoint(t, testenv.SQSEndpointVar)
	rb.src, rb.srcARN = rb.newQueue(t, "cli-src")
	rb.dlq, _ = rb.newQueue(t, "cli-dlq")
	return rb
}

func (rb *redriveBundle) newQueue(t *testing.T, prefix string) (url, arn string) {
	t.Helper()
	ctx := t.Context()
	out, err := rb.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(testenv.Name(prefix))})
	if err != nil {
		t.Fatalf("create queue: %v", err)
	}
	t.Cleanup(func() { _, _ = rb.sqs.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
	qa, err := rb.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: out.QueueUrl, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		t.Fatalf("queue ARN: %v", err)
	}
	return *out.QueueUrl, qa.Attributes["QueueArn"]
}

// receive returns the visible messages of a queue, hiding them for a while.
func (rb *redriveBundle) receive(t *testing.T, url string) []types.Message {
	t.Helper()
	out, err := rb.sqs.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{
		QueueUrl: &url, MaxNumberOfMessages: 10, VisibilityTimeout: 300,
		MessageAttributeNames: []string{"All"},
	})
	if err != nil {
		t.Fatalf("receive from %s: %v", url, err)
	}
	return out.Messages
}

// deadLetter does what the decorator does with a poison message: the
// message comes from the source queue, its record is claimed, the copy is
// sent to the DLQ with the sink, the record is marked DEAD_LETTERED, and
// the source message is deleted.
func (rb *redriveBundle) deadLetter(t *testing.T, key, body string) {
	t.Helper()
	rb.deadLetterMarked(t, key, body, true)
}

// deadLetterMarked is deadLetter; without final, the holder writes only
// the pending mark before the send, and stops after it (the store took no
// final mark), as the decorator leaves a record whose final mark could not
// be written.
func (rb *redriveBundle) deadLetterMarked(t *testing.T, key, body string, final bool) {
	t.Helper()
	rb.deadLetterAs(t, key, body, idemstore.ReasonPoison, final)
}

// deadLetterAs is deadLetterMarked with the reason given: the copy and
// the record say reason.
func (rb *redriveBundle) deadLetterAs(t *testing.T, key, body string, reason idemstore.Reason, final bool) string {
	t.Helper()
	ctx := t.Context()
	attrs := map[string]types.MessageAttributeValue{
		"idempotency-key": {DataType: aws.String("String"), StringValue: aws.String(key)},
		"tenant":          {DataType: aws.String("String"), StringValue: aws.String("acme")},
	}
	if _, err := rb.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &rb.src, MessageBody: &body, MessageAttributes: attrs}); err != nil {
		t.Fatal(err)
	}
	ms := rb.receive(t, rb.src)
	if len(ms) != 1 {
		t.Fatalf("received %d messages from the source queue, want 1", len(ms))
	}
	m := ms[0]
	ev := events.SQSMessage{
		MessageId: *m.MessageId, ReceiptHandle: *m.ReceiptHandle, Body: *m.Body,
		EventSourceARN: rb.srcARN, EventSource: "aws:sqs",
		MessageAttributes: map[string]events.SQSMessageAttribute{},
	}
	for name, a := range m.MessageAttributes {
		ev.MessageAttributes[name] = events.SQSMessageAttribute{DataType: *a.DataType, StringValue: a.StringValue}
	}
	l := rb.claim(t, rb.ns, key, 0, 30)
	err := rb.store.DeadLetter(ctx, idemstore.DeadLetterRequest{
		Lease: l, Now: at(1), Reason: reason, Error: "invalid order",
		MessageID: ev.MessageId, ExpiresAt: at(4 * 86400), Pending: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	copyID, err := sqsqueue.NewSink(rb.sqs, rb.dlq).Send(ctx, lambdaidem.DeadLetter{
		Message: ev, Namespace: rb.ns, Key: key, Reason: reason,
		Error: "invalid order", Attempts: 1, FirstAttemptAt: at(0), LastAttemptAt: at(1),
		PayloadHash: "sha256:" + key, // what claim writes
		LeaseProof:  lambdaidem.LeaseProof(l.Token),
	})
	if err != nil {
		t.Fatalf("sink: %v", err)
	}
	if final {
		err = rb.store.DeadLetter(ctx, idemstore.DeadLetterRequest{
			Lease: l, Now: at(1), Reason: reason, Error: "invalid order",
			MessageID: ev.MessageId, DeadLetterMessageID: copyID, ExpiresAt: at(4 * 86400),
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rb.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &rb.src, ReceiptHandle: m.ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	return copyID
}

func TestRedrive(t *testing.T) {
	t.Parallel()
	rb := setupRedrive(t)
	rb.deadLetter(t, "order-7", `{"order":7}`)

	// A dry run lists the message and changes nothing.
	dry := decode[redriveJSON](t, rb.cli(t, 100, "redrive", "-dlq", rb.dlq, "-source", rb.srcARN, "-wait", "0", "-dry-run", "-json").want(t, exitOK))
	if !dry.DryRun || dry.Moved != 1 || len(dry.Messages) != 1 || dry.Messages[0].Outcome != "would_move" ||
		dry.Messages[0].Key != "order-7" || dry.Messages[0].Target != rb.src || dry.Messages[0].Reason != "poison" {
		t.Fatalf("dry run: %+v", dry)
	}
	if g := decode[recordJSON](t, rb.cli(t, 100, "get", "order-7", "-json").want(t, exitOK)); g.Status != "DEAD_LETTERED" {
		t.Fatalf("dry run changed the record: %+v", g)
	}

	// The real run: record reset, message back in the source queue, gone
	// from the DLQ.
	r := rb.cli(t, 100, "redrive", "-dlq", rb.dlq, "-source", rb.srcARN, "-wait", "0", "-json").want(t, exitOK)
	moved := decode[redriveJSON](t, r)
	if moved.DryRun || moved.Moved != 1 || moved.Failed != 0 || moved.Messages[0].Outcome != "moved" || moved.Messages[0].NewMessageID == "" {
		t.Fatalf("redrive: %+v", moved)
	}
	if want := "redrive: #1 moved " + moved.Messages[0].DLQMessageID + " key orders/order-7 (poison) -> " + rb.src; !strings.Contains(r.stderr, want) {
		t.Errorf("progress line %q missing from %q", want, r.stderr)
	}
	g := decode[recordJSON](t, rb.cli(t, 100, "get", "order-7", "-json").want(t, exitOK))
	if g.Status != "FAILED" || g.Attempts != 0 || g.Redrives != 1 || g.RedrivenFrom != moved.Messages[0].DLQMessageID || g.DeadLetterReason != "" {
		t.Errorf("record after redrive: %+v; want FAILED, 0 attempts, redriven once from the copy", g)
	}
	if out := rb.cli(t, 100, "get", "order-7").want(t, exitOK).stdout; !strings.Contains(out, "redrives         1 ") {
		t.Errorf("get does not show the redrive:\n%s", out)
	}
	back := rb.receive(t, rb.src)
	if len(back) != 1 {
		t.Fatalf("source queue holds %d messages, want 1", len(back))
	}
	m := back[0]
	if *m.Body != `{"order":7}` || *m.MessageId != moved.Messages[0].NewMessageID {
		t.Errorf("redriven message: body %s id %s", *m.Body, *m.MessageId)
	}
	if len(m.MessageAttributes) != 2 || *m.MessageAttributes["idempotency-key"].StringValue != "order-7" || *m.MessageAttributes["tenant"].StringValue != "acme" {
		t.Errorf("attributes not restored: %v", m.MessageAttributes)
	}
	if left := rb.receive(t, rb.dlq); len(left) != 0 {
		t.Errorf("DLQ still holds %d messages", len(left))
	}
	// The key claims afresh, so the decorator will run the message.
	if l := rb.claim(t, rb.ns, "order-7", 200, 30); l.Attempt != 1 {
		t.Errorf("claim after redrive: attempt %d, want 1", l.Attempt)
	}
}

// TestRedriveFinishesAPendingMark: a copy whose record holds only the
// pending mark of the lease it was sent under (its holder could not write
// the final mark, and its source message is gone) is never skipped for
// good: the dry run says the real run marks it, the real run writes the
// final mark for it and leaves it, and the next run moves it.
func TestRedriveFinishesAPendingMark(t *testing.T) {
	t.Parallel()
	rb := setupRedrive(t)
	rb.deadLetterMarked(t, "order-9", `{"order":9}`, false)
	args := []string{"redrive", "-dlq", rb.dlq, "-source", rb.srcARN, "-wait", "0", "-json"}

	dry := decode[redriveJSON](t, rb.cli(t, 100, append(args, "-dry-run")...).want(t, exitOK))
	if len(dry.Messages) != 1 || dry.Messages[0].Outcome != "skipped" || !strings.Contains(dry.Messages[0].Error, "a real run marks") {
		t.Fatalf("dry run: %+v", dry)
	}
	if g := decode[recordJSON](t, rb.cli(t, 100, "get", "order-9", "-json").want(t, exitOK)); g.Status != "IN_PROGRESS" {
		t.Fatalf("the dry run changed the record: %+v", g)
	}

	first := decode[redriveJSON](t, rb.cli(t, 100, args...).want(t, exitOK))
	if len(first.Messages) != 1 || first.Messages[0].Outcome != "skipped" || first.Messages[0].Step != sqsqueue.StepMark {
		t.Fatalf("first run: %+v", first)
	}
	g := decode[recordJSON](t, rb.cli(t, 100, "get", "order-9", "-json").want(t, exitOK))
	if g.Status != "DEAD_LETTERED" || g.DeadLetterReason != "poison" {
		t.Fatalf("record after the first run: %+v; want DEAD_LETTERED (poison) by the copy", g)
	}

	second := decode[redriveJSON](t, rb.cli(t, 100, args...).want(t, exitOK))
	if second.Moved != 1 || second.Messages[0].Outcome != "moved" || second.Messages[0].DLQMessageID != first.Messages[0].DLQMessageID {
		t.Fatalf("second run: %+v", second)
	}
	if back := rb.receive(t, rb.src); len(back) != 1 || *back[0].Body != `{"order":9}` {
		t.Fatalf("source queue after the second run: %d messages", len(back))
	}
}

// TestRedriveKeepsHeldKey: a message whose key is held by a valid lease is
// not redriven (its copy would run beside the holder); it stays in the DLQ
// with the reason, and the holder's record is untouched.
func TestRedriveKeepsHeldKey(t *testing.T) {
	t.Parallel()
	rb := setupRedrive(t)
	rb.deadLetter(t, "order-8", `{"order":8}`)
	// Forget the dead-lettered record and let someone else claim the key.
	rb.cli(t, 100, "forget", "order-8", "-yes", "-abandon-copy").want(t, exitOK)
	rb.claim(t, rb.ns, "order-8", 100, 600)

	r := rb.cli(t, 200, "redrive", "-dlq", rb.dlq, "-source", rb.srcARN, "-wait", "0", "-json").want(t, exitOK)
	out := decode[redriveJSON](t, r)
	if out.Skipped != 1 || out.Moved != 0 || out.Messages[0].Step != sqsqueue.StepReset {
		t.Fatalf("redrive of a held key: %+v", out)
	}
	if !strings.Contains(r.stderr, "skipped") || !strings.Contains(r.stderr, "IN_PROGRESS") {
		t.Errorf("stderr: %s", r.stderr)
	}
	if len(rb.receive(t, rb.dlq)) != 1 {
		t.Error("the message left the DLQ")
	}
	if len(rb.receive(t, rb.src)) != 0 {
		t.Error("the message reached the source queue")
	}
	if g := decode[recordJSON](t, rb.cli(t, 200, "get", "order-8", "-json")); g.Status != "IN_PROGRESS" || g.LeaseState != leaseValid {
		t.Errorf("the holder's record changed: %+v", g)
	}
}

// TestRedriveNeedsSources: without -source or -to the command refuses to
// run; a copy from a queue not named with -source stays in the DLQ.
func TestRedriveNeedsSources(t *testing.T) {
	t.Parallel()
	rb := setupRedrive(t)
	rb.deadLetter(t, "order-9", `{"order":9}`)
	rb.cli(t, 100, "redrive", "-dlq", rb.dlq, "-wait", "0").want(t, exitUsage)
	rb.cli(t, 100, "redrive", "-dlq", rb.dlq, "-wait", "0", "-source", "arn:aws:sqs:evil.example/x:1:q").want(t, exitUsage)

	other := "arn:aws:sqs:us-east-1:123456789012:some-other-queue"
	r := rb.cli(t, 100, "redrive", "-dlq", rb.dlq, "-source", other, "-wait", "0", "-json").want(t, exitOK)
	out := decode[redriveJSON](t, r)
	if out.Skipped != 1 || out.Messages[0].Step != sqsqueue.StepCheck || !strings.Contains(out.Messages[0].Error, "not among the queues named") {
		t.Fatalf("redrive from an unnamed source: %+v", out)
	}
	if g := decode[recordJSON](t, rb.cli(t, 100, "get", "order-9", "-json")); g.Status != "DEAD_LETTERED" {
		t.Errorf("record changed: %+v", g)
	}
	if len(rb.receive(t, rb.dlq)) != 1 {
		t.Error("the message left the DLQ")
	}
}

// TestRedriveDryRunSaysWhatTheRunDoes: for every state a copy's record can
// be in, the dry run's line and the real run's say the same thing, and the
// real run does it. A key that completed with another payload after the
// copy's record was forgotten keeps its copy; one that completed with the
// copy's payload has its copy deleted as done.
func TestRedriveDryRunSaysWhatTheRunDoes(t *testing.T) {
	t.Parallel()
	rb := setupRedrive(t)
	for _, k := range []string{"order-10", "order-11", "order-12", "order-13"} {
		rb.deadLetter(t, k, `{"order":"`+k+`"}`)
	}
	for _, k := range []string{"order-10", "order-11", "order-13"} {
		rb.cli(t, 100, "forget", k, "-yes", "-abandon-copy").want(t, exitOK)
	}
	// order-10: another payload under the same key completes a new record.
	res, err := rb.store.Claim(t.Context(), idemstore.ClaimRequest{
		Namespace: rb.ns, Key: "order-10", PayloadHash: "sha256:another-payload", MessageID: "msg-other",
		Now: at(110), LeaseUntil: at(140), ExpiresAt: at(86400),
	})
	if err != nil || !res.Claimed {
		t.Fatal(res, err)
	}
	rb.complete(t, res.Lease, 111, "")
	// order-11: the producer sent the same payload again, and it completed.
	rb.complete(t, rb.claim(t, rb.ns, "order-11", 110, 30), 111, "")
	// order-12 stays DEAD_LETTERED; order-13 has no record.

	want := map[string][2]string{ // key: dry-run outcome, real outcome
		"order-10": {"skipped", "skipped"},
		"order-11": {"would_delete_done", "already_done"},
		"order-12": {"would_move", "moved"},
		"order-13": {"skipped", "skipped"},
	}
	run := func(dry bool) (map[string]redriveMessageJSON, string) {
		t.Helper()
		args := []string{"redrive", "-dlq", rb.dlq, "-source", rb.srcARN, "-wait", "0", "-json"}
		if dry {
			args = append(args, "-dry-run")
		}
		r := rb.cli(t, 200, args...).want(t, exitOK)
		byKey := map[string]redriveMessageJSON{}
		for _, m := range decode[redriveJSON](t, r).Messages {
			byKey[m.Key] = m
		}
		return byKey, r.stderr
	}
	dry, dryLines := run(true)
	if g := decode[recordJSON](t, rb.cli(t, 200, "get", "order-12", "-json").want(t, exitOK)); g.Status != "DEAD_LETTERED" {
		t.Fatalf("the dry run changed a record: %+v", g)
	}
	real, realLines := run(false)
	for k, w := range want {
		if dry[k].Outcome != w[0] || real[k].Outcome != w[1] {
			t.Errorf("%s: dry run %q, real run %q; want %q and %q", k, dry[k].Outcome, real[k].Outcome, w[0], w[1])
		}
		if dry[k].Error != real[k].Error {
			t.Errorf("%s: the dry run gives the reason %q, the real run %q", k, dry[k].Error, real[k].Error)
		}
	}
	if e := real["order-10"].Error; !strings.Contains(e, "completed with payload hash sha256:another-payload, this copy's is sha256:order-10") {
		t.Errorf("order-10's reason: %q", e)
	}
	if e := real["order-13"].Error; !strings.Contains(e, "has no record") {
		t.Errorf("order-13's reason: %q", e)
	}
	for _, line := range []string{"would skip", "would delete", "would move"} {
		if !strings.Contains(dryLines, line) {
			t.Errorf("the dry run's lines lack %q:\n%s", line, dryLines)
		}
	}
	for _, line := range []string{"skipped", "deleted", "moved"} {
		if !strings.Contains(realLines, line) {
			t.Errorf("the real run's lines lack %q:\n%s", line, realLines)
		}
	}
	// What stays in the DLQ: the copies of order-10 and order-13. Long
	// polls until both came, then one more, which must find nothing else.
	left := map[string]bool{}
	for polls := 0; len(left) < 3; polls++ {
		ms := rb.longPoll(t, rb.dlq)
		if len(ms) == 0 && len(left) >= 2 {
			break
		}
		if polls == 30 {
			t.Fatalf("the DLQ gave copies of %v within 30 long polls; want order-10 and order-13", left)
		}
		for _, m := range ms {
			dm, err := sqsqueue.Parse(m)
			if err != nil {
				t.Fatal(err)
			}
			left[dm.Metadata.Key] = true
		}
	}
	if len(left) != 2 || !left["order-10"] || !left["order-13"] {
		t.Errorf("the DLQ holds copies of %v, want order-10 and order-13", left)
	}
}

// longPoll receives from a queue with a one-second long poll, hiding what
// it gets for a while.
func (rb *redriveBundle) longPoll(t *testing.T, url string) []types.Message {
	t.Helper()
	out, err := rb.sqs.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{
		QueueUrl: &url, MaxNumberOfMessages: 10, VisibilityTimeout: 300, WaitTimeSeconds: 1,
		MessageAttributeNames: []string{"All"},
	})
	if err != nil {
		t.Fatalf("receive from %s: %v", url, err)
	}
	return out.Messages
}
