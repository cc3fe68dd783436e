package bench

import (
	"fmt"
	"io"
	"math/rand/v2"
	"time"
)

// Targets: the library's cost against its own floor (the bare requests of
// the same run, on the same DynamoDB Local), and first delivery against
// Powertools.
const (
	TargetFirstVsFloor      = 1.05
	TargetDuplicateVsFloor  = 1.05
	TargetBatchVsFloor      = 1.03
	TargetP99VsFloor        = 1.10
	TargetFirstVsPowertools = 0.5
)

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }

// floorOf names the variant a variant's ratio is taken against.
func floorOf(v string) string {
	switch v {
	case VariantLambdaidem, VariantFloor, VariantFloorTwin, VariantOptimistic, VariantOneTx, VariantBatched:
		return VariantFloor
	case VariantPowertools, VariantPowertoolsBare:
		return VariantPowertoolsBare
	case VariantRedisFloor:
		return VariantRedisFloor
	case VariantPowertoolsRedis, VariantPowertoolsRedisBare:
		return VariantPowertoolsRedisBare
	}
	return ""
}

// floorIn is floorOf within a path's results: on Redis, lambdaidem's floor
// is the store's scripts without the decorator.
func floorIn(p PathResult, v string) string {
	if _, ok := p.Dists[VariantRedisFloor]; ok && (v == VariantLambdaidem || v == VariantFloorTwin || v == VariantBatched || v == VariantOptimistic) {
		return VariantRedisFloor
	}
	return floorOf(v)
}

// WriteLatency writes the latency table as Markdown.
func (r *DynamoResult) WriteLatency(w io.Writer) {
	fmt.Fprintf(w, "| path | implementation | p50 ms | p99 ms | p50 × floor | p99 × floor |\n")
	fmt.Fprintf(w, "|---|---|---:|---:|---:|---:|\n")
	for _, p := range r.Paths {
		for i, v := range p.Variants {
			d := p.Dists[v]
			name := ""
			if i == 0 {
				name = p.Path
			}
			r50, r99 := "", ""
			if f, ok := p.Dists[floorIn(p, v)]; ok && f.N() > 0 {
				r50 = fmt.Sprintf("%.2f", ratio(d.P50(), f.P50()))
				r99 = fmt.Sprintf("%.2f", ratio(d.P99(), f.P99()))
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", name, v, ms(d.P50()), ms(d.P99()), r50, r99)
		}
	}
}

// Target is one checked target.
type Target struct {
	What     string
	Limit    float64
	Measured float64 // 0 when not measured
}

// Met reports whether the target was measured and met.
func (t Target) Met() bool { return t.Measured > 0 && t.Measured <= t.Limit }

// Targets returns the latency targets with what was measured: p50 and
// p99 of first delivery, duplicate and 10-record batch against their
// floors, and first delivery against Powertools.
func (r *DynamoResult) Targets() []Target {
	q := func(path, v string, p float64) time.Duration {
		pr := r.Path(path)
		if pr == nil || pr.Dists[v] == nil {
			return 0
		}
		return pr.Dists[v].Quantile(p)
	}
	vsFloor := func(path string, p float64) float64 {
		return ratio(q(path, VariantLambdaidem, p), q(path, VariantFloor, p))
	}
	// "No slower" can only be told apart down to the noise of the same
	// code measured against itself: the limit is 1.00 × or, when larger,
	// the batch path's A/A noise at that quantile.
	batched := func(p float64) Target {
		limit := max(TargetBatchedVsBatch, r.noise(PathBatch, p))
		return Target{fmt.Sprintf("10-record batch, WithBatchedWrites, p%.0f no slower than the same batch claimed one record at a time: ≤ %.2f × (1.00 ×, or the path's A/A noise when larger)", p*100, limit),
			limit, ratio(q(PathBatch, VariantBatched, p), q(PathBatch, VariantLambdaidem, p))}
	}
	if r.Store == "redis" {
		return []Target{
			{"first delivery p50 ≤ 1.10 × its floor (the store's two scripts)", TargetRedisVsFloor,
				ratio(q(PathFirst, VariantLambdaidem, 0.5), q(PathFirst, VariantRedisFloor, 0.5))},
			{"duplicate p50 ≤ 1.10 × its floor (the store's claim script)", TargetRedisVsFloor,
				ratio(q(PathDuplicate, VariantLambdaidem, 0.5), q(PathDuplicate, VariantRedisFloor, 0.5))},
			{"first delivery p50 ≤ 0.5 × Powertools (cache layer)", TargetRedisVsPowertools,
				ratio(q(PathFirst, VariantLambdaidem, 0.5), q(PathFirst, VariantPowertoolsRedis, 0.5))},
			{"duplicate p50 ≤ 0.5 × Powertools (cache layer)", TargetRedisVsPowertools,
				ratio(q(PathDuplicate, VariantLambdaidem, 0.5), q(PathDuplicate, VariantPowertoolsRedis, 0.5))},
			{"first delivery: p50 above its floor ≤ 0.5 × Powertools' p50 above its floor", TargetRedisVsPowertools,
				above(q(PathFirst, VariantLambdaidem, 0.5), q(PathFirst, VariantRedisFloor, 0.5),
					q(PathFirst, VariantPowertoolsRedis, 0.5), q(PathFirst, VariantPowertoolsRedisBare, 0.5))},
			{"transactional first delivery, WithOptimisticCommit, p50 ≤ 0.67 × lease mode's floor (the claim script, then the completion script with the effect)",
				TargetOptimisticVsFloor, ratio(q(PathTxFirst, VariantOptimistic, 0.5), q(PathTxFirst, VariantRedisFloor, 0.5))},
			batched(0.5), batched(0.99),
		}
	}
	return []Target{
		{"first delivery p50 ≤ 1.05 × its floor (two bare UpdateItems)", TargetFirstVsFloor, vsFloor(PathFirst, 0.5)},
		{"duplicate p50 ≤ 1.05 × its floor (one refused UpdateItem)", TargetDuplicateVsFloor, vsFloor(PathDuplicate, 0.5)},
		{"10-record batch p50 ≤ 1.03 × its bare concurrent floor", TargetBatchVsFloor, vsFloor(PathBatch, 0.5)},
		{"first delivery p99 ≤ 1.10 × its floor", TargetP99VsFloor, vsFloor(PathFirst, 0.99)},
		{"duplicate p99 ≤ 1.10 × its floor", TargetP99VsFloor, vsFloor(PathDuplicate, 0.99)},
		{"10-record batch p99 ≤ 1.10 × its floor", TargetP99VsFloor, vsFloor(PathBatch, 0.99)},
		{"first delivery p50 ≤ 0.5 × Powertools", TargetFirstVsPowertools,
			ratio(q(PathFirst, VariantLambdaidem, 0.5), q(PathFirst, VariantPowertools, 0.5))},
		{"transactional first delivery, WithOptimisticCommit, p50 ≤ 0.67 × lease mode's floor (a bare claim, then the bare transaction)",
			TargetOptimisticVsFloor, ratio(q(PathTxFirst, VariantOptimistic, 0.5), q(PathTxFirst, VariantFloor, 0.5))},
		batched(0.5), batched(0.99),
	}
}

// noise is the A/A noise of path at quantile p, as WriteTargets prints
// it: the larger of its floor's random halves and its twin over its floor
// (1 when neither was measured).
func (r *DynamoResult) noise(path string, p float64) float64 {
	n := 1.0
	pr := r.Path(path)
	if pr == nil {
		return n
	}
	f := pr.Dists[floorIn(*pr, VariantLambdaidem)]
	if f == nil || f.N() < 2 {
		return n
	}
	n = max(n, selfRatio(f, p))
	if tw := pr.Dists[VariantFloorTwin]; tw != nil && tw.N() > 0 {
		n = max(n, ratio(tw.Quantile(p), f.Quantile(p)))
	}
	return n
}

// above is what a costs above its floor af, over what b costs above its
// floor bf: the libraries' own costs, each without the round trips it
// cannot avoid. A lambdaidem at or below its floor measures as a tiny
// positive number, so that the target reads as met; 0 means not measured.
func above(a, af, b, bf time.Duration) float64 {
	if a == 0 || af == 0 || b == 0 || bf == 0 || b <= bf {
		return 0
	}
	return max(float64(a-af), 1) / float64(b-bf)
}

// WriteTargets writes the targets table, and lambdaidem/Powertools per path.
func (r *DynamoResult) WriteTargets(w io.Writer) {
	fmt.Fprintf(w, "| target | measured | met |\n|---|---:|---|\n")
	for _, t := range r.Targets() {
		m, met := "not measured", "—"
		if t.Measured > 0 {
			m = fmt.Sprintf("%.2f ×", t.Measured)
			met = "yes"
			if !t.Met() {
				met = fmt.Sprintf("**no** (%.0f%% over)", (t.Measured/t.Limit-1)*100)
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", t.What, m, met)
	}
	fmt.Fprintf(w, "\nThe noise a gate must sit above (A/A comparisons): each Go floor against itself, its samples split at random into two halves (larger half over smaller); and, where the floor ran twice as two variants of their own, the twin over the floor, which also shows any bias of the order the variants ran in.\n\n")
	fmt.Fprintf(w, "| path | comparison | p50 | p99 |\n|---|---|---:|---:|\n")
	for _, p := range r.Paths {
		f := p.Dists[floorIn(p, VariantLambdaidem)]
		if f == nil || f.N() < 2 {
			continue
		}
		fmt.Fprintf(w, "| %s | floor's random halves | %.2f | %.2f |\n", p.Path, selfRatio(f, 0.5), selfRatio(f, 0.99))
		if tw := p.Dists[VariantFloorTwin]; tw != nil && tw.N() > 0 {
			fmt.Fprintf(w, "| %s | twin / floor | %.2f | %.2f |\n", p.Path, ratio(tw.P50(), f.P50()), ratio(tw.P99(), f.P99()))
		}
	}
	if r.NodeVersion == "" {
		return
	}
	fmt.Fprintf(w, "\n| path | lambdaidem / Powertools, p50 | p99 |\n|---|---:|---:|\n")
	for _, p := range r.Paths {
		a, pt := p.Dists[VariantLambdaidem], p.Dists[VariantPowertools]
		if pt == nil {
			pt = p.Dists[VariantPowertoolsRedis]
		}
		if a == nil || pt == nil {
			continue
		}
		fmt.Fprintf(w, "| %s | %.2f | %.2f |\n", p.Path, ratio(a.P50(), pt.P50()), ratio(a.P99(), pt.P99()))
	}
}

// WriteRequests writes the requests-per-message table.
func (r *DynamoResult) WriteRequests(w io.Writer) {
	what := "requests / message"
	if r.Store == "redis" {
		what = "round trips / message"
	}
	fmt.Fprintf(w, "| implementation | path | %s | by operation | target | write units / message |\n|---|---|---:|---|---|---:|\n", what)
	for _, row := range r.Requests {
		want := ""
		if row.Want >= 0 {
			want = num(row.Want)
			if row.PerMessage() == row.Want {
				want += " ✓"
			} else {
				want += " **missed**"
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", row.Impl, row.Path, num(row.PerMessage()), row.OpsText(), want, row.UnitsPerMessage())
	}
}

// selfRatio splits d's samples at random (a fixed seed) into two halves
// and returns the ratio of their q-quantiles, the larger over the smaller:
// how far apart two measurements of the same thing land in the same run.
// The split is random, not alternate: in an order balanced cycle by cycle a
// variant's alternate samples can all follow the same kind of variant.
func selfRatio(d *Dist, q float64) float64 {
	var a, b Dist
	rnd := rand.New(rand.NewPCG(15, 15))
	for _, v := range d.Samples {
		if rnd.IntN(2) == 0 {
			a.Add(v)
		} else {
			b.Add(v)
		}
	}
	x, y := a.Quantile(q), b.Quantile(q)
	if x < y {
		x, y = y, x
	}
	return ratio(x, y)
}
