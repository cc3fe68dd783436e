package bench

import (
	"fmt"
	"io"
	"time"
)

// The order variants run in. A variant that runs right after another
// inherits what that one left behind: the Node harness finishing its turn
// (promise settling, garbage collection, writing its answer) while the
// next variant's requests are in flight, or DynamoDB Local still busy with
// the previous request's aftermath. Rotating one fixed cycle (k, k+1, …)
// keeps every variant's predecessor the same in every iteration, so the
// variant after the JS floor paid for Node's tail in every sample.
//
// serialOrder balances that: it is a cycle through the variants in which
// every ordered pair of distinct variants (a then b) appears exactly once
// as neighbours, the last element wrapping around to the first: an
// Eulerian circuit of the complete directed graph on k vertices. Repeating
// it, every variant follows every other variant equally often, across the
// cycle's boundaries too, and runs k-1 times per cycle.

// serialOrder returns such a cycle for k variants: k(k-1) indices (one,
// 0, for k = 1).
func serialOrder(k int) []int {
	if k <= 1 {
		return []int{0}
	}
	// Hierholzer's algorithm; next[v] is the next unused successor of v.
	next := make([]int, k)
	for v := range next {
		next[v] = (v + 1) % k
	}
	used := make([]int, k) // edges used out of v
	stack, circuit := []int{0}, make([]int, 0, k*(k-1)+1)
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		if used[v] == k-1 {
			circuit = append(circuit, v)
			stack = stack[:len(stack)-1]
			continue
		}
		w := next[v]
		next[v] = (w + 1) % k
		if w == v {
			w = next[v]
			next[v] = (w + 1) % k
		}
		used[v]++
		stack = append(stack, w)
	}
	// circuit is reversed and closed (first = last): drop the repeat.
	out := make([]int, 0, len(circuit)-1)
	for i := len(circuit) - 1; i > 0; i-- {
		out = append(out, circuit[i])
	}
	return out
}

// carry records one variant's samples by the variant that ran just before
// it, so the table can show what the predecessor costs.
type carry struct {
	// by[v][prev] are v's samples taken right after prev ("" for the first
	// run of an iteration that followed nothing measured).
	by map[string]map[string]*Dist
}

func (c *carry) add(v, prev string, d time.Duration) {
	if c.by == nil {
		c.by = map[string]map[string]*Dist{}
	}
	m := c.by[v]
	if m == nil {
		m = map[string]*Dist{}
		c.by[v] = m
	}
	dd := m[prev]
	if dd == nil {
		dd = &Dist{}
		m[prev] = dd
	}
	dd.Add(d)
}

// isNode reports whether a variant runs in the Node harness.
func isNode(v string) bool {
	switch v {
	case VariantPowertools, VariantPowertoolsBare, VariantPowertoolsRedis, VariantPowertoolsRedisBare:
		return true
	}
	return false
}

// WriteCarryOver writes, for each Go variant of each path that had Node
// variants interleaved, its p50 after a Go variant and after a Node
// variant: the cost of the predecessor the interleaving balances out.
func (r *DynamoResult) WriteCarryOver(w io.Writer) {
	fmt.Fprintf(w, "| path | implementation | p50 ms after a Go variant (n) | p50 ms after a Node variant (n) | after Node / after Go |\n")
	fmt.Fprintf(w, "|---|---|---:|---:|---:|\n")
	for _, p := range r.Paths {
		for _, v := range p.Variants {
			if isNode(v) {
				continue
			}
			var goD, nodeD Dist
			for prev, d := range p.carry.by[v] {
				switch {
				case prev == "":
				case isNode(prev):
					nodeD.Samples = append(nodeD.Samples, d.Samples...)
				default:
					goD.Samples = append(goD.Samples, d.Samples...)
				}
			}
			if goD.N() == 0 || nodeD.N() == 0 {
				continue
			}
			fmt.Fprintf(w, "| %s | %s | %s (%d) | %s (%d) | %.2f |\n", p.Path, v,
				ms(goD.P50()), goD.N(), ms(nodeD.P50()), nodeD.N(), ratio(nodeD.P50(), goD.P50()))
		}
	}
}
