package bench

import (
	"context"
	"testing"
	"time"
)

// TestSerialOrderBalanced checks the property the interleaving relies on:
// in the cycle, read cyclically, every ordered pair of distinct variants
// is adjacent exactly once, so every variant runs k-1 times per cycle.
func TestSerialOrderBalanced(t *testing.T) {
	if got := serialOrder(1); len(got) != 1 || got[0] != 0 {
		t.Fatalf("serialOrder(1) = %v, want [0]", got)
	}
	for k := 2; k <= 7; k++ {
		seq := serialOrder(k)
		if len(seq) != k*(k-1) {
			t.Fatalf("k=%d: %d elements, want %d", k, len(seq), k*(k-1))
		}
		pairs := map[[2]int]int{}
		for i, v := range seq {
			prev := seq[(i+len(seq)-1)%len(seq)]
			if v < 0 || v >= k || v == prev {
				t.Fatalf("k=%d: bad sequence %v", k, seq)
			}
			pairs[[2]int{prev, v}]++
		}
		if len(pairs) != k*(k-1) {
			t.Errorf("k=%d: %d distinct pairs in %v, want %d", k, len(pairs), seq, k*(k-1))
		}
	}
}

func TestSelfRatio(t *testing.T) {
	var d Dist
	for i := range 100 {
		d.Add(time.Duration(i+1) * time.Millisecond)
	}
	// Two halves of 1..100 ms: their medians are close, never below 1.
	if got := selfRatio(&d, 0.5); got < 1 || got > 1.5 {
		t.Errorf("selfRatio p50 = %v, want in [1, 1.5]", got)
	}
	var same Dist
	for range 10 {
		same.Add(time.Millisecond)
	}
	if got := selfRatio(&same, 0.99); got != 1 {
		t.Errorf("selfRatio of equal samples = %v, want 1", got)
	}
}

// TestMeasureBalanced checks that the shared loop both stores' benches run
// through keeps N samples per variant, discards the warm-up (telling the
// caller when it ends), and gives every variant every other one as a
// predecessor equally often.
func TestMeasureBalanced(t *testing.T) {
	const n, warmup = 30, 6
	var runs []string
	warmedAt := -1
	mk := func(name string) variant {
		return variant{name, func(context.Context) (time.Duration, error) {
			runs = append(runs, name)
			return time.Millisecond, nil
		}}
	}
	vs := []variant{mk("a"), mk("b"), mk("c"), mk("d")}
	cfg := DynamoConfig{N: n, Warmup: warmup}
	cfg.defaults()
	pr, err := measure(t.Context(), cfg, "p", vs, func() { warmedAt = len(runs) })
	if err != nil {
		t.Fatal(err)
	}
	// Four variants: a cycle of 12 runs, each variant 3 times; 6 warm-up
	// runs per variant take 2 cycles.
	if warmedAt != 24 {
		t.Errorf("warm-up ended after %d runs, want 24", warmedAt)
	}
	for _, v := range vs {
		if got := pr.Dists[v.name].N(); got != n {
			t.Errorf("%s: %d samples, want %d", v.name, got, n)
		}
		preds := pr.carry.by[v.name]
		for _, w := range vs {
			if w.name == v.name {
				continue
			}
			if got := preds[w.name].N(); got != n/3 {
				t.Errorf("%s after %s: %d samples, want %d", v.name, w.name, got, n/3)
			}
		}
	}
}
