package main

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidemtest"
)

// These tests run the function's own handler, with its own options, on
// lambdaidemtest's simulated FIFO queue and store: no DynamoDB, no SQS, no
// sleeps. The tests in fifo_test.go run it against the local services.

// kitFunction returns a Kit over the FIFO handler and the seqs whose effect
// happened, per group, in order.
func kitFunction(t *testing.T, cfg Config) (*lambdaidemtest.Kit, map[string][]int) {
	t.Helper()
	effects := map[string][]int{}
	cfg.Namespace = DefaultNamespace
	handle, opts := NewMessageHandler(cfg, Deps{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		WriteEffect: func(_ context.Context, group string, seq int) error {
			effects[group] = append(effects[group], seq)
			return nil
		},
	})
	return lambdaidemtest.New(handle, opts...), effects
}

func TestKitPoisonDoesNotBlockItsGroup(t *testing.T) {
	k, effects := kitFunction(t, Config{})
	k.StopGroup("A", `{"seq":1}`, `{"seq":2,"poison":true}`, `{"seq":3}`)
	// Bodies differ from A's: the kit's FIFO queue deduplicates by content
	// across groups, as a queue-scoped content-based one does.
	k.StopGroup("B", `{"seq":1,"for":"B"}`, `{"seq":2,"for":"B"}`)
	if !slices.Equal(effects["A"], []int{1, 3}) || !slices.Equal(effects["B"], []int{1, 2}) {
		t.Errorf("effects %v, want A [1 3] and B [1 2]", effects)
	}
	dl := k.DeadLetters()
	if len(dl) != 1 || dl[0].Reason != lambdaidem.ReasonPoison || !strings.Contains(dl[0].Error, "marked poison") {
		t.Errorf("dead letters %+v, want the poison seq 2 of A", dl)
	}
	// The key is the deduplication ID: on the kit's FIFO queue, the body.
	k.ExpectDeadLetter(`{"seq":2,"poison":true}`, lambdaidem.ReasonPoison)
	if err := k.Check(); err != nil {
		t.Error(err)
	}
}

func TestKitFailureHoldsTheRestOfItsGroup(t *testing.T) {
	k, effects := kitFunction(t, Config{MaxAttempts: 5})
	k.StopGroup("A", `{"seq":1}`, `{"seq":2,"fail_times":2}`, `{"seq":3}`)
	if !slices.Equal(effects["A"], []int{1, 2, 3}) {
		t.Errorf("effects %v, want A [1 2 3]: seq 3 must wait for seq 2's retries", effects)
	}
	k.ExpectFailure(`{"seq":2,"fail_times":2}`)
	if err := k.Check(); err != nil {
		t.Error(err)
	}
}

func TestKitRedeliveryHasOneEffect(t *testing.T) {
	k, effects := kitFunction(t, Config{})
	k.DeliverTwice(`{"seq":1}`, lambdaidemtest.Group("A"))
	k.RedeliverWhileRunning(`{"seq":2}`, lambdaidemtest.Group("A"))
	if !slices.Equal(effects["A"], []int{1, 2}) {
		t.Errorf("effects %v, want A [1 2]", effects)
	}
	if err := k.Check(); err != nil {
		t.Error(err)
	}
}
