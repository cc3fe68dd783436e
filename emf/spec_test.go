package emf_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/lambdaidem/go-lambdaidem/emf"
)

// document mirrors the EMF specification's root node: the _aws metadata
// object with its directives. Decoding it with unknown fields disallowed
// checks that the envelope holds nothing the specification does not
// define.
type document struct {
	AWS metadata `json:"_aws"`
}

type metadata struct {
	Timestamp         int64       `json:"Timestamp"`
	CloudWatchMetrics []directive `json:"CloudWatchMetrics"`
}

type directive struct {
	Namespace  string       `json:"Namespace"`
	Dimensions [][]string   `json:"Dimensions"`
	Metrics    []definition `json:"Metrics"`
}

type definition struct {
	Name              string `json:"Name"`
	Unit              string `json:"Unit,omitempty"`
	StorageResolution int    `json:"StorageResolution,omitempty"`
}

// event is one parsed EMF line.
type event struct {
	doc  document
	dims map[string]string    // dimension name -> value
	vals map[string][]float64 // metric name -> values
	defs map[string]string    // metric name -> unit
	root map[string]json.RawMessage
}

// parse checks line against the specification and the format's limits and
// returns what it says.
func parse(t *testing.T, line []byte) event {
	t.Helper()
	line = bytes.TrimSuffix(line, []byte("\n"))
	if len(line) > emf.MaxEventBytes {
		t.Fatalf("event of %d bytes, over %d", len(line), emf.MaxEventBytes)
	}
	var e event
	if err := json.Unmarshal(line, &e.root); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, line)
	}
	aws, ok := e.root["_aws"]
	if !ok {
		t.Fatalf("no _aws member: %s", line)
	}
	dec := json.NewDecoder(bytes.NewReader(aws))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e.doc.AWS); err != nil {
		t.Fatalf("_aws does not match the specification: %v\n%s", err, aws)
	}
	if e.doc.AWS.Timestamp <= 0 {
		t.Fatalf("Timestamp %d", e.doc.AWS.Timestamp)
	}
	if len(e.doc.AWS.CloudWatchMetrics) != 1 {
		t.Fatalf("%d directives, want 1", len(e.doc.AWS.CloudWatchMetrics))
	}
	d := e.doc.AWS.CloudWatchMetrics[0]
	if d.Namespace == "" {
		t.Fatal("empty Namespace")
	}
	if len(d.Metrics) == 0 || len(d.Metrics) > emf.MaxMetrics {
		t.Fatalf("%d metric definitions (max %d)", len(d.Metrics), emf.MaxMetrics)
	}
	e.dims, e.vals, e.defs = map[string]string{}, map[string][]float64{}, map[string]string{}
	for _, set := range d.Dimensions {
		if len(set) > emf.MaxDimensions {
			t.Fatalf("dimension set of %d keys (max %d)", len(set), emf.MaxDimensions)
		}
		for _, k := range set {
			var v string
			if err := json.Unmarshal(e.root[k], &v); err != nil || v == "" {
				t.Fatalf("dimension %s: target member %s is not a non-empty string", k, e.root[k])
			}
			e.dims[k] = v
		}
	}
	for _, m := range d.Metrics {
		if _, dup := e.defs[m.Name]; dup {
			t.Fatalf("metric %s defined twice", m.Name)
		}
		e.defs[m.Name] = m.Unit
		raw, ok := e.root[m.Name]
		if !ok {
			t.Fatalf("metric %s has no target member", m.Name)
		}
		var one float64
		if err := json.Unmarshal(raw, &one); err == nil {
			e.vals[m.Name] = []float64{one}
			continue
		}
		var many []float64
		if err := json.Unmarshal(raw, &many); err != nil {
			t.Fatalf("metric %s: %s is neither a number nor an array of numbers", m.Name, raw)
		}
		if len(many) == 0 || len(many) > emf.MaxValues {
			t.Fatalf("metric %s carries %d values (1 to %d)", m.Name, len(many), emf.MaxValues)
		}
		e.vals[m.Name] = many
	}
	return e
}

// lines splits written output into its lines, each of which must end in a
// newline.
func lines(t *testing.T, out []byte) [][]byte {
	t.Helper()
	if len(out) == 0 {
		return nil
	}
	if !bytes.HasSuffix(out, []byte("\n")) {
		t.Fatalf("output does not end in a newline: %q", out)
	}
	var ls [][]byte
	for _, l := range strings.SplitAfter(string(out), "\n") {
		if l != "" {
			ls = append(ls, []byte(l))
		}
	}
	return ls
}
