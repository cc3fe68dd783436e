package emf

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// Limits of the embedded metric format. CloudWatch drops a document that
// breaks one of them, and with it every metric it carried, so the Writer
// enforces them before writing.
const (
	// MaxMetrics is the number of metric definitions one directive, and so
	// one event, may carry. Larger sets are split into several events.
	MaxMetrics = 100
	// MaxDimensions is the number of dimension keys one dimension set may
	// hold. More is an error (ErrTooManyDimensions): dropping some would
	// publish a different metric than the caller asked for.
	MaxDimensions = 30
	// MaxValues is the number of values one metric may carry in one event.
	// Longer value lists are spread over several events.
	MaxValues = 100
	// MaxEventBytes is the size of one CloudWatch Logs event, and so of one
	// EMF document. A larger event is an error (ErrEventTooLarge).
	MaxEventBytes = 1 << 20
)

// Named errors for metric sets the Writer refuses. Nothing of a refused set
// is written.
var (
	// ErrInvalid: a name, value, unit or namespace CloudWatch would reject.
	ErrInvalid = errors.New("emf: invalid metric set")
	// ErrTooManyDimensions: more than MaxDimensions dimensions.
	ErrTooManyDimensions = errors.New("emf: too many dimensions")
	// ErrEventTooLarge: an event would exceed MaxEventBytes. Metrics alone
	// cannot get there (MaxMetrics definitions of MaxValues values stay far
	// below it); large Properties can.
	ErrEventTooLarge = errors.New("emf: event too large")
)

// Unit is a CloudWatch metric unit.
type Unit string

// The CloudWatch units.
const (
	UnitNone               Unit = "None"
	UnitCount              Unit = "Count"
	UnitCountPerSecond     Unit = "Count/Second"
	UnitPercent            Unit = "Percent"
	UnitSeconds            Unit = "Seconds"
	UnitMilliseconds       Unit = "Milliseconds"
	UnitMicroseconds       Unit = "Microseconds"
	UnitBytes              Unit = "Bytes"
	UnitKilobytes          Unit = "Kilobytes"
	UnitMegabytes          Unit = "Megabytes"
	UnitGigabytes          Unit = "Gigabytes"
	UnitTerabytes          Unit = "Terabytes"
	UnitBits               Unit = "Bits"
	UnitKilobits           Unit = "Kilobits"
	UnitMegabits           Unit = "Megabits"
	UnitGigabits           Unit = "Gigabits"
	UnitTerabits           Unit = "Terabits"
	UnitBytesPerSecond     Unit = "Bytes/Second"
	UnitKilobytesPerSecond Unit = "Kilobytes/Second"
	UnitMegabytesPerSecond Unit = "Megabytes/Second"
	UnitGigabytesPerSecond Unit = "Gigabytes/Second"
	UnitTerabytesPerSecond Unit = "Terabytes/Second"
	UnitBitsPerSecond      Unit = "Bits/Second"
	UnitKilobitsPerSecond  Unit = "Kilobits/Second"
	UnitMegabitsPerSecond  Unit = "Megabits/Second"
	UnitGigabitsPerSecond  Unit = "Gigabits/Second"
	UnitTerabitsPerSecond  Unit = "Terabits/Second"
	unitUnset              Unit = ""
)

// CloudWatch's lengths for namespaces, metric and dimension names, and
// dimension values.
const (
	maxNameLength           = 255
	maxDimensionValueLength = 1024
)

var units = []Unit{
	UnitNone, UnitCount, UnitCountPerSecond, UnitPercent, UnitSeconds, UnitMilliseconds, UnitMicroseconds,
	UnitBytes, UnitKilobytes, UnitMegabytes, UnitGigabytes, UnitTerabytes,
	UnitBits, UnitKilobits, UnitMegabits, UnitGigabits, UnitTerabits,
	UnitBytesPerSecond, UnitKilobytesPerSecond, UnitMegabytesPerSecond, UnitGigabytesPerSecond, UnitTerabytesPerSecond,
	UnitBitsPerSecond, UnitKilobitsPerSecond, UnitMegabitsPerSecond, UnitGigabitsPerSecond, UnitTerabitsPerSecond,
}

// Metric is one metric of a set and its values.
type Metric struct {
	// Name is the metric name, 1 to 255 ASCII characters, unique within
	// the set and distinct from its dimension and property names.
	Name string
	// Unit is the metric's unit; empty means UnitNone.
	Unit Unit
	// Values holds at least one finite value. CloudWatch aggregates them
	// (sum, count, percentiles), so a latency per record is one value each.
	Values []float64
}

// Dimension is one dimension of a set: a name (1 to 255 ASCII characters,
// not starting with a colon) and a value (1 to 1024 ASCII characters).
type Dimension struct {
	Name, Value string
}

// MetricSet is metrics that share a namespace, one dimension set, a
// timestamp and properties: one EMF document, or several when it holds more
// than MaxMetrics metrics or MaxValues values of one metric.
type MetricSet struct {
	// Namespace is the CloudWatch namespace: 1 to 255 ASCII characters,
	// not starting with "AWS/".
	Namespace string
	// Dimensions form the set's one dimension set, in order. None at all
	// publishes the metrics without dimensions.
	Dimensions []Dimension
	Metrics    []Metric
	// Properties are extra top-level members, searchable in CloudWatch Logs
	// Insights but not metrics: request IDs, versions. Never put message
	// bodies or secrets here: the event is an ordinary log line. Names must
	// be valid UTF-8.
	Properties map[string]any
	// Timestamp is the metrics' time; zero means the Writer's clock.
	Timestamp time.Time
}

// Emitter emits metric sets. Writer is the implementation; tests and
// other sinks may supply their own.
type Emitter interface {
	Emit(ctx context.Context, set MetricSet) error
}

// Writer writes metric sets as EMF documents, one JSON line each, to an
// io.Writer (in Lambda, standard output: the runtime ships each line to
// CloudWatch Logs, which extracts the metrics, with no API call). It is
// safe for concurrent use; lines never interleave.
type Writer struct {
	mu  sync.Mutex
	out io.Writer
	now func() time.Time
}

var _ Emitter = (*Writer)(nil)

// NewWriter returns a Writer writing to out; nil means os.Stdout.
func NewWriter(out io.Writer) *Writer {
	if out == nil {
		out = os.Stdout
	}
	return &Writer{out: out, now: time.Now}
}

// Emit writes set as one or more EMF lines. When ctx carries a Lambda
// context its request ID is added as the "requestId" property (unless the
// set has one), so a metric spike leads to the invocation's log lines. A
// set with no metrics writes nothing. An invalid set writes nothing and
// returns an error wrapping ErrInvalid, ErrTooManyDimensions or
// ErrEventTooLarge.
func (w *Writer) Emit(ctx context.Context, set MetricSet) error {
	if len(set.Metrics) == 0 {
		return nil
	}
	if set.Timestamp.IsZero() {
		set.Timestamp = w.now()
	}
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		if _, taken := set.Properties["requestId"]; !taken && !hasMember(set, "requestId") {
			props := make(map[string]any, len(set.Properties)+1)
			for k, v := range set.Properties {
				props[k] = v
			}
			props["requestId"] = lc.AwsRequestID
			set.Properties = props
		}
	}
	lines, err := Encode(set)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range lines {
		if _, err := w.out.Write(l); err != nil {
			return fmt.Errorf("emf: write: %w", err)
		}
	}
	return nil
}

// hasMember reports whether a dimension or metric already uses name.
func hasMember(set MetricSet, name string) bool {
	for _, d := range set.Dimensions {
		if d.Name == name {
			return true
		}
	}
	for _, m := range set.Metrics {
		if m.Name == name {
			return true
		}
	}
	return false
}

// Encode validates set and returns its EMF documents, each one JSON line
// ending in a newline. A set beyond MaxMetrics metrics or MaxValues values
// of one metric becomes several documents, each repeating the dimensions
// and properties, so every value is published exactly once. Unlike
// Writer.Emit, Encode has no clock: a zero Timestamp is an error.
func Encode(set MetricSet) ([][]byte, error) {
	if set.Timestamp.IsZero() {
		return nil, fmt.Errorf("%w: no timestamp", ErrInvalid)
	}
	if err := validate(set); err != nil {
		return nil, err
	}
	var lines [][]byte
	for _, chunk := range split(set.Metrics) {
		line, err := encodeOne(set, chunk)
		if err != nil {
			return nil, err
		}
		lines = append(lines, line)
	}
	return lines, nil
}

// split spreads metrics over events: event round r carries the r-th run of
// MaxValues values of every metric that has one, and each round is cut
// into groups of at most MaxMetrics definitions.
func split(metrics []Metric) [][]Metric {
	var out [][]Metric
	for r := 0; ; r++ {
		var round []Metric
		for _, m := range metrics {
			lo := r * MaxValues
			if lo >= len(m.Values) {
				continue
			}
			hi := min(lo+MaxValues, len(m.Values))
			round = append(round, Metric{Name: m.Name, Unit: m.Unit, Values: m.Values[lo:hi]})
		}
		if len(round) == 0 {
			return out
		}
		for len(round) > 0 {
			n := min(len(round), MaxMetrics)
			out = append(out, round[:n])
			round = round[n:]
		}
	}
}

func validate(set MetricSet) error {
	if err := checkName("namespace", set.Namespace, maxNameLength); err != nil {
		return err
	}
	if strings.HasPrefix(set.Namespace, "AWS/") {
		return fmt.Errorf("%w: namespace %q is reserved for AWS services", ErrInvalid, set.Namespace)
	}
	if len(set.Dimensions) > MaxDimensions {
		return fmt.Errorf("%w: %d dimensions in one set (max %d)", ErrTooManyDimensions, len(set.Dimensions), MaxDimensions)
	}
	// Dimensions, metrics and properties are all members of one JSON
	// object: a shared name would make one overwrite the other.
	seen := map[string]string{"_aws": "reserved"}
	claim := func(kind, name string) error {
		if prev, ok := seen[name]; ok {
			return fmt.Errorf("%w: %s name %q is already used by a %s", ErrInvalid, kind, name, prev)
		}
		seen[name] = kind
		return nil
	}
	for _, d := range set.Dimensions {
		if err := checkName("dimension name", d.Name, maxNameLength); err != nil {
			return err
		}
		if strings.HasPrefix(d.Name, ":") {
			return fmt.Errorf("%w: dimension name %q starts with a colon", ErrInvalid, d.Name)
		}
		if err := checkName("value of dimension "+d.Name, d.Value, maxDimensionValueLength); err != nil {
			return err
		}
		if err := claim("dimension", d.Name); err != nil {
			return err
		}
	}
	for _, m := range set.Metrics {
		if err := checkName("metric name", m.Name, maxNameLength); err != nil {
			return err
		}
		if err := claim("metric", m.Name); err != nil {
			return err
		}
		if m.Unit != unitUnset && !slices.Contains(units, m.Unit) {
			return fmt.Errorf("%w: metric %s: unknown unit %q", ErrInvalid, m.Name, m.Unit)
		}
		if len(m.Values) == 0 {
			return fmt.Errorf("%w: metric %s has no values", ErrInvalid, m.Name)
		}
		for _, v := range m.Values {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("%w: metric %s: value %v is not a JSON number", ErrInvalid, m.Name, v)
			}
		}
	}
	for name := range set.Properties {
		if name == "" {
			return fmt.Errorf("%w: empty property name", ErrInvalid)
		}
		if !utf8.ValidString(name) {
			// JSON would write the bad bytes as U+FFFD, so two such
			// names would become one member and one value be lost.
			return fmt.Errorf("%w: property name %q is not valid UTF-8", ErrInvalid, name)
		}
		if err := claim("property", name); err != nil {
			return err
		}
	}
	return nil
}

// checkName applies CloudWatch's rule for names and dimension values:
// ASCII without control characters, not only white space.
func checkName(what, s string, maxLen int) error {
	if len(s) == 0 || len(s) > maxLen {
		return fmt.Errorf("%w: %s %q must be 1 to %d characters", ErrInvalid, what, s, maxLen)
	}
	if strings.TrimSpace(s) == "" {
		return fmt.Errorf("%w: %s is only white space", ErrInvalid, what)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return fmt.Errorf("%w: %s %q holds a non-ASCII or control character", ErrInvalid, what, s)
		}
	}
	return nil
}

// The document's shape: the directive under "_aws", then the members it
// names. Written by hand rather than from a map so the envelope comes
// first and dimensions and metrics keep the caller's order.
type directive struct {
	Namespace  string       `json:"Namespace"`
	Dimensions [][]string   `json:"Dimensions"`
	Metrics    []definition `json:"Metrics"`
}

type definition struct {
	Name string `json:"Name"`
	Unit Unit   `json:"Unit,omitempty"`
}

type metadata struct {
	Timestamp         int64       `json:"Timestamp"`
	CloudWatchMetrics []directive `json:"CloudWatchMetrics"`
}

func encodeOne(set MetricSet, metrics []Metric) ([]byte, error) {
	dims := make([]string, len(set.Dimensions))
	for i, d := range set.Dimensions {
		dims[i] = d.Name
	}
	defs := make([]definition, len(metrics))
	for i, m := range metrics {
		defs[i] = definition{Name: m.Name, Unit: m.Unit}
	}
	var b bytes.Buffer
	b.WriteString(`{"_aws":`)
	if err := writeJSON(&b, metadata{
		Timestamp:         set.Timestamp.UnixMilli(),
		CloudWatchMetrics: []directive{{Namespace: set.Namespace, Dimensions: [][]string{dims}, Metrics: defs}},
	}); err != nil {
		return nil, err
	}
	for _, d := range set.Dimensions {
		if err := member(&b, d.Name, d.Value); err != nil {
			return nil, err
		}
	}
	for _, m := range metrics {
		var v any = m.Values
		if len(m.Values) == 1 {
			v = m.Values[0]
		}
		if err := member(&b, m.Name, v); err != nil {
			return nil, err
		}
	}
	names := make([]string, 0, len(set.Properties))
	for k := range set.Properties {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if err := member(&b, k, set.Properties[k]); err != nil {
			return nil, fmt.Errorf("%w: property %s: %w", ErrInvalid, k, err)
		}
	}
	b.WriteString("}")
	if b.Len() > MaxEventBytes {
		return nil, fmt.Errorf("%w: %d bytes (max %d); shrink the properties", ErrEventTooLarge, b.Len(), MaxEventBytes)
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}

func member(b *bytes.Buffer, name string, v any) error {
	b.WriteByte(',')
	if err := writeJSON(b, name); err != nil {
		return err
	}
	b.WriteByte(':')
	return writeJSON(b, v)
}

// writeJSON appends v without HTML escaping, which would only make the log
// line harder to read.
func writeJSON(b *bytes.Buffer, v any) error {
	var tmp bytes.Buffer
	enc := json.NewEncoder(&tmp)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	b.Write(bytes.TrimSuffix(tmp.Bytes(), []byte("\n")))
	return nil
}
