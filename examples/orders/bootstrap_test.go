package main

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambdaidem/go-lambdaidem/examples/internal/esm"
	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
	"github.com/lambdaidem/go-lambdaidem/localrun"
)

// lineLog passes function output to t.Log, and stops once the test ended.
type lineLog struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// TestCrashUnderTheRunner runs the real bootstrap binary the way Lambda
// does (cmd/lambdaidem-local's runner) and kills its process in the middle
// of a handler: before the effect in plain mode, and after the effect in
// transactional mode, where the effect was prepared but not yet committed.
// Either way the message is neither lost nor applied twice. The retry waits
// for SQS's visibility timeout and the crashed lease's expiry, so each case
// takes a few seconds.
func TestCrashUnderTheRunner(t *testing.T) {
	bin := esm.Build(t, ".", runtime.GOOS, runtime.GOARCH)
	for _, c := range []struct {
		name, mode, crash string
	}{
		{"plain, before the effect", EffectModePlain, CrashBeforeEffect},
		{"transactional, after the effect", EffectModeTransactional, CrashAfterEffect},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := setupMode(t, 0, c.mode)
			crashUnderTheRunner(t, b, bin, c.crash)
		})
	}
}

func crashUnderTheRunner(t *testing.T, b *bundle, bin, crash string) {
	b.queue.SetVisibility(t, 2)

	b.queue.Send(t, `{"order_id":"k-1","crash":"`+crash+`"}`, "", "")
	b.queue.Send(t, `{"order_id":"k-2"}`, "", "")

	out := &lineLog{t: t}
	r, err := localrun.New(localrun.Config{
		Bootstrap:               bin,
		QueueURL:                b.queue.URL,
		SQS:                     b.queue.Client,
		BatchSize:               1,
		MaxConcurrency:          1,
		FunctionTimeout:         3 * time.Second,
		PollWait:                time.Second,
		ReportBatchItemFailures: true,
		Env: append(localrun.AWSEnv(),
			EnvIdempotencyTable+"="+b.cfg.IdempotencyTable,
			EnvEffectsTable+"="+b.cfg.EffectsTable,
			EnvNamespace+"="+b.cfg.Namespace,
			EnvDLQURL+"="+b.cfg.DLQURL,
			EnvEffectMode+"="+b.cfg.EffectMode,
			// DynamoDB Local on a loaded machine can take longer than the
			// default second: an attempt abandoned then ends before its
			// handler runs, and the crash set for it never happens.
			EnvStoreAttemptTimeout+"=10s",
		),
		Output: out,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		// Stop waits for the invocation in flight: a bound for a hang.
		ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
		defer cancel()
		if err := r.Stop(ctx); err != nil {
			t.Errorf("stop runner: %v", err)
		}
		out.mu.Lock()
		out.done = true
		out.mu.Unlock()
	}
	t.Cleanup(stop)

	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("runner: %+v", r.Stats())
		}
	})
	// Wait for the external condition: both messages settled.
	testenv.WaitFor(t, "the runner to drain the queue", func() bool { return b.queue.Count(t) == 0 })
	stop()

	eff := b.effects(t)
	for _, id := range []string{"k-1", "k-2"} {
		if len(eff[id]) != 1 {
			t.Errorf("order %s: %d effect rows, want 1: %v", id, len(eff[id]), eff[id])
		}
	}
	if a := esm.Num(eff["k-1"][0], attrAttempt); len(eff["k-1"]) == 1 && a != 2 {
		t.Errorf("order k-1: effect on attempt %d, want 2 (after the crash)", a)
	}
	if st := r.Stats(); st.Crashes != 1 {
		t.Errorf("runner saw %d crashes, want 1: %+v", st.Crashes, st)
	}
	if n := b.dlq.Count(t); n != 0 {
		t.Errorf("DLQ holds %d messages, want 0", n)
	}
}
