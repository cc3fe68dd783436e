package localrun_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/localrun"
)

// Rule: with ReportBatchItemFailures, every record not listed in
// batchItemFailures is deleted, and only those.
func TestPartialBatchResponseDeletesOnlyWhatItAllows(t *testing.T) {
	t.Parallel()
	b := setup(t, queueOpts{}, batchOf(3))
	ids := b.send("ok", "fail", "ok")

	inv := b.next(nil)
	if inv.Outcome != localrun.OutcomeSuccess {
		t.Fatalf("outcome = %s (%v), want success", inv.Outcome, inv.Err)
	}
	sameSet(t, "batch", inv.MessageIDs, ids)
	sameSet(t, "deleted", inv.Deleted, []string{ids[0], ids[2]})
	sameSet(t, "failed", inv.Failed, []string{ids[1]})
	if n := b.onQueue(); n != 1 {
		t.Fatalf("queue holds %d messages, want 1 (the failed one)", n)
	}
	// Counted once, as a partial failure, never also as a success.
	if s := b.runner.Stats(); s.Batches != 1 || s.PartialFailures != 1 || s.Successes != 0 {
		t.Errorf("stats: %d invocations, %d partial failures, %d successes; want 1, 1, 0", s.Batches, s.PartialFailures, s.Successes)
	}
}

// Rule: without ReportBatchItemFailures a successful invocation deletes the
// whole batch, whatever the function returned.
func TestWithoutReportBatchItemFailuresSuccessDeletesAll(t *testing.T) {
	t.Parallel()
	b := setup(t, queueOpts{}, func(c *localrun.Config) {
		batchOf(2)(c)
		c.ReportBatchItemFailures = false
	})
	ids := b.send("ok", "fail")

	inv := b.next(nil)
	if inv.Outcome != localrun.OutcomeSuccess {
		t.Fatalf("outcome = %s (%v), want success", inv.Outcome, inv.Err)
	}
	sameSet(t, "deleted", inv.Deleted, ids)
	if n := b.onQueue(); n != 0 {
		t.Fatalf("queue holds %d messages, want 0", n)
	}
}

// Rule: an itemIdentifier that is empty or not a message of the batch fails
// the whole batch: nothing is deleted.
func TestInvalidItemIdentifierFailsWholeBatch(t *testing.T) {
	t.Parallel()
	for _, body := range []string{"bad-id", "empty-id"} {
		t.Run(body, func(t *testing.T) {
			t.Parallel()
			b := setup(t, queueOpts{}, batchOf(2))
			ids := b.send("ok", body)

			inv := b.next(nil)
			if inv.Outcome != localrun.OutcomeInvalidResponse {
				t.Fatalf("outcome = %s, want %s", inv.Outcome, localrun.OutcomeInvalidResponse)
			}
			if len(inv.Deleted) != 0 {
				t.Fatalf("deleted %v, want none", inv.Deleted)
			}
			sameSet(t, "failed", inv.Failed, ids)
			if n := b.onQueue(); n != 2 {
				t.Fatalf("queue holds %d messages, want 2", n)
			}
		})
	}
}

// Rule: a function error fails the whole batch, and the process stays warm.
func TestFunctionErrorFailsWholeBatch(t *testing.T) {
	t.Parallel()
	b := setup(t, queueOpts{}, batchOf(2))
	ids := b.send("ok", "error")

	inv := b.next(nil)
	if inv.Outcome != localrun.OutcomeFunctionError || inv.Err == nil || inv.Err.Message != "told to fail" {
		t.Fatalf("outcome = %s (%v), want function_error 'told to fail'", inv.Outcome, inv.Err)
	}
	if len(inv.Deleted) != 0 {
		t.Fatalf("deleted %v, want none", inv.Deleted)
	}
	sameSet(t, "failed", inv.Failed, ids)

	// The same process serves the next invocation: a returned error does
	// not cost the environment.
	okID := b.send("ok")[0]
	next := b.next(func(i localrun.Invocation) bool { return contains(i.MessageIDs, okID) })
	if next.PID != inv.PID {
		t.Fatalf("next invocation ran in process %d, want the warm %d", next.PID, inv.PID)
	}
}

// Rule: a process that exits during an invocation fails the batch and is
// replaced by a new process.
func TestCrashFailsBatchAndRestartsProcess(t *testing.T) {
	t.Parallel()
	b := setup(t, queueOpts{}, nil)
	crashID := b.send("crash")[0]

	inv := b.next(nil)
	if inv.Outcome != localrun.OutcomeCrash || inv.Err.Type != "Runtime.ExitError" {
		t.Fatalf("outcome = %s (%v), want crash with Runtime.ExitError", inv.Outcome, inv.Err)
	}
	sameSet(t, "failed", inv.Failed, []string{crashID})
	exit := b.nextProcess(func(e localrun.ProcessEvent) bool {
		return e.Kind == localrun.ProcessExited && e.PID == inv.PID
	})
	if exit.Reason != "" || exit.ExitErr == nil || !strings.Contains(exit.ExitErr.Error(), "exit status 2") {
		t.Fatalf("exit = %+v, want an unprovoked exit status 2", exit)
	}

	okID := b.send("ok")[0]
	next := b.next(func(i localrun.Invocation) bool { return contains(i.MessageIDs, okID) })
	if next.Outcome != localrun.OutcomeSuccess || next.PID == inv.PID {
		t.Fatalf("after crash: outcome %s in process %d, want success in a new process", next.Outcome, next.PID)
	}
	if s := b.runner.Stats(); s.ProcessStarts < 2 {
		t.Fatalf("process starts = %d, want a restart", s.ProcessStarts)
	}
}

// Rule: a panic is reported as a function error; aws-lambda-go then exits
// and the runner starts a new process.
func TestPanicIsFunctionErrorAndRestarts(t *testing.T) {
	t.Parallel()
	b := setup(t, queueOpts{}, nil)
	b.send("panic")

	inv := b.next(nil)
	if inv.Outcome != localrun.OutcomeFunctionError || !strings.Contains(inv.Err.Message, "told to panic") {
		t.Fatalf("outcome = %s (%v), want function_error from the panic", inv.Outcome, inv.Err)
	}
	b.nextProcess(func(e localrun.ProcessEvent) bool { return e.Kind == localrun.ProcessExited && e.PID == inv.PID })

	okID := b.send("ok")[0]
	next := b.next(func(i localrun.Invocation) bool { return contains(i.MessageIDs, okID) })
	if next.Outcome != localrun.OutcomeSuccess || next.PID == inv.PID {
		t.Fatalf("after panic: outcome %s in process %d, want success in a new process", next.Outcome, next.PID)
	}
}

// Rule: at the deadline the process group is killed, the invocation is a
// timeout, and the batch fails.
func TestDeadlineKillsProcessAndFailsBatch(t *testing.T) {
	t.Parallel()
	b := setup(t, queueOpts{}, func(c *localrun.Config) { c.FunctionTimeout = 500 * time.Millisecond })
	id := b.send("hang")[0]

	inv := b.next(nil)
	if inv.Outcome != localrun.OutcomeTimeout || inv.Err.Type != "Sandbox.Timedout" {
		t.Fatalf("outcome = %s (%v), want timeout", inv.Outcome, inv.Err)
	}
	sameSet(t, "failed", inv.Failed, []string{id})
	exit := b.nextProcess(func(e localrun.ProcessEvent) bool {
		return e.Kind == localrun.ProcessExited && e.PID == inv.PID
	})
	if exit.Reason != "timeout" {
		t.Fatalf("exit reason = %q, want timeout", exit.Reason)
	}
	if err := syscall.Kill(inv.PID, 0); err != syscall.ESRCH {
		t.Fatalf("timed-out process %d still exists (kill 0: %v)", inv.PID, err)
	}
}

// Rule: failed records are not made visible early; they come back only
// when their visibility timeout runs out, as a second receive of the same
// message. Checked by the clock, which load can only make later: the
// second delivery starts no sooner than the timeout after the first
// receive. (Messages sent after the failure are handled meanwhile; how
// many before it returns depends on the machine's speed, so that is not
// counted.)
func TestFailedMessagesReturnOnlyAfterVisibilityTimeout(t *testing.T) {
	t.Parallel()
	const visibility = 2 * time.Second
	b := setup(t, queueOpts{visibility: "2"}, func(c *localrun.Config) { c.BatchSize = 1 })
	failID := b.send("fail")[0]

	first := b.next(nil)
	if !slices.Equal(first.MessageIDs, []string{failID}) || first.ReceiveCounts[0] != 1 || len(first.Failed) != 1 {
		t.Fatalf("first invocation = %+v, want the failed message, first receive", first)
	}
	var ev events.SQSEvent
	if err := json.Unmarshal(first.Payload, &ev); err != nil || len(ev.Records) != 1 {
		t.Fatalf("first event %s: %v", first.Payload, err)
	}
	ms, err := strconv.ParseInt(ev.Records[0].Attributes["ApproximateFirstReceiveTimestamp"], 10, 64)
	if err != nil {
		t.Fatalf("ApproximateFirstReceiveTimestamp of %v: %v", ev.Records[0].Attributes, err)
	}
	received := time.UnixMilli(ms)
	b.send("ok", "ok", "ok")
	for {
		inv := b.next(nil)
		if !contains(inv.MessageIDs, failID) {
			continue
		}
		if inv.ReceiveCounts[0] != 2 {
			t.Fatalf("failed message came back with receive count %d, want 2", inv.ReceiveCounts[0])
		}
		if early := received.Add(visibility).Sub(inv.Started); early > 0 {
			t.Fatalf("failed message handed to the function again %s before its visibility timeout ran out (first received %s, again %s)",
				early, received.Format(time.StampMilli), inv.Started.Format(time.StampMilli))
		}
		return
	}
}

// Rule: a FIFO queue's records reach the function in order within each
// message group, across batches and concurrent pollers.
func TestFIFOGroupOrderPreserved(t *testing.T) {
	t.Parallel()
	// Every record succeeds: a visibility timeout shorter than a slow
	// invocation would hand a batch out again while it runs.
	b := setup(t, queueOpts{fifo: true, visibility: "60"}, func(c *localrun.Config) {
		c.BatchSize = 2
		c.MaxConcurrency = 3
	})
	sent := map[string][]string{}
	groupOf := map[string]string{}
	for i := range 6 {
		for _, g := range []string{"a", "b", "c"} {
			id := b.sendTo(g, "ok")
			sent[g] = append(sent[g], id)
			groupOf[id] = g
			_ = i
		}
	}
	var invs []localrun.Invocation
	deleted := 0
	for deleted < 18 {
		inv := b.next(nil)
		if inv.Outcome != localrun.OutcomeSuccess {
			t.Fatalf("outcome = %s (%v), want success", inv.Outcome, inv.Err)
		}
		invs = append(invs, inv)
		deleted += len(inv.Deleted)
	}
	slices.SortFunc(invs, func(x, y localrun.Invocation) int { return int(x.Seq) - int(y.Seq) })
	got := map[string][]string{}
	for _, inv := range invs {
		for _, id := range inv.MessageIDs {
			got[groupOf[id]] = append(got[groupOf[id]], id)
		}
	}
	for g, want := range sent {
		if !slices.Equal(got[g], want) {
			t.Errorf("group %s delivered as %v, want %v", g, got[g], want)
		}
	}
}

// Rule: a FIFO group whose records all failed comes back, once their
// visibility timeout has run out, in the order it was sent: the first
// message first. (moto 5.2.1 gave the last first; localstack/moto_sqs.py
// fixes that, and this test fails against an emulator that reorders.)
func TestFIFOGroupRedeliveredInOrder(t *testing.T) {
	// The first invocation must get the whole group in one batch.
	testenv.SkipOn(t, testenv.FauxqsOneMessagePerFIFOGroup)
	t.Parallel()
	var ids []string
	b := setup(t, queueOpts{fifo: true, visibility: "1", before: func(b *bundle) {
		ids = b.send("fail", "fail", "fail")
	}}, func(c *localrun.Config) { c.BatchSize = 3 })

	first := b.next(nil)
	if !slices.Equal(first.MessageIDs, ids) || len(first.Failed) != 3 {
		t.Fatalf("first invocation: records %v failed %v, want %v all failed", first.MessageIDs, first.Failed, ids)
	}
	// The order in which the records came back, each counted once; a
	// record on its third receive means the others are stuck behind it.
	var again []string
	for third := false; len(again) < len(ids) && !third; {
		inv := b.next(nil)
		for i, id := range inv.MessageIDs {
			third = third || inv.ReceiveCounts[i] > 2
			if !contains(again, id) {
				again = append(again, id)
			}
		}
	}
	if !slices.Equal(again, ids) {
		t.Fatalf("group redelivered as %v, want %v", again, ids)
	}
}

// Rule: messages of up to 1 MiB reach the function whole, and a batch whose
// event would pass Lambda's 6 MB payload limit is invoked in several parts
// that fit, none lost.
//
// Not parallel: 6 MiB through the emulator and the function's output would
// slow the other tests' functions towards their timeouts.
func TestOneMebibyteMessagesSplitAtTheEventLimit(t *testing.T) {
	const n, size = 6, 1 << 20 // 6 MiB of bodies alone is over the limit
	var ids []string
	b := setup(t, queueOpts{visibility: "30", before: func(b *bundle) {
		for i := range n {
			ids = append(ids, b.sendTo("", strings.Repeat(string(rune('a'+i)), size)))
		}
	}}, func(c *localrun.Config) {
		c.BatchSize = 10
		c.BatchingWindow = 2 * time.Second
		c.FunctionTimeout = 10 * time.Second
	})
	var deleted []string
	invocations := 0
	for len(deleted) < n {
		inv := b.next(nil)
		invocations++
		if inv.Outcome != localrun.OutcomeSuccess {
			t.Fatalf("outcome = %s (%v), want success", inv.Outcome, inv.Err)
		}
		if len(inv.Payload) > 6*1024*1024 {
			t.Errorf("an event of %d bytes, over Lambda's 6 MB", len(inv.Payload))
		}
		var ev events.SQSEvent
		if err := json.Unmarshal(inv.Payload, &ev); err != nil {
			t.Fatal(err)
		}
		for _, rec := range ev.Records {
			if len(rec.Body) != size {
				t.Errorf("record %s arrived with %d bytes, want %d", rec.MessageId, len(rec.Body), size)
			}
		}
		deleted = append(deleted, inv.Deleted...)
	}
	sameSet(t, "deleted", deleted, ids)
	if invocations < 2 {
		t.Errorf("%d MiB arrived in %d invocation(s); 6 MB allows no fewer than 2", n, invocations)
	}
}

// Rule: at most MaxConcurrency invocations (and processes) at once. The
// barrier body makes the first two invocations wait for each other, so
// the high-water mark is exactly the limit.
func TestMaxConcurrencyRespected(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := setup(t, queueOpts{visibility: "20"}, func(c *localrun.Config) {
		c.BatchSize = 1
		c.MaxConcurrency = 2
		c.FunctionTimeout = 15 * time.Second
		c.Env = []string{"LOCALRUN_BARRIER_DIR=" + dir}
	})
	ids := b.send("barrier", "barrier", "barrier", "barrier", "barrier")
	var done []string
	for len(done) < len(ids) {
		inv := b.next(nil)
		if inv.Outcome != localrun.OutcomeSuccess {
			t.Fatalf("outcome = %s (%v), want success", inv.Outcome, inv.Err)
		}
		done = append(done, inv.Deleted...)
	}
	sameSet(t, "handled", done, ids)
	s := b.runner.Stats()
	if s.MaxInFlight != 2 || s.MaxProcesses != 2 {
		t.Fatalf("high-water marks: in flight %d, processes %d; want 2 and 2", s.MaxInFlight, s.MaxProcesses)
	}
}

// Rule: the event is the JSON Lambda builds for SQS; the function (using
// aws-lambda-go) decodes it into events.SQSEvent with every attribute. A
// fair queue (a standard queue whose producer sets MessageGroupId) passes
// the group on as on a FIFO queue.
func TestEventJSONRoundTrips(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"standard", "fair", "fifo"} {
		fifo, grouped := kind == "fifo", kind != "standard"
		t.Run(kind, func(t *testing.T) {
			if kind == "fair" {
				testenv.SkipOn(t, testenv.FauxqsNoFairQueues)
			}
			t.Parallel()
			b := setup(t, queueOpts{fifo: fifo}, func(c *localrun.Config) { c.ReportBatchItemFailures = false })
			in := &sqs.SendMessageInput{
				QueueUrl:    aws.String(b.url),
				MessageBody: aws.String("echo"),
				MessageAttributes: map[string]types.MessageAttributeValue{
					"s": {DataType: aws.String("String"), StringValue: aws.String("hello")},
					"n": {DataType: aws.String("Number"), StringValue: aws.String("42")},
					"b": {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1, 2, 255}},
				},
			}
			if grouped {
				in.MessageGroupId = aws.String("grp")
			}
			if fifo {
				in.MessageDeduplicationId = aws.String("dedup-1")
			}
			sent, err := b.client.SendMessage(context.Background(), in)
			if err != nil {
				t.Fatalf("send: %v", err)
			}

			inv := b.next(nil)
			if inv.Outcome != localrun.OutcomeSuccess {
				t.Fatalf("outcome = %s (%v)", inv.Outcome, inv.Err)
			}
			var ev events.SQSEvent
			if err := json.Unmarshal(inv.Response, &ev); err != nil || len(ev.Records) != 1 {
				t.Fatalf("function's echo %s: %v", inv.Response, err)
			}
			rec := ev.Records[0]
			sum := md5.Sum([]byte("echo"))
			switch {
			case rec.MessageId != aws.ToString(sent.MessageId):
				t.Errorf("messageId = %q, want %q", rec.MessageId, aws.ToString(sent.MessageId))
			case rec.ReceiptHandle == "":
				t.Errorf("receiptHandle empty")
			case rec.Body != "echo":
				t.Errorf("body = %q", rec.Body)
			case rec.Md5OfBody != hex.EncodeToString(sum[:]):
				t.Errorf("md5OfBody = %q, want %x", rec.Md5OfBody, sum)
			case rec.Md5OfMessageAttributes != aws.ToString(sent.MD5OfMessageAttributes):
				t.Errorf("md5OfMessageAttributes = %q, want %q", rec.Md5OfMessageAttributes, aws.ToString(sent.MD5OfMessageAttributes))
			case rec.EventSource != "aws:sqs":
				t.Errorf("eventSource = %q", rec.EventSource)
			case !strings.HasPrefix(rec.EventSourceARN, "arn:aws:sqs:") || !strings.HasSuffix(rec.EventSourceARN, ":"+b.url[strings.LastIndex(b.url, "/")+1:]):
				t.Errorf("eventSourceARN = %q for %s", rec.EventSourceARN, b.url)
			case rec.AWSRegion == "":
				t.Errorf("awsRegion empty")
			}
			want := []string{"ApproximateReceiveCount", "SentTimestamp", "SenderId", "ApproximateFirstReceiveTimestamp"}
			if grouped {
				want = append(want, "MessageGroupId")
			}
			if fifo {
				want = append(want, "SequenceNumber", "MessageDeduplicationId")
			}
			for _, k := range want {
				if rec.Attributes[k] == "" {
					t.Errorf("attributes[%s] missing in %v", k, rec.Attributes)
				}
			}
			if rec.Attributes["ApproximateReceiveCount"] != "1" {
				t.Errorf("ApproximateReceiveCount = %q, want 1", rec.Attributes["ApproximateReceiveCount"])
			}
			if grouped && rec.Attributes["MessageGroupId"] != "grp" {
				t.Errorf("MessageGroupId = %q, want grp", rec.Attributes["MessageGroupId"])
			}
			if fifo && rec.Attributes["MessageDeduplicationId"] != "dedup-1" {
				t.Errorf("FIFO attributes = %v", rec.Attributes)
			}
			ma := rec.MessageAttributes
			if aws.ToString(ma["s"].StringValue) != "hello" || ma["s"].DataType != "String" ||
				aws.ToString(ma["n"].StringValue) != "42" || ma["n"].DataType != "Number" ||
				string(ma["b"].BinaryValue) != string([]byte{0, 1, 2, 255}) || ma["b"].DataType != "Binary" {
				t.Errorf("messageAttributes = %+v", ma)
			}
			// Lambda sends the reserved list fields as empty lists, not null.
			if !strings.Contains(string(inv.Payload), `"stringListValues":[]`) || !strings.Contains(string(inv.Payload), `"binaryListValues":[]`) {
				t.Errorf("payload lacks empty list fields: %s", inv.Payload)
			}
		})
	}
}

// Rule: the process gets Lambda's environment, the passthrough Env, and
// the invocation's request ID, function ARN, deadline and trace ID.
func TestRuntimeEnvironment(t *testing.T) {
	t.Parallel()
	b := setup(t, queueOpts{}, func(c *localrun.Config) {
		c.ReportBatchItemFailures = false
		c.FunctionName = "orders"
		c.MemoryMB = 256
		c.FunctionTimeout = 7 * time.Second
		c.Env = []string{"LOCALRUN_TEST_VALUE=passed"}
	})
	b.send("env")
	inv := b.next(nil)
	var got map[string]string
	if err := json.Unmarshal(inv.Response, &got); err != nil {
		t.Fatalf("response %s: %v", inv.Response, err)
	}
	for k, want := range map[string]string{
		"name": "orders", "memory": "256", "version": "$LATEST", "handler": "bootstrap",
		"custom": "passed", "request": inv.RequestID,
	} {
		if got[k] != want {
			t.Errorf("%s = %q, want %q", k, got[k], want)
		}
	}
	if got["region"] == "" || !strings.HasPrefix(got["arn"], "arn:aws:lambda:"+got["region"]+":") || !strings.HasSuffix(got["arn"], ":function:orders") {
		t.Errorf("region %q, arn %q", got["region"], got["arn"])
	}
	if !strings.HasPrefix(got["trace"], "Root=1-") {
		t.Errorf("trace = %q", got["trace"])
	}
	deadline, err := time.Parse(time.RFC3339Nano, got["deadline"])
	// The deadline is set when the process takes the event, within the
	// invocation's span, one function timeout ahead.
	earliest := inv.Started.Add(7 * time.Second).Truncate(time.Millisecond)
	latest := inv.Started.Add(inv.Duration + 7*time.Second)
	if err != nil || deadline.Before(earliest) || deadline.After(latest) {
		t.Errorf("deadline %s not within [%s, %s] (%v)", got["deadline"], earliest, latest, err)
	}
}

// Stop waits for the invocation in flight, lets its records settle, and
// leaves no process behind (setup's cleanup checks every PID).
func TestStopWaitsForInFlightInvocation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := setup(t, queueOpts{visibility: "20"}, func(c *localrun.Config) {
		c.BatchSize = 1
		c.FunctionTimeout = 10 * time.Second
		c.Env = []string{"LOCALRUN_BARRIER_DIR=" + dir}
	})
	id := b.send("barrier")[0]
	// Wait until the function is inside the barrier, then stop while it
	// runs; let the barrier open only after Stop began.
	testenv.WaitFor(t, "the function to enter the barrier", func() bool { e, _ := os.ReadDir(dir); return len(e) == 1 })
	stopped := make(chan error, 1)
	go func() { stopped <- b.runner.Stop(context.Background()) }()
	if err := os.WriteFile(dir+"/second", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	inv := b.next(nil)
	if inv.Outcome != localrun.OutcomeSuccess || !slices.Equal(inv.Deleted, []string{id}) {
		t.Fatalf("in-flight invocation = %s deleted %v, want success deleting %s", inv.Outcome, inv.Deleted, id)
	}
}

// Rule: the mapping gathers records over several receives until BatchSize
// is reached or the batching window closes, whichever comes first.
func TestBatchSizeAndBatchingWindow(t *testing.T) {
	t.Parallel()
	t.Run("window closes before the batch fills", func(t *testing.T) {
		t.Parallel()
		// More than one receive can return (10 at most each): 12 records
		// on the queue when the window opens arrive as one batch of 12.
		// They are sent before the runner polls, so that the window does
		// not race the sends; it closes (the batch never fills) after
		// BatchingWindow, long enough for two receives on a loaded machine.
		var ids []string
		b := setup(t, queueOpts{visibility: "60", before: func(b *bundle) {
			bodies := make([]string, 12)
			for i := range bodies {
				bodies[i] = "ok"
			}
			ids = b.send(bodies...)
		}}, func(c *localrun.Config) {
			c.BatchSize = 15
			c.BatchingWindow = 10 * time.Second
		})
		inv := b.next(nil)
		sameSet(t, "batch", inv.MessageIDs, ids)
	})
	t.Run("full batch ends the window", func(t *testing.T) {
		t.Parallel()
		// Sent before the runner polls: the first receive finds all five,
		// and the full batch of three goes at once.
		var ids []string
		b := setup(t, queueOpts{visibility: "60", before: func(b *bundle) {
			ids = b.send("ok", "ok", "ok", "ok", "ok")
		}}, func(c *localrun.Config) {
			c.BatchSize = 3
			c.BatchingWindow = 3 * time.Second
		})
		first, second := b.next(nil), b.next(nil)
		// A send the SDK retried may have left a sixth copy (see
		// testenv.Resends): the second batch then holds 3.
		extra := min(b.resends.Count(), 1)
		if len(first.MessageIDs) != 3 || len(second.MessageIDs) < 2 || len(second.MessageIDs) > 2+extra {
			t.Fatalf("batches of %d and %d records, want 3 and 2 (%d resent)", len(first.MessageIDs), len(second.MessageIDs), b.resends.Count())
		}
		if extra == 0 {
			sameSet(t, "handled", append(first.Deleted, second.Deleted...), ids)
		}
	})
}

// Rule: a new process that exits before asking for its first event is an
// init failure; the batch fails and nothing is deleted.
func TestInitFailureFailsBatch(t *testing.T) {
	t.Parallel()
	falseBin, err := exec.LookPath("false")
	if err != nil {
		t.Skip("no false(1) on PATH")
	}
	b := setup(t, queueOpts{}, func(c *localrun.Config) { c.Bootstrap = falseBin })
	id := b.send("ok")[0]
	inv := b.next(nil)
	if inv.Outcome != localrun.OutcomeInitError || inv.Err.Type != "Runtime.ExitError" {
		t.Fatalf("outcome = %s (%v), want init_error with Runtime.ExitError", inv.Outcome, inv.Err)
	}
	sameSet(t, "failed", inv.Failed, []string{id})
	if len(inv.Deleted) != 0 {
		t.Fatalf("deleted %v, want none", inv.Deleted)
	}
}

// Rule: a runtime that reports POST /runtime/init/error fails the batch
// with its error and is killed.
func TestInitErrorEndpoint(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl on PATH")
	}
	script := filepath.Join(t.TempDir(), "bootstrap")
	body := `#!/bin/sh
curl -sf -X POST -H 'Lambda-Runtime-Function-Error-Type: Init.Bad' \
  -d '{"errorType":"Init.Bad","errorMessage":"cannot start"}' \
  "http://$AWS_LAMBDA_RUNTIME_API/2018-06-01/runtime/init/error"
exec sleep 60
`
	if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
		t.Fatal(err)
	}
	b := setup(t, queueOpts{}, func(c *localrun.Config) { c.Bootstrap = script })
	b.send("ok")
	inv := b.next(nil)
	if inv.Outcome != localrun.OutcomeInitError || inv.Err.Type != "Init.Bad" || inv.Err.Message != "cannot start" {
		t.Fatalf("outcome = %s (%v), want init_error Init.Bad", inv.Outcome, inv.Err)
	}
	exit := b.nextProcess(func(e localrun.ProcessEvent) bool { return e.Kind == localrun.ProcessExited && e.PID == inv.PID })
	if exit.Reason != "init_error" {
		t.Fatalf("exit reason = %q, want init_error", exit.Reason)
	}
}
