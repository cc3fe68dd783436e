package emf_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/google/go-cmp/cmp"
	"github.com/lambdaidem/go-lambdaidem/emf"
)

var at = time.UnixMilli(1700000000123)

func TestEnvelope(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := emf.NewWriter(&out).Emit(context.Background(), emf.MetricSet{
		Namespace:  "shop",
		Dimensions: []emf.Dimension{{"FunctionName", "orders"}, {"Stage", "prod"}},
		Metrics: []emf.Metric{
			{Name: "Records", Unit: emf.UnitCount, Values: []float64{3}},
			{Name: "Latency", Unit: emf.UnitMilliseconds, Values: []float64{1.5, 20}},
			{Name: "Ratio", Values: []float64{0.25}},
		},
		Properties: map[string]any{"version": "1.2.3", "cold": true},
		Timestamp:  at,
	})
	if err != nil {
		t.Fatal(err)
	}
	ls := lines(t, out.Bytes())
	if len(ls) != 1 {
		t.Fatalf("%d lines, want 1", len(ls))
	}
	e := parse(t, ls[0])
	want := document{AWS: metadata{
		Timestamp: at.UnixMilli(),
		CloudWatchMetrics: []directive{{
			Namespace:  "shop",
			Dimensions: [][]string{{"FunctionName", "Stage"}},
			Metrics:    []definition{{Name: "Records", Unit: "Count"}, {Name: "Latency", Unit: "Milliseconds"}, {Name: "Ratio"}},
		}},
	}}
	if diff := cmp.Diff(want, e.doc); diff != "" {
		t.Fatalf("envelope (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string][]float64{"Records": {3}, "Latency": {1.5, 20}, "Ratio": {0.25}}, e.vals); diff != "" {
		t.Fatalf("values (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"FunctionName": "orders", "Stage": "prod"}, e.dims); diff != "" {
		t.Fatalf("dimensions (-want +got):\n%s", diff)
	}
	if string(e.root["version"]) != `"1.2.3"` || string(e.root["cold"]) != "true" {
		t.Fatalf("properties: version=%s cold=%s", e.root["version"], e.root["cold"])
	}
	// The envelope comes first, so a human reading the log sees what the
	// line is.
	if !bytes.HasPrefix(ls[0], []byte(`{"_aws":{"Timestamp":1700000000123,`)) {
		t.Fatalf("line does not start with the envelope: %s", ls[0])
	}
}

func TestNoDimensionsIsOneEmptyDimensionSet(t *testing.T) {
	t.Parallel()
	ls, err := emf.Encode(emf.MetricSet{Namespace: "n", Metrics: []emf.Metric{{Name: "M", Values: []float64{1}}}, Timestamp: at})
	if err != nil {
		t.Fatal(err)
	}
	e := parse(t, ls[0])
	if diff := cmp.Diff([][]string{{}}, e.doc.AWS.CloudWatchMetrics[0].Dimensions); diff != "" {
		t.Fatalf("dimensions (-want +got):\n%s", diff)
	}
}

// collect merges the events of one split set: every metric's values in
// order, checking dimensions and properties are repeated on each event.
func collect(t *testing.T, ls [][]byte, dims map[string]string, prop string) map[string][]float64 {
	t.Helper()
	got := map[string][]float64{}
	for _, l := range ls {
		e := parse(t, l)
		if diff := cmp.Diff(dims, e.dims); diff != "" {
			t.Fatalf("dimensions not repeated (-want +got):\n%s", diff)
		}
		if prop != "" {
			if _, ok := e.root[prop]; !ok {
				t.Fatalf("property %s not repeated", prop)
			}
		}
		for name, v := range e.vals {
			got[name] = append(got[name], v...)
		}
	}
	return got
}

func TestMoreThan100MetricsSplitIntoEvents(t *testing.T) {
	t.Parallel()
	set := emf.MetricSet{
		Namespace:  "n",
		Dimensions: []emf.Dimension{{"D", "d"}},
		Properties: map[string]any{"p": 1},
		Timestamp:  at,
	}
	want := map[string][]float64{}
	for i := range 250 {
		name := fmt.Sprintf("M%03d", i)
		set.Metrics = append(set.Metrics, emf.Metric{Name: name, Unit: emf.UnitCount, Values: []float64{float64(i)}})
		want[name] = []float64{float64(i)}
	}
	ls, err := emf.Encode(set)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for _, l := range ls {
		sizes = append(sizes, len(parse(t, l).defs))
	}
	if diff := cmp.Diff([]int{100, 100, 50}, sizes); diff != "" {
		t.Fatalf("metrics per event (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, collect(t, ls, map[string]string{"D": "d"}, "p")); diff != "" {
		t.Fatalf("values (-want +got):\n%s", diff)
	}
}

func TestMoreThan100ValuesSpreadOverEvents(t *testing.T) {
	t.Parallel()
	long := make([]float64, 250)
	for i := range long {
		long[i] = float64(i)
	}
	set := emf.MetricSet{Namespace: "n", Timestamp: at, Metrics: []emf.Metric{
		{Name: "Latency", Unit: emf.UnitMilliseconds, Values: long},
		{Name: "Records", Unit: emf.UnitCount, Values: []float64{250}},
	}}
	ls, err := emf.Encode(set)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 3 {
		t.Fatalf("%d events, want 3", len(ls))
	}
	// Records appears once: a count split over events must not be summed
	// twice.
	want := map[string][]float64{"Latency": long, "Records": {250}}
	if diff := cmp.Diff(want, collect(t, ls, map[string]string{}, "")); diff != "" {
		t.Fatalf("values (-want +got):\n%s", diff)
	}
}

func TestMetricsAndValuesBeyondBothLimits(t *testing.T) {
	t.Parallel()
	set := emf.MetricSet{Namespace: "n", Timestamp: at}
	want := map[string][]float64{}
	for i := range 120 {
		name := fmt.Sprintf("M%03d", i)
		vals := make([]float64, 1+i*2) // 1 to 239 values
		for j := range vals {
			vals[j] = float64(i*1000 + j)
		}
		set.Metrics = append(set.Metrics, emf.Metric{Name: name, Values: vals})
		want[name] = vals
	}
	ls, err := emf.Encode(set)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, collect(t, ls, map[string]string{}, "")); diff != "" {
		t.Fatalf("values (-want +got):\n%s", diff)
	}
}

func TestMoreThan30DimensionsIsAnError(t *testing.T) {
	t.Parallel()
	dims := func(n int) []emf.Dimension {
		var d []emf.Dimension
		for i := range n {
			d = append(d, emf.Dimension{Name: fmt.Sprintf("D%02d", i), Value: "v"})
		}
		return d
	}
	set := emf.MetricSet{Namespace: "n", Timestamp: at, Metrics: []emf.Metric{{Name: "M", Values: []float64{1}}}}
	set.Dimensions = dims(emf.MaxDimensions)
	ls, err := emf.Encode(set)
	if err != nil {
		t.Fatalf("30 dimensions: %v", err)
	}
	if got := len(parse(t, ls[0]).dims); got != 30 {
		t.Fatalf("%d dimensions written, want 30", got)
	}

	set.Dimensions = dims(emf.MaxDimensions + 1)
	var out bytes.Buffer
	err = emf.NewWriter(&out).Emit(context.Background(), set)
	if !errors.Is(err, emf.ErrTooManyDimensions) {
		t.Fatalf("31 dimensions: err = %v, want ErrTooManyDimensions", err)
	}
	if out.Len() != 0 {
		t.Fatalf("a refused set wrote %q", out.String())
	}
}

func TestOneMegabyteBound(t *testing.T) {
	t.Parallel()
	set := func(prop int) emf.MetricSet {
		return emf.MetricSet{
			Namespace:  "n",
			Timestamp:  at,
			Metrics:    []emf.Metric{{Name: "M", Unit: emf.UnitCount, Values: []float64{1}}},
			Properties: map[string]any{"blob": strings.Repeat("x", prop)},
		}
	}
	// Find the envelope's size without the blob, then fill to the byte.
	base, err := emf.Encode(set(0))
	if err != nil {
		t.Fatal(err)
	}
	fill := emf.MaxEventBytes - (len(base[0]) - 1)
	ls, err := emf.Encode(set(fill))
	if err != nil {
		t.Fatalf("event of exactly %d bytes: %v", emf.MaxEventBytes, err)
	}
	if got := len(ls[0]) - 1; got != emf.MaxEventBytes {
		t.Fatalf("event of %d bytes, want %d", got, emf.MaxEventBytes)
	}
	parse(t, ls[0])

	var out bytes.Buffer
	err = emf.NewWriter(&out).Emit(context.Background(), set(fill+1))
	if !errors.Is(err, emf.ErrEventTooLarge) {
		t.Fatalf("one byte over: err = %v, want ErrEventTooLarge", err)
	}
	if out.Len() != 0 {
		t.Fatal("an oversized event was written")
	}
}

// The largest set the other limits allow still fits in one event, which
// is why metrics never need a size-based split.
func TestLargestMetricsFitInOneEvent(t *testing.T) {
	t.Parallel()
	set := emf.MetricSet{Namespace: strings.Repeat("n", 255), Timestamp: at}
	for i := range emf.MaxDimensions {
		set.Dimensions = append(set.Dimensions, emf.Dimension{
			Name:  fmt.Sprintf("%02d", i) + strings.Repeat("d", 253),
			Value: strings.Repeat("v", 1024),
		})
	}
	vals := make([]float64, emf.MaxValues)
	for i := range vals {
		vals[i] = -1.2345678901234567e-300
	}
	for i := range emf.MaxMetrics {
		set.Metrics = append(set.Metrics, emf.Metric{
			Name:   fmt.Sprintf("%03d", i) + strings.Repeat("m", 252),
			Unit:   emf.UnitTerabitsPerSecond,
			Values: vals,
		})
	}
	ls, err := emf.Encode(set)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 1 {
		t.Fatalf("%d events, want 1", len(ls))
	}
	parse(t, ls[0])
}

func TestInvalidSetsAreRefused(t *testing.T) {
	t.Parallel()
	one := []emf.Metric{{Name: "M", Values: []float64{1}}}
	for _, tc := range []struct {
		name string
		set  emf.MetricSet
	}{
		{"empty namespace", emf.MetricSet{Metrics: one}},
		{"AWS namespace", emf.MetricSet{Namespace: "AWS/Lambda", Metrics: one}},
		{"long namespace", emf.MetricSet{Namespace: strings.Repeat("n", 256), Metrics: one}},
		{"empty dimension value", emf.MetricSet{Namespace: "n", Metrics: one, Dimensions: []emf.Dimension{{"D", ""}}}},
		{"blank dimension value", emf.MetricSet{Namespace: "n", Metrics: one, Dimensions: []emf.Dimension{{"D", "  "}}}},
		{"non-ASCII dimension value", emf.MetricSet{Namespace: "n", Metrics: one, Dimensions: []emf.Dimension{{"D", "café"}}}},
		{"control character", emf.MetricSet{Namespace: "n", Metrics: one, Dimensions: []emf.Dimension{{"D", "a\nb"}}}},
		{"long dimension value", emf.MetricSet{Namespace: "n", Metrics: one, Dimensions: []emf.Dimension{{"D", strings.Repeat("v", 1025)}}}},
		{"colon dimension name", emf.MetricSet{Namespace: "n", Metrics: one, Dimensions: []emf.Dimension{{":D", "v"}}}},
		{"duplicate dimension", emf.MetricSet{Namespace: "n", Metrics: one, Dimensions: []emf.Dimension{{"D", "a"}, {"D", "b"}}}},
		{"dimension named like a metric", emf.MetricSet{Namespace: "n", Metrics: one, Dimensions: []emf.Dimension{{"M", "a"}}}},
		{"duplicate metric", emf.MetricSet{Namespace: "n", Metrics: append(one, one...)}},
		{"long metric name", emf.MetricSet{Namespace: "n", Metrics: []emf.Metric{{Name: strings.Repeat("m", 256), Values: []float64{1}}}}},
		{"unknown unit", emf.MetricSet{Namespace: "n", Metrics: []emf.Metric{{Name: "M", Unit: "Parsecs", Values: []float64{1}}}}},
		{"no values", emf.MetricSet{Namespace: "n", Metrics: []emf.Metric{{Name: "M"}}}},
		{"NaN", emf.MetricSet{Namespace: "n", Metrics: []emf.Metric{{Name: "M", Values: []float64{math.NaN()}}}}},
		{"infinity", emf.MetricSet{Namespace: "n", Metrics: []emf.Metric{{Name: "M", Values: []float64{1, math.Inf(1)}}}}},
		{"property _aws", emf.MetricSet{Namespace: "n", Metrics: one, Properties: map[string]any{"_aws": 1}}},
		{"property named like a metric", emf.MetricSet{Namespace: "n", Metrics: one, Properties: map[string]any{"M": 1}}},
		{"unencodable property", emf.MetricSet{Namespace: "n", Metrics: one, Properties: map[string]any{"f": func() {}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			tc.set.Timestamp = at
			err := emf.NewWriter(&out).Emit(context.Background(), tc.set)
			if !errors.Is(err, emf.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if out.Len() != 0 {
				t.Fatalf("a refused set wrote %q", out.String())
			}
		})
	}
}

func TestEncodeNeedsATimestamp(t *testing.T) {
	t.Parallel()
	_, err := emf.Encode(emf.MetricSet{Namespace: "n", Metrics: []emf.Metric{{Name: "M", Values: []float64{1}}}})
	if !errors.Is(err, emf.ErrInvalid) {
		t.Fatalf("err = %v, want ErrInvalid", err)
	}
}

func TestNoMetricsWritesNothing(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := emf.NewWriter(&out).Emit(context.Background(), emf.MetricSet{Namespace: "n"}); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 {
		t.Fatalf("wrote %q", out.String())
	}
}

func TestRequestIDFromLambdaContext(t *testing.T) {
	t.Parallel()
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
	set := emf.MetricSet{Namespace: "n", Timestamp: at, Metrics: []emf.Metric{{Name: "M", Values: []float64{1}}}}
	var out bytes.Buffer
	w := emf.NewWriter(&out)
	if err := w.Emit(ctx, set); err != nil {
		t.Fatal(err)
	}
	set.Properties = map[string]any{"requestId": "mine"}
	if err := w.Emit(ctx, set); err != nil {
		t.Fatal(err)
	}
	set.Properties = nil
	if err := w.Emit(context.Background(), set); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range lines(t, out.Bytes()) {
		got = append(got, string(parse(t, l).root["requestId"]))
	}
	if diff := cmp.Diff([]string{`"req-1"`, `"mine"`, ``}, got); diff != "" {
		t.Fatalf("requestId per event (-want +got):\n%s", diff)
	}
}

func TestZeroTimestampIsNow(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	before := time.Now().UnixMilli()
	if err := emf.NewWriter(&out).Emit(context.Background(), emf.MetricSet{Namespace: "n", Metrics: []emf.Metric{{Name: "M", Values: []float64{1}}}}); err != nil {
		t.Fatal(err)
	}
	after := time.Now().UnixMilli()
	ts := parse(t, out.Bytes()).doc.AWS.Timestamp
	if ts < before || ts > after {
		t.Fatalf("Timestamp %d outside [%d, %d]", ts, before, after)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("closed") }

func TestWriteErrorIsReturned(t *testing.T) {
	t.Parallel()
	err := emf.NewWriter(failingWriter{}).Emit(context.Background(), emf.MetricSet{Namespace: "n", Timestamp: at, Metrics: []emf.Metric{{Name: "M", Values: []float64{1}}}})
	if err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("err = %v, want the write error", err)
	}
}

// lockedBuffer lets the test read what concurrent emitters wrote.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func TestConcurrentEmitsNeverInterleave(t *testing.T) {
	t.Parallel()
	var out lockedBuffer
	w := emf.NewWriter(&out)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				// 150 metrics: two lines per Emit, which must stay adjacent
				// to nothing but whole lines.
				set := emf.MetricSet{Namespace: "n", Timestamp: at, Dimensions: []emf.Dimension{{"G", fmt.Sprint(g)}}}
				for m := range 150 {
					set.Metrics = append(set.Metrics, emf.Metric{Name: fmt.Sprintf("M%d", m), Values: []float64{float64(i)}})
				}
				if err := w.Emit(context.Background(), set); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	ls := lines(t, out.b.Bytes())
	if len(ls) != 8*20*2 {
		t.Fatalf("%d lines, want %d", len(ls), 8*20*2)
	}
	for _, l := range ls {
		parse(t, l)
	}
}
