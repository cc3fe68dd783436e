package emf_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/lambdaidem/go-lambdaidem/emf"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
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

// FuzzHook builds an invocation report from the input, a record from each
// pair of bytes (outcome, reason, flags, store calls, group, latency), and
// emits it by default and with WithAllMetrics: every line is valid EMF,
// the default lines are those of WithAllMetrics with exactly the zero
// counts left out (nothing else lost, nothing added), and the totals
// reconcile: Records = Processed + DuplicatesSkipped + DeadLettered +
// CompletionsUnrecorded + Failed.
func FuzzHook(f *testing.F) {
	f.Add([]byte{0, 0})
	f.Add([]byte{0, 0xff, 5, 1, 6, 2, 7, 3})
	f.Add([]byte{4, 0x10, 4, 0x21, 1, 0x42, 9, 0x83, 12, 0xff, 16, 0x07})
	f.Add([]byte{})
	outcomes := []lambdaidem.Outcome{
		lambdaidem.OutcomeProcessed, lambdaidem.OutcomeDuplicate, lambdaidem.OutcomeCachedDuplicate,
		lambdaidem.OutcomeLateReplay, lambdaidem.OutcomeDeadLetteredDuplicate, lambdaidem.OutcomeDeadLettered,
		lambdaidem.OutcomeUnrecorded, lambdaidem.OutcomeLeaseLost, lambdaidem.OutcomeFailed,
		lambdaidem.OutcomeConflict, lambdaidem.OutcomeInProgress, lambdaidem.OutcomeDeadLetterFailed,
		lambdaidem.OutcomeStoreError, lambdaidem.OutcomeNotStarted, lambdaidem.OutcomeSkippedGroup,
		lambdaidem.OutcomeMissingKey,
	}
	acked := map[lambdaidem.Outcome]bool{
		lambdaidem.OutcomeProcessed: true, lambdaidem.OutcomeDuplicate: true, lambdaidem.OutcomeCachedDuplicate: true,
		lambdaidem.OutcomeLateReplay: true, lambdaidem.OutcomeDeadLetteredDuplicate: true,
		lambdaidem.OutcomeDeadLettered: true, lambdaidem.OutcomeUnrecorded: true,
	}
	reasons := []lambdaidem.Reason{lambdaidem.ReasonPoison, lambdaidem.ReasonMaxAttempts, lambdaidem.ReasonKeyConflict, lambdaidem.ReasonMissingKey}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 600 {
			data = data[:600] // up to 300 records: latencies spread over events
		}
		r := &lambdaidem.InvocationReport{RequestID: "req"}
		for i := 0; i+1 < len(data); i += 2 {
			o, flags := outcomes[int(data[i])%len(outcomes)], data[i+1]
			rec := lambdaidem.RecordReport{Outcome: o, Acked: acked[o], StoreCalls: int(flags >> 5),
				HandlerRan: flags&1 != 0, Takeover: flags&2 != 0, HandlerDuration: time.Duration(flags) * 1_234_567}
			if flags&4 != 0 {
				rec.VisibilityErr = errors.New("denied")
			}
			if flags&8 != 0 {
				rec.StoreErrors = 1
			}
			if flags&16 != 0 {
				rec.MessageGroupID = []string{"acme", "globex"}[int(flags>>6)%2]
			}
			if o == lambdaidem.OutcomeDeadLettered {
				rec.Reason = reasons[int(flags>>5)%len(reasons)]
			}
			if !rec.Acked {
				r.Failed++
			}
			r.Records = append(r.Records, rec)
		}
		emit := func(all bool) [][]byte {
			var out bytes.Buffer
			opts := []emf.Option{emf.WithEmitter(emf.NewWriter(&out)), emf.WithClock(func() time.Time { return time.UnixMilli(1_700_000_000_000) }),
				emf.WithDimensions(emf.Dimension{Name: "FunctionName", Value: "fn"}), emf.WithTenantDimension()}
			if all {
				opts = append(opts, emf.WithAllMetrics())
			}
			emf.Hook(opts...)(r)
			return lines(t, out.Bytes())
		}
		compact, full := emit(false), emit(true)
		if len(r.Records) == 0 {
			if len(compact) != 0 {
				t.Fatalf("an invocation without records wrote %d lines", len(compact))
			}
			return
		}
		if len(compact) != len(full) {
			t.Fatalf("default wrote %d lines, WithAllMetrics %d", len(compact), len(full))
		}
		for i := range full {
			pf, pc := parse(t, full[i]), parse(t, compact[i])
			want := map[string][]float64{}
			for name, v := range pf.vals {
				if len(v) == 1 && v[0] == 0 && name != emf.MetricHandlerLatency {
					continue
				}
				want[name] = v
			}
			if diff := cmp.Diff(want, pc.vals); diff != "" {
				t.Fatalf("line %d: default values differ from all metrics less the zeros (-want +got):\n%s", i, diff)
			}
			if diff := cmp.Diff(pf.dims, pc.dims); diff != "" {
				t.Fatalf("line %d: dimensions differ (-all +default):\n%s", i, diff)
			}
		}
		c := parse(t, full[0]).vals
		one := func(name string) float64 { return c[name][0] }
		if one(emf.MetricRecords) != one(emf.MetricProcessed)+one(emf.MetricDuplicatesSkipped)+one(emf.MetricDeadLettered)+
			one(emf.MetricCompletionsUnrecorded)+one(emf.MetricFailed) {
			t.Fatalf("totals do not reconcile: %v", c)
		}
	})
}
