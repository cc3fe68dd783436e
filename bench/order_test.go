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
	// Halves 1,3,…,99 and 2,4,…,100: p50 49 and 50 ms.
	if got, want := selfRatio(&d, 0.5), 50.0/49.0; got != want {
		t.Errorf("selfRatio p50 = %v, want %v", got, want)
	}
}
