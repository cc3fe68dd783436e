package compat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

func init() {
	features = append(features, feature{
		name:    "batched writes",
		enable:  "`WithBatchedWrites()`",
		sqsOnly: true,
		option:  lambdaidem.WithBatchedWrites,
		run:     runBatched,
		kit:     kitBatched,
		kitHow:  "the option; a batch's records claimed and completed together",
		sim:     "Batched",
	})
}

// runBatched delivers one batch of ten records twice, with batched writes
// and one at a time, each on a namespace of its own: eight fresh keys
// whose handlers commit an effect with their completion, a second record
// of the first key, and a key whose handler fails the first time. Every
// record ends as it does one at a time, and every effect is committed
// once.
func runBatched(t *testing.T, c *cellEnv) {
	if c.effects == nil {
		t.Skip("the store commits no completion writes here")
	}
	if _, ok := c.env.store.(idemstore.Batcher); !ok {
		t.Fatalf("%s does not implement idemstore.Batcher", c.store.name)
	}
	type rec struct{ key, payload string }
	var batch []rec
	for i := range 8 {
		batch = append(batch, rec{fmt.Sprint("k", i), "a"})
	}
	batch = append(batch, rec{"k0", "a"}, rec{"flaky", "a"})
	var ev events.SQSEvent
	for i, r := range batch {
		b, _ := json.Marshal(body{Key: r.key, Payload: r.payload})
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: fmt.Sprint("m", i), Body: string(b), EventSourceARN: sourceARN,
			Attributes: map[string]string{"ApproximateReceiveCount": "1"},
		})
	}

	type delivery struct {
		outcomes []lambdaidem.Outcome
		failed   []string // the partial batch response
	}
	run := func(ns string, batched bool) (first, again delivery) {
		var mu sync.Mutex
		failedOnce := false
		var rep *lambdaidem.InvocationReport
		opts := []lambdaidem.Option{lambdaidem.WithNamespace(ns), lambdaidem.WithKeyJSONField("key"), quiet, c.effects.declare,
			lambdaidem.WithInvocationHook(func(r *lambdaidem.InvocationReport) { rep = r })}
		if batched {
			opts = append(opts, lambdaidem.WithBatchedWrites())
		}
		h := lambdaidem.SQS(c.env.store, func(ctx context.Context, m events.SQSMessage) error {
			var b body
			if err := json.Unmarshal([]byte(m.Body), &b); err != nil {
				return lambdaidem.Poison(err)
			}
			if b.Key == "flaky" {
				mu.Lock()
				fail := !failedOnce
				failedOnce = true
				mu.Unlock()
				if fail {
					return errors.New("not yet")
				}
			}
			return lambdaidem.AddCompletionWrite(ctx, c.effects.insert(ns, "fx-"+b.Key, b.Payload))
		}, opts...)
		deliver := func() delivery {
			resp, err := h(t.Context(), ev)
			if err != nil {
				t.Fatalf("batched %v: %v", batched, err)
			}
			var d delivery
			for _, r := range rep.Records {
				d.outcomes = append(d.outcomes, r.Outcome)
			}
			for _, f := range resp.BatchItemFailures {
				d.failed = append(d.failed, f.ItemIdentifier)
			}
			return d
		}
		return deliver(), deliver()
	}
	single1, single2 := run(c.ns+"-single", false)
	batched1, batched2 := run(c.ns+"-batched", true)

	P, D, F := lambdaidem.OutcomeProcessed, lambdaidem.OutcomeDuplicate, lambdaidem.OutcomeFailed
	for _, d := range []struct {
		what            string
		single, batched delivery
		want            []lambdaidem.Outcome
	}{
		{"first delivery", single1, batched1, []lambdaidem.Outcome{P, P, P, P, P, P, P, P, D, F}},
		{"second delivery", single2, batched2, []lambdaidem.Outcome{D, D, D, D, D, D, D, D, D, P}},
	} {
		if !slices.Equal(d.batched.outcomes, d.want) || !slices.Equal(d.single.outcomes, d.want) {
			t.Errorf("%s: batched %v, one at a time %v, want %v", d.what, d.batched.outcomes, d.single.outcomes, d.want)
		}
		if !slices.Equal(d.batched.failed, d.single.failed) {
			t.Errorf("%s: batched reports %v failed, one at a time %v", d.what, d.batched.failed, d.single.failed)
		}
	}
	for _, ns := range []string{c.ns + "-single", c.ns + "-batched"} {
		for _, r := range batch {
			v, err := c.effects.read(t.Context(), ns, "fx-"+r.key)
			if err != nil {
				t.Fatal(err)
			}
			if v != r.payload {
				t.Errorf("%s: effect of %s = %q, want %q committed with its completion", ns, r.key, v, r.payload)
			}
			got, err := c.env.store.Get(t.Context(), idemstore.GetRequest{Namespace: ns, Key: r.key, Now: time.Now()})
			if err != nil || got.Status != idemstore.StatusCompleted {
				t.Errorf("%s: record of %s %s (%v), want COMPLETED", ns, r.key, got.Status, err)
			}
		}
	}
}
