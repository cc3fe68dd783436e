package otelidem

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestTracingGuideNamesEveryAttribute holds docs/tracing.md to the
// attributes the package declares: each attribute.Key of otelidem.go
// appears there in backquotes, so a new attribute cannot go undocumented.
func TestTracingGuideNamesEveryAttribute(t *testing.T) {
	guide, err := os.ReadFile("../docs/tracing.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("otelidem.go")
	if err != nil {
		t.Fatal(err)
	}
	keys := regexp.MustCompile(`attribute\.Key\("([^"]+)"\)`).FindAllStringSubmatch(string(src), -1)
	if len(keys) < 10 {
		t.Fatalf("found %d attribute keys in otelidem.go; is the pattern stale?", len(keys))
	}
	for _, k := range keys {
		if !strings.Contains(string(guide), "`"+k[1]+"`") {
			t.Errorf("docs/tracing.md does not name the attribute %s", k[1])
		}
	}
}
