package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
)

func TestHelpDescribesUsage(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"-h"}, &out, &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("run -h = %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"Usage:", "-queue-url", "-batch-size", "-batching-window", "-max-concurrency", "-timeout", "-memory", "-function-name", "-env", "AWS_ENDPOINT_URL_SQS"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("usage lacks %q", want)
		}
	}
}

func TestBadFlagsAreRejected(t *testing.T) {
	for _, args := range [][]string{
		{}, // no queue
		{"-queue-url", "http://q", "-batch-size", "11"}, // above 10 without a window
		{"-queue-url", "http://q", "-env", "LOCALRUN_SURELY_UNSET_VARIABLE"},
	} {
		var out bytes.Buffer
		if err := run(context.Background(), args, &out, &out); err == nil {
			t.Errorf("run %q succeeded, want an error", args)
		}
	}
}

// The command runs a real bootstrap against the queue until its context
// ends, then reports counters.
func TestRunsBootstrapFromQueue(t *testing.T) {
	client := testenv.SQS(t)
	dir := t.TempDir()
	bootstrap := filepath.Join(dir, "bootstrap")
	build := exec.Command("go", "build", "-o", bootstrap, "../../localrun/testdata/fn")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("build test function: %v", err)
	}
	q, err := client.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(testenv.Name("cli"))})
	if err != nil {
		t.Fatal(err)
	}
	url := aws.ToString(q.QueueUrl)
	t.Cleanup(func() { _, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) })
	if _, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("ok")}); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr testenv.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-bootstrap", bootstrap, "-queue-url", url, "-timeout", "5s"}, &stdout, &stderr)
	}()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
		}
	})
	// Wait for the invocation report, an external process's doing.
	testenv.WaitFor(t, "the invocation's report", func() bool { return strings.Contains(stderr.String(), "outcome=success deleted=1") })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if !strings.Contains(stdout.String(), "record ") || !strings.Contains(stderr.String(), "records 1: deleted 1") {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
}
