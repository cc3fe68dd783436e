package bench

import (
	"slices"
	"time"
)

// Dist is a latency distribution: the samples of one variant of one path.
type Dist struct {
	// Samples are the measured latencies, in the order they were taken.
	Samples []time.Duration
}

// Add records one sample.
func (d *Dist) Add(v time.Duration) { d.Samples = append(d.Samples, v) }

// N is the number of samples.
func (d Dist) N() int { return len(d.Samples) }

// Quantile returns the q-quantile (0 < q ≤ 1) by the nearest-rank method:
// the smallest sample with at least q of the samples at or below it. It is
// 0 without samples.
func (d Dist) Quantile(q float64) time.Duration {
	if len(d.Samples) == 0 {
		return 0
	}
	s := slices.Clone(d.Samples)
	slices.Sort(s)
	rank := int(q*float64(len(s)) + 0.999999999)
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}

// P50 is the median.
func (d Dist) P50() time.Duration { return d.Quantile(0.50) }

// P99 is the 99th percentile.
func (d Dist) P99() time.Duration { return d.Quantile(0.99) }

// ratio is a/b, or 0 when b is 0.
func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
