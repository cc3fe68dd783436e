package bench

import (
	"fmt"
	"io"
	"time"
)

// Targets of issue 7 (p50; p99 is reported, not gated).
const (
	TargetFirstVsFloor      = 1.15
	TargetFirstVsPowertools = 0.5
	TargetBatchVsFloor      = 1.15
)

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }

// floorOf names the variant a variant's ratio is taken against.
func floorOf(v string) string {
	switch v {
	case VariantLambdaidem, VariantFloor:
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
	if _, ok := p.Dists[VariantRedisFloor]; ok && v == VariantLambdaidem {
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

// Targets returns the latency targets of issue 7 with what was measured.
func (r *DynamoResult) Targets() []Target {
	p50 := func(path, v string) time.Duration {
		p := r.Path(path)
		if p == nil || p.Dists[v] == nil {
			return 0
		}
		return p.Dists[v].P50()
	}
	if r.Store == "redis" {
		return []Target{
			{"first delivery p50 ≤ 1.10 × its floor (the store's two scripts)", TargetRedisVsFloor,
				ratio(p50(PathFirst, VariantLambdaidem), p50(PathFirst, VariantRedisFloor))},
			{"duplicate p50 ≤ 1.10 × its floor (the store's claim script)", TargetRedisVsFloor,
				ratio(p50(PathDuplicate, VariantLambdaidem), p50(PathDuplicate, VariantRedisFloor))},
			{"first delivery p50 ≤ 0.5 × Powertools (cache layer)", TargetRedisVsPowertools,
				ratio(p50(PathFirst, VariantLambdaidem), p50(PathFirst, VariantPowertoolsRedis))},
			{"duplicate p50 ≤ 0.5 × Powertools (cache layer)", TargetRedisVsPowertools,
				ratio(p50(PathDuplicate, VariantLambdaidem), p50(PathDuplicate, VariantPowertoolsRedis))},
		}
	}
	return []Target{
		{"first delivery p50 ≤ 1.15 × its floor (two bare UpdateItems)", TargetFirstVsFloor,
			ratio(p50(PathFirst, VariantLambdaidem), p50(PathFirst, VariantFloor))},
		{"first delivery p50 ≤ 0.5 × Powertools", TargetFirstVsPowertools,
			ratio(p50(PathFirst, VariantLambdaidem), p50(PathFirst, VariantPowertools))},
		{"10-record batch p50 ≤ 1.15 × its bare concurrent floor", TargetBatchVsFloor,
			ratio(p50(PathBatch, VariantLambdaidem), p50(PathBatch, VariantFloor))},
	}
}

// WriteTargets writes the targets table, and lambdaidem/Powertools per path.
func (r *DynamoResult) WriteTargets(w io.Writer) {
	fmt.Fprintf(w, "| target (p50) | measured | met |\n|---|---:|---|\n")
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
	fmt.Fprintf(w, "| implementation | path | requests / message | by operation | target |\n|---|---|---:|---|---|\n")
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
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", row.Impl, row.Path, num(row.PerMessage()), row.OpsText(), want)
	}
}
