package emf_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/lambdaidem/go-lambdaidem/emf"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// nonZeroBy makes each metric of the hook count something: a record that
// is counted in it (and maybe in others).
var nonZeroBy = map[string]lambdaidem.RecordReport{
	emf.MetricRecords:               {Outcome: lambdaidem.OutcomeProcessed, Acked: true},
	emf.MetricHandlerRuns:           {Outcome: lambdaidem.OutcomeProcessed, Acked: true, HandlerRan: true},
	emf.MetricProcessed:             {Outcome: lambdaidem.OutcomeProcessed, Acked: true},
	emf.MetricDuplicatesSkipped:     {Outcome: lambdaidem.OutcomeCachedDuplicate, Acked: true},
	emf.MetricConflicts:             {Outcome: lambdaidem.OutcomeConflict},
	emf.MetricInProgressRejections:  {Outcome: lambdaidem.OutcomeInProgress},
	emf.MetricLeasesLost:            {Outcome: lambdaidem.OutcomeLeaseLost, HandlerRan: true},
	emf.MetricCompletionsUnrecorded: {Outcome: lambdaidem.OutcomeUnrecorded, Acked: true, HandlerRan: true},
	emf.MetricDeadLettered:          {Outcome: lambdaidem.OutcomeDeadLettered, Acked: true, Reason: lambdaidem.ReasonPoison},
	emf.MetricDeadLetterFailures:    {Outcome: lambdaidem.OutcomeDeadLetterFailed},
	emf.MetricStoreErrors:           {Outcome: lambdaidem.OutcomeStoreError},
	emf.MetricStoreRequests:         {Outcome: lambdaidem.OutcomeDuplicate, Acked: true, StoreCalls: 1},
	emf.MetricFailed:                {Outcome: lambdaidem.OutcomeFailed, HandlerRan: true},
	emf.MetricTakeovers:             {Outcome: lambdaidem.OutcomeProcessed, Acked: true, Takeover: true},
	emf.MetricHandlerErrors:         {Outcome: lambdaidem.OutcomeFailed, HandlerRan: true},
	emf.MetricNotStarted:            {Outcome: lambdaidem.OutcomeNotStarted},
	emf.MetricFIFOGroupSkipped:      {Outcome: lambdaidem.OutcomeSkippedGroup},
	emf.MetricMissingKeys:           {Outcome: lambdaidem.OutcomeMissingKey},
	emf.MetricVisibilityFailures:    {Outcome: lambdaidem.OutcomeFailed, HandlerRan: true, VisibilityErr: errors.New("AccessDenied")},
	emf.MetricHandlerLatency:        {Outcome: lambdaidem.OutcomeProcessed, Acked: true, HandlerRan: true, HandlerDuration: time.Millisecond},
}

// Every metric appears, with a value that is not zero, in the default
// (compact) event of an invocation where it counts something, under the
// dimensions the hook was given: template.yaml's alarms and dashboard and
// the table in README.md keep their data when zeros are left out.
func TestEveryMetricAppearsWheneverNotZero(t *testing.T) {
	t.Parallel()
	all := append(slices.Clone(countNames), emf.MetricHandlerLatency)
	for _, name := range all {
		rec, ok := nonZeroBy[name]
		if !ok {
			t.Errorf("nonZeroBy has no record that makes %s count", name)
			continue
		}
		var out bytes.Buffer
		emf.Hook(emf.WithEmitter(emf.NewWriter(&out)), emf.WithClock(func() time.Time { return at }),
			emf.WithDimensions(emf.Dimension{Name: emf.DimensionFunctionName, Value: "orders-fn"}),
		)(&lambdaidem.InvocationReport{Records: []lambdaidem.RecordReport{rec}, Failed: failed(rec)})
		e := parse(t, lines(t, out.Bytes())[0])
		if !cmp.Equal(e.dims, map[string]string{emf.DimensionFunctionName: "orders-fn"}) {
			t.Errorf("%s: totals under dimensions %v", name, e.dims)
		}
		if v := e.vals[name]; len(v) == 0 || v[0] == 0 {
			t.Errorf("%s counts a record but the event carries %v: %s", name, v, out.Bytes())
		}
		for m, v := range e.vals {
			if m != emf.MetricHandlerLatency && v[0] == 0 {
				t.Errorf("%s: the default event carries %s = 0", name, m)
			}
		}
	}
	if len(nonZeroBy) != len(all) {
		t.Errorf("nonZeroBy names %d metrics, the hook emits %d", len(nonZeroBy), len(all))
	}
}

func failed(recs ...lambdaidem.RecordReport) int {
	n := 0
	for _, r := range recs {
		if !r.Acked {
			n++
		}
	}
	return n
}

// The metrics that template.yaml's alarms and dashboard, the operations
// guide and this package's README name are the metrics the hook emits,
// and the README's table lists each of them once.
func TestTemplateAndREADMENameTheEmittedMetrics(t *testing.T) {
	t.Parallel()
	emitted := append(slices.Clone(countNames), emf.MetricHandlerLatency)
	read := func(path string) string {
		b, err := os.ReadFile(filepath.FromSlash(path))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	readme := read("README.md")
	var table []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(\\w+)` \\| (?:Count|Milliseconds) \\|").FindAllStringSubmatch(readme, -1) {
		table = append(table, m[1])
	}
	if diff := cmp.Diff(sorted(emitted), sorted(table)); diff != "" {
		t.Errorf("README.md's metric table differs from what the hook emits (-emitted +table):\n%s", diff)
	}

	// The operations guide's table of the metrics to watch.
	ops := read("../docs/operations.md")
	section := ops[strings.Index(ops, "## Metrics"):]
	if end := strings.Index(section[1:], "\n## "); end > 0 {
		section = section[:end+1]
	}
	rows := regexp.MustCompile("(?m)^\\| \\**(\\w+)\\**(?: \\(Reason\\))? \\|").FindAllStringSubmatch(section, -1)
	if len(rows) < 2 {
		t.Errorf("docs/operations.md: found %d rows in the metrics table; has it changed shape?", len(rows))
	}
	for _, m := range rows[1:] { // the header row first
		if !slices.Contains(emitted, m[1]) {
			t.Errorf("docs/operations.md names metric %s, which the hook does not emit", m[1])
		}
	}

	for _, path := range []string{"../template.yaml", "../examples/redis/template.yaml", "../docs/getting-started/template.yaml"} {
		names := templateMetrics(t, read(path))
		if len(names) == 0 && path == "../template.yaml" {
			t.Errorf("%s: found no metric of namespace %s; has the template changed shape?", path, emf.DefaultNamespace)
		}
		for _, n := range names {
			if !slices.Contains(emitted, n) {
				t.Errorf("%s names metric %s/%s, which the hook does not emit", path, emf.DefaultNamespace, n)
			}
		}
	}
}

// templateMetrics returns the metrics of namespace lambdaidem a template
// names: alarms' MetricName, and the rows of dashboard widgets, where "."
// repeats the namespace of the row above.
func templateMetrics(t *testing.T, tmpl string) []string {
	t.Helper()
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^\s*Namespace: `+emf.DefaultNamespace+`\s*\n\s*MetricName: (\w+)`).FindAllStringSubmatch(tmpl, -1) {
		names = append(names, m[1])
	}
	for _, body := range regexp.MustCompile(`(?s)DashboardBody: !Sub \|\n(.*?)\n\S`).FindAllStringSubmatch(tmpl, -1) {
		var dash struct {
			Widgets []struct {
				Properties struct {
					Metrics [][]any `json:"metrics"`
				} `json:"properties"`
			} `json:"widgets"`
		}
		if err := json.Unmarshal([]byte(body[1]), &dash); err != nil {
			t.Fatalf("dashboard body is not JSON: %v", err)
		}
		for _, w := range dash.Widgets {
			ns := ""
			for _, row := range w.Properties.Metrics {
				if len(row) < 2 {
					continue
				}
				if s, _ := row[0].(string); s != "." {
					ns = s
				}
				if name, _ := row[1].(string); ns == emf.DefaultNamespace {
					names = append(names, name)
				}
			}
		}
	}
	return names
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return slices.Compact(s)
}

// The size of one invocation's lines, for a batch of ten that has
// nothing unusual to say and for one with a dead letter, by default and
// with WithAllMetrics: README.md's table shows these rows, and this test
// fails, printing them, when the output changes
// (go test ./emf -run TestLineSizes -v).
func TestLineSizes(t *testing.T) {
	t.Parallel()
	quiet := make([]lambdaidem.RecordReport, 10)
	for i := range quiet {
		// Handler times as a real run reports them, to the nanosecond.
		quiet[i] = lambdaidem.RecordReport{Outcome: lambdaidem.OutcomeProcessed, Acked: true, HandlerRan: true,
			StoreCalls: 2, HandlerDuration: time.Duration(3_000_000 + i*1_234_567)}
	}
	deadLetter := slices.Clone(quiet)
	deadLetter[9] = lambdaidem.RecordReport{Outcome: lambdaidem.OutcomeDeadLettered, Acked: true, HandlerRan: true,
		Reason: lambdaidem.ReasonPoison, StoreCalls: 3, HandlerDuration: 812_345}
	size := func(recs []lambdaidem.RecordReport, all bool) string {
		var out strings.Builder
		opts := []emf.Option{emf.WithEmitter(emf.NewWriter(&out)), emf.WithClock(func() time.Time { return at }),
			// As in Lambda: a CloudFormation-made function name, the
			// idempotency namespace, and the request ID.
			emf.WithDimensions(emf.Dimension{Name: emf.DimensionFunctionName, Value: "orders-OrdersFunction-Ab12Cd34Ef56"},
				emf.Dimension{Name: emf.DimensionNamespace, Value: "orders"})}
		if all {
			opts = append(opts, emf.WithAllMetrics())
		}
		emf.Hook(opts...)(&lambdaidem.InvocationReport{RequestID: "0f3c9a4e-8d2b-4c61-9e57-2a1b3c4d5e6f", Records: recs})
		var sizes []string
		for _, l := range strings.SplitAfter(out.String(), "\n") {
			if l != "" {
				sizes = append(sizes, fmt.Sprint(len(l)))
			}
		}
		return fmt.Sprintf("%d (%s)", out.Len(), strings.Join(sizes, " + "))
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		recs []lambdaidem.RecordReport
	}{{"ten processed", quiet}, {"nine processed, one dead-lettered", deadLetter}} {
		row := fmt.Sprintf("| %s | %s | %s |", c.name, size(c.recs, false), size(c.recs, true))
		t.Log(row)
		if !bytes.Contains(readme, []byte(row+"\n")) {
			t.Errorf("README.md lacks the row %s", row)
		}
	}
}
