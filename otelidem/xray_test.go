package otelidem_test

import (
	"errors"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/lambdaidem/go-lambdaidem/otelidem"
)

func TestParseAWSTraceHeader(t *testing.T) {
	const root, parent = "1-5759e988-bd862e3fe1be46a994272793", "53995c3f42cd8ad8"
	wantTrace := "5759e988bd862e3fe1be46a994272793"
	for _, tc := range []struct {
		in      string
		sampled bool
	}{
		{"Root=" + root + ";Parent=" + parent + ";Sampled=1", true},
		{"Root=" + root + ";Parent=" + parent + ";Sampled=0", false},
		{"Root=" + root + ";Parent=" + parent, false},
		{"Root=" + root + ";Parent=" + parent + ";Sampled=?", false},
		{" root = " + root + " ; parent=" + strings.ToUpper(parent) + " ;sampled=1;", true},
		{"Root=" + root + ";Parent=" + parent + ";Sampled=1;Lineage=a87bd80c:1|68fd508a:5", true},
		{"Self=1-67891233-abcdef012345678912345678;Root=" + root + ";Parent=" + parent + ";Sampled=1", true},
	} {
		sc, err := otelidem.ParseAWSTraceHeader(tc.in)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if sc.TraceID().String() != wantTrace || sc.SpanID().String() != parent || sc.IsSampled() != tc.sampled || !sc.IsRemote() {
			t.Errorf("%q: trace %s span %s sampled %t remote %t", tc.in, sc.TraceID(), sc.SpanID(), sc.IsSampled(), sc.IsRemote())
		}
	}
	for _, bad := range []string{
		"",
		"Root=" + root,
		"Parent=" + parent,
		"Root=" + root + ";Parent=" + parent + ";Parent=" + parent,
		"Root=" + root + ";Root=" + root + ";Parent=" + parent,
		"Root=2-5759e988-bd862e3fe1be46a994272793;Parent=" + parent,
		"Root=1-5759e98-bd862e3fe1be46a9942727930;Parent=" + parent,
		"Root=1-5759e988-bd862e3fe1be46a99427279;Parent=" + parent,
		"Root=1-5759e988xbd862e3fe1be46a994272793;Parent=" + parent,
		"Root=1-5759e98g-bd862e3fe1be46a994272793;Parent=" + parent,
		"Root=1-00000000-000000000000000000000000;Parent=" + parent,
		"Root=" + root + ";Parent=0000000000000000",
		"Root=" + root + ";Parent=53995c3f42cd8ad",
		"Root=" + root + ";Parent=53995c3f42cd8ad8;Sampled=yes",
		"Root=" + root + ";Parent=53995c3f42cd8ad8;Sampled=1;Sampled=1",
		"Root=" + root + ";Parent;Sampled=1",
		"Root=" + root + ";Parent=" + parent + ";" + strings.Repeat("x=y;", 300),
	} {
		if sc, err := otelidem.ParseAWSTraceHeader(bad); !errors.Is(err, otelidem.ErrBadTraceHeader) || sc.IsValid() {
			t.Errorf("%q: %v, %v; want ErrBadTraceHeader", bad, sc, err)
		}
	}
}

// FuzzParseAWSTraceHeader: any input either fails with the named error or
// gives a valid span context that formats and parses back to itself.
func FuzzParseAWSTraceHeader(f *testing.F) {
	for _, s := range []string{
		"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
		"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8",
		"root=1-5759E988-BD862E3FE1BE46A994272793; parent=53995C3F42CD8AD8; sampled=?;Lineage=a:1",
		"Root=1-00000000-000000000000000000000000;Parent=0000000000000000",
		";;=;Root==;Parent=;",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		sc, err := otelidem.ParseAWSTraceHeader(h)
		if err != nil {
			if !errors.Is(err, otelidem.ErrBadTraceHeader) || sc.IsValid() {
				t.Fatalf("%q: error %v with span context %v", h, err, sc)
			}
			return
		}
		if !sc.IsValid() || !sc.IsRemote() {
			t.Fatalf("%q: parsed to an invalid or local span context %v", h, sc)
		}
		back, err := otelidem.ParseAWSTraceHeader(otelidem.FormatAWSTraceHeader(sc))
		if err != nil || !back.Equal(sc) {
			t.Fatalf("%q: %v formats to %q, which parses to %v, %v", h, sc, otelidem.FormatAWSTraceHeader(sc), back, err)
		}
	})
}

func TestFormatAWSTraceHeader(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("5759e988bd862e3fe1be46a994272793")
	sid, _ := trace.SpanIDFromHex("53995c3f42cd8ad8")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	if got, want := otelidem.FormatAWSTraceHeader(sc), "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
