package emf_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lambdaidem/go-lambdaidem/emf"
)

// FuzzEncode encodes sets with arbitrary names and values: either Encode
// refuses the set with a named error, or every line is one JSON object on
// one line, within the size limit, whose members are exactly the set's
// dimensions, that line's metrics and the properties (none lost to another
// of the same encoded name), and the lines together carry every value once.
func FuzzEncode(f *testing.F) {
	f.Add("lambdaidem", "Namespace", "orders", "Processed", "Count", 1.0, 2, "requestId", "r-1", "version", "v1")
	f.Add("AWS/Lambda", ":x", "", "m", "Bogus", math.Inf(1), 0, "", "", "_aws", "")
	f.Add("ns", "d", "v", "m", "", 0.5, 250, "\xff", "a", "\xfe", "b")
	f.Add("ns", "d", "v", "m", "Milliseconds", -1e308, 1000, "\ufffd", "a", "\xff", "b")
	f.Add("ns\n", "d\x7f", "v\u00e9", "m", "", 1.0, 1, "p", "\x00\u2028", "q", strings.Repeat("x", 300000))
	f.Fuzz(func(t *testing.T, ns, dim, dimValue, metric, unit string, v float64, n int, p1, v1, p2, v2 string) {
		n = min(max(n, 0), 1000)
		values := make([]float64, n)
		for i := range values {
			values[i] = v + float64(i)
		}
		set := emf.MetricSet{
			Namespace:  ns,
			Dimensions: []emf.Dimension{{Name: dim, Value: dimValue}},
			Metrics:    []emf.Metric{{Name: metric, Unit: emf.Unit(unit), Values: values}},
			Properties: map[string]any{p1: v1, p2: v2},
			Timestamp:  time.UnixMilli(1_700_000_000_000),
		}
		lines, err := emf.Encode(set)
		if err != nil {
			if !errors.Is(err, emf.ErrInvalid) && !errors.Is(err, emf.ErrTooManyDimensions) && !errors.Is(err, emf.ErrEventTooLarge) {
				t.Fatalf("Encode: unnamed error %v", err)
			}
			return
		}
		got := 0
		for _, line := range lines {
			if len(line) > emf.MaxEventBytes+1 || !strings.HasSuffix(string(line), "}\n") || strings.Count(string(line), "\n") != 1 {
				t.Fatalf("line of %d bytes is not one JSON line within the limit: %.200q", len(line), line)
			}
			var doc map[string]any
			if err := json.Unmarshal(line, &doc); err != nil {
				t.Fatalf("line is not JSON: %v: %.200q", err, line)
			}
			if want := 1 + 1 + 1 + len(set.Properties); len(doc) != want {
				t.Fatalf("line has %d members, want %d (a name encoded like another): %.300q", len(doc), want, line)
			}
			switch x := doc[metric].(type) {
			case float64:
				got++
			case []any:
				got += len(x)
			default:
				t.Fatalf("metric %q is %T in %.200q", metric, doc[metric], line)
			}
		}
		if got != n {
			t.Fatalf("%d values encoded, want %d", got, n)
		}
	})
}
