package bench

import (
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
