package localrun_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/goleak"

	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/localrun"
)

// bootstrap is the test function (testdata/fn), built once per run;
// raceBootstrap is testdata/idemfn built with -race, for the
// multi-concurrency test. Both are built before any test runs, so that the
// compiler does not compete with running tests for the CPU.
var bootstrap, raceBootstrap string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "localrun-fn-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bootstrap = filepath.Join(dir, "bootstrap")
	raceBootstrap = filepath.Join(dir, "race-bootstrap")
	for _, b := range [][]string{
		{"build", "-o", bootstrap, "./testdata/fn"},
		{"build", "-race", "-o", raceBootstrap, "./testdata/idemfn"},
	} {
		build := exec.Command("go", b...)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build test function:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		// The SDK keeps idle keep-alive connections; those are not ours.
		if err := goleak.Find(
			goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// bundle is what a test needs: a fresh queue, a running runner, and its
// reports as channels.
type bundle struct {
	t      *testing.T
	client *sqs.Client
	// resends counts the copies the SDK's retried sends may have added.
	resends *testenv.Resends
	url     string
	fifo    bool
	runner  *localrun.Runner
	invs    chan localrun.Invocation
	procs   chan localrun.ProcessEvent
	out     *testenv.Buffer
}

type queueOpts struct {
	fifo       bool
	visibility string // seconds
	// before, if set, runs once the queue exists and before the runner
	// starts polling it (to put messages on it that one receive takes).
	before func(*bundle)
}

func setup(t *testing.T, q queueOpts, mutate func(*localrun.Config)) *bundle {
	t.Helper()
	client, resends := testenv.SQSWithResends(t)
	ctx := context.Background()
	name := testenv.Name("localrun")
	attrs := map[string]string{"VisibilityTimeout": q.visibility}
	if q.visibility == "" {
		attrs["VisibilityTimeout"] = "1"
	}
	if q.fifo {
		name += ".fifo"
		attrs["FifoQueue"] = "true"
	}
	created, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatalf("create queue: %v", err)
	}
	b := &bundle{
		t:       t,
		client:  client,
		resends: resends,
		url:     aws.ToString(created.QueueUrl),
		fifo:    q.fifo,
		invs:    make(chan localrun.Invocation, 1000),
		procs:   make(chan localrun.ProcessEvent, 1000),
		out:     &testenv.Buffer{},
	}
	var pidsMu sync.Mutex
	var pids []int
	cfg := localrun.Config{
		Bootstrap:               bootstrap,
		QueueURL:                b.url,
		SQS:                     client,
		MaxConcurrency:          1,
		ReportBatchItemFailures: true,
		PollWait:                2 * time.Second,
		// Lambda's default of 3 s is a deadline a loaded machine can miss
		// for a trivial invocation; the tests of the deadline set theirs.
		FunctionTimeout: 30 * time.Second,
		Output:          b.out,
		OnInvoke:        func(inv localrun.Invocation) { b.invs <- inv },
		OnProcess: func(ev localrun.ProcessEvent) {
			pidsMu.Lock()
			pids = append(pids, ev.PID)
			pidsMu.Unlock()
			b.procs <- ev
		},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	if q.before != nil {
		q.before(b)
	}
	r, err := localrun.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	b.runner = r
	t.Cleanup(func() {
		// Stop waits for the invocations in flight: a bound for a hang.
		stopCtx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
		defer cancel()
		if err := r.Stop(stopCtx); err != nil {
			t.Errorf("Stop: %v", err)
		}
		pidsMu.Lock()
		defer pidsMu.Unlock()
		for _, pid := range pids {
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("process %d still exists after Stop (kill 0: %v)", pid, err)
			}
		}
		_, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(b.url)})
		if t.Failed() {
			t.Logf("function output:\n%s", b.out.String())
		}
	})
	return b
}

// send sends bodies in order and returns their message IDs. On a FIFO
// queue they go to group "g".
func (b *bundle) send(bodies ...string) []string {
	b.t.Helper()
	ids := make([]string, len(bodies))
	for i, body := range bodies {
		ids[i] = b.sendTo("g", body)
	}
	return ids
}

func (b *bundle) sendTo(group, body string) string {
	b.t.Helper()
	in := &sqs.SendMessageInput{QueueUrl: aws.String(b.url), MessageBody: aws.String(body)}
	if b.fifo {
		in.MessageGroupId = aws.String(group)
		in.MessageDeduplicationId = aws.String(testenv.Name("dedup"))
	}
	out, err := b.client.SendMessage(context.Background(), in)
	if err != nil {
		b.t.Fatalf("send: %v", err)
	}
	return aws.ToString(out.MessageId)
}

// next returns the next invocation that match accepts, waiting for the
// runner (an external process and queue) up to testenv.Patience.
func (b *bundle) next(match func(localrun.Invocation) bool) localrun.Invocation {
	b.t.Helper()
	deadline := time.NewTimer(testenv.Patience)
	defer deadline.Stop()
	for {
		select {
		case inv := <-b.invs:
			if match == nil || match(inv) {
				return inv
			}
		case <-deadline.C:
			b.t.Fatalf("no matching invocation within %s; stats %+v", testenv.Patience, b.runner.Stats())
		}
	}
}

// nextProcess returns the next process event that match accepts.
func (b *bundle) nextProcess(match func(localrun.ProcessEvent) bool) localrun.ProcessEvent {
	b.t.Helper()
	deadline := time.NewTimer(testenv.Patience)
	defer deadline.Stop()
	for {
		select {
		case ev := <-b.procs:
			if match(ev) {
				return ev
			}
		case <-deadline.C:
			b.t.Fatalf("no matching process event within %s", testenv.Patience)
		}
	}
}

// onQueue returns how many messages the queue holds, visible or in flight.
func (b *bundle) onQueue() int {
	b.t.Helper()
	out, err := b.client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(b.url),
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		},
	})
	if err != nil {
		b.t.Fatalf("queue attributes: %v", err)
	}
	var n, m int
	fmt.Sscan(out.Attributes["ApproximateNumberOfMessages"], &n)
	fmt.Sscan(out.Attributes["ApproximateNumberOfMessagesNotVisible"], &m)
	return n + m
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func sameSet(t *testing.T, what string, got, want []string) {
	t.Helper()
	g := map[string]bool{}
	for _, x := range got {
		g[x] = true
	}
	w := map[string]bool{}
	for _, x := range want {
		w[x] = true
	}
	if len(got) != len(want) || len(g) != len(w) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
	for x := range w {
		if !g[x] {
			t.Fatalf("%s = %v, want %v", what, got, want)
		}
	}
}

// batchOf makes the runner gather n records into one batch: a window long
// enough for messages already on the queue, ended early by a full batch.
func batchOf(n int) func(*localrun.Config) {
	return func(c *localrun.Config) {
		c.BatchSize = n
		c.BatchingWindow = 5 * time.Second
	}
}
