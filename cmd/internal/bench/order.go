package bench

import (
	"fmt"
	"io"
	"math/rand/v2"
	"time"
)

// The order variants run in. A variant that runs after another inherits
// what that one left behind: the Node harness finishing its turn (promise
// settling, garbage collection, writing its answer) while the next
// variants' requests are in flight, or DynamoDB Local still busy with the
// previous request's aftermath. Rotating one fixed cycle (k, k+1, …) kept
// every variant's predecessor the same in every iteration, so the variant
// after the JS floor paid for Node's tail in every sample. A fixed cycle
// in which every variant follows every other exactly once (an Eulerian
// circuit, the order until the Redis bench showed it) balances only the
// run right before: Node's tail lasts longer than one run, and in that
// cycle the first Go variant always had a Node variant two runs back where
// the second had a Go one. Identical code measured 1.08 × itself there.
//
// So each cycle runs every variant once, in a fresh random order drawn
// from a fixed seed: every variant has the same chance of any history,
// however far back what it inherits reaches, and a run can be repeated
// in the same order.

// orderSeed seeds the order of the cycles; fixed, so that two runs of the
// bench interleave alike.
const orderSeed = 0x1a3b_da1d

// cycleOrders returns the source of the cycles' orders: each call of the
// function it returns is a random permutation of 0..k-1.
func cycleOrders(k int) func() []int {
	rnd := rand.New(rand.NewPCG(orderSeed, uint64(k)))
	return func() []int { return rnd.Perm(k) }
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
