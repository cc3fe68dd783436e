package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCycleOrdersArePermutations checks that every cycle runs every
// variant exactly once, and that the orders vary and repeat run to run.
func TestCycleOrdersArePermutations(t *testing.T) {
	for k := 1; k <= 7; k++ {
		next, again := cycleOrders(k), cycleOrders(k)
		distinct := map[string]bool{}
		for range 50 {
			perm := next()
			seen := make([]bool, k)
			for _, v := range perm {
				if v < 0 || v >= k || seen[v] {
					t.Fatalf("k=%d: %v is not a permutation", k, perm)
				}
				seen[v] = true
			}
			if len(perm) != k {
				t.Fatalf("k=%d: %v has %d elements", k, perm, len(perm))
			}
			if rep := again(); !slices.Equal(perm, rep) {
				t.Fatalf("k=%d: the same seed gave %v, then %v", k, perm, rep)
			}
			distinct[fmt.Sprint(perm)] = true
		}
		if k >= 3 && len(distinct) < 3 {
			t.Errorf("k=%d: only %d distinct orders in 50 cycles", k, len(distinct))
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
// predecessor about equally often.
func TestMeasureBalanced(t *testing.T) {
	const n, warmup = 3000, 6
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
	// Four variants, each once a cycle: 6 warm-up runs each are 24 runs.
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
			// 5/16 of the samples in expectation: v runs first in a quarter
			// of the cycles, after the previous cycle's last variant (w a
			// quarter of the time), and later in the rest, after one of the
			// three others.
			if got, want := preds[w.name].N(), n*5/16; got < want*9/10 || got > want*11/10 {
				t.Errorf("%s after %s: %d samples, want %d ± 10%%", v.name, w.name, got, want)
			}
		}
	}
}

// TestMeasureUnbiasedByLongCarryOver runs two identical variants beside
// two that slow down the next two runs (as the Node harness finishing its
// turn does), on durations computed from the order alone. An order that
// balances only who runs right before whom still lets one of the twins
// follow a slow variant two runs back more often; the twins must come out
// equal.
func TestMeasureUnbiasedByLongCarryOver(t *testing.T) {
	var hist []string
	slow := func(back int) bool {
		return len(hist) >= back && strings.HasPrefix(hist[len(hist)-back], "node")
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	mk := func(name string) variant {
		return variant{name, func(context.Context) (time.Duration, error) {
			d := 100.0 * (0.9 + 0.2*rnd.Float64())
			if slow(1) {
				d *= 1.4
			}
			if slow(2) {
				d *= 1.3
			}
			hist = append(hist, name)
			return time.Duration(d * float64(time.Microsecond)), nil
		}}
	}
	vs := []variant{mk("twin-a"), mk("twin-b"), mk("node-1"), mk("node-2")}
	cfg := DynamoConfig{N: 3000, Warmup: 30}
	cfg.defaults()
	pr, err := measure(t.Context(), cfg, "p", vs, nil)
	if err != nil {
		t.Fatal(err)
	}
	mean := func(d *Dist) float64 {
		var s time.Duration
		for _, v := range d.Samples {
			s += v
		}
		return float64(s) / float64(len(d.Samples))
	}
	a, b := pr.Dists["twin-a"], pr.Dists["twin-b"]
	if r := mean(a) / mean(b); r < 0.98 || r > 1.02 {
		t.Errorf("twins' means differ: %.3f (a %.1f µs, b %.1f µs)", r, mean(a)/1e3, mean(b)/1e3)
	}
	if r := ratio(a.P50(), b.P50()); r < 0.97 || r > 1.03 {
		t.Errorf("twins' p50s differ: %.3f (a %s, b %s)", r, a.P50(), b.P50())
	}
}

// TestAbove checks the libraries' own costs are compared without their
// floors, and that what cannot be measured reads as not measured.
func TestAbove(t *testing.T) {
	us := time.Microsecond
	if got := above(190*us, 180*us, 310*us, 210*us); got < 0.099 || got > 0.101 {
		t.Errorf("above = %v, want 0.1 (10 µs over 100 µs)", got)
	}
	if got := above(170*us, 180*us, 310*us, 210*us); got <= 0 || got > 0.001 {
		t.Errorf("below its floor: above = %v, want a tiny positive ratio", got)
	}
	if got := above(190*us, 180*us, 200*us, 210*us); got != 0 {
		t.Errorf("Powertools at its floor: above = %v, want 0 (not measured)", got)
	}
}

// TestBatchedTargetNoise: the batched-writes target's limit is 1.00 × or
// the batch path's A/A noise when larger, so a batched batch level with
// one at a time within the noise meets it, and one slower than the noise
// does not.
func TestBatchedTargetNoise(t *testing.T) {
	constant := func(ms float64) *Dist {
		var d Dist
		for range 100 {
			d.Add(time.Duration(ms * float64(time.Millisecond)))
		}
		return &d
	}
	result := func(batched, twin float64) *DynamoResult {
		return &DynamoResult{Store: "dynamodb", Paths: []PathResult{{Path: PathBatch, Dists: map[string]*Dist{
			VariantLambdaidem: constant(10), VariantBatched: constant(batched),
			VariantFloor: constant(10), VariantFloorTwin: constant(twin),
		}}}}
	}
	target := func(r *DynamoResult) Target {
		for _, tg := range r.Targets() {
			if strings.Contains(tg.What, "WithBatchedWrites, p50") {
				return tg
			}
		}
		t.Fatal("no batched p50 target")
		return Target{}
	}
	for _, c := range []struct {
		batched, twin, limit float64
		met                  bool
	}{
		{9, 10, 1.00, true},     // faster
		{10.3, 10, 1.00, false}, // slower, and no noise to hide in
		{10.3, 10.5, 1.05, true},
		{10.8, 10.5, 1.05, false},
	} {
		tg := target(result(c.batched, c.twin))
		if tg.Limit != c.limit || tg.Met() != c.met {
			t.Errorf("batched %.1f ms, twin %.1f ms: limit %.2f, met %v; want %.2f, %v", c.batched, c.twin, tg.Limit, tg.Met(), c.limit, c.met)
		}
	}
}
