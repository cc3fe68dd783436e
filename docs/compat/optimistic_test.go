package compat

import (
	"context"

	"testing"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

func init() {
	features = append(features, feature{
		name:    "optimistic commit",
		enable:  "`WithOptimisticCommit()`, effects as completion writes",
		sqsOnly: true,
		option:  lambdaidem.WithOptimisticCommit,
		run:     runOptimistic,
		kit:     kitOptimistic,
		kitHow:  "the option, on `NewWithStore(memstore.New(memstore.WithCompletionWrites(db)), ...)`; `DeliverTwice`",
		sim:     "Optimistic",
	})
}

// runOptimistic: a first delivery commits its effect with one write; a
// duplicate runs (no claim turned it away) and its commit is refused, its
// effect dropped; another payload is a key conflict.
func runOptimistic(t *testing.T, c *cellEnv) {
	if c.effects == nil {
		t.Skip("the store commits no completion writes here")
	}
	ctx := t.Context()
	h := c.handler(t, func(ctx context.Context, key, payload string) (string, error) {
		return "done", lambdaidem.AddCompletionWrite(ctx, c.effects.insert(c.ns, "fx-"+key, payload))
	}, c.effects.declare, lambdaidem.WithOptimisticCommit())
	want(t, "first delivery", h(ctx, "k1", "a"), fresh, true)
	want(t, "a duplicate delivery", h(ctx, "k1", "a"), replay, true)
	want(t, "another payload under the key", h(ctx, "k1", "b"), conflict, true)
	v, err := c.effects.read(ctx, c.ns, "fx-k1")
	if err != nil {
		t.Fatal(err)
	}
	if v != "a" {
		t.Fatalf("effect = %q, want the first delivery's alone (a)", v)
	}
}
