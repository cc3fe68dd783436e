package snippets

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// marker names the file a README code block shows; the block follows it.
var marker = regexp.MustCompile("(?s)<!-- snippet: (\\S+) -->\\s*```go\\n(.*?)```")

// TestREADMESnippets checks that every Go block in the README is one of the
// programs in this directory, verbatim, so that each compiles (go vet
// ./... type-checks them) and none drifts from what a user can paste.
func TestREADMESnippets(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?m)^```go$").FindAllIndex(readme, -1)
	found := marker.FindAllSubmatch(readme, -1)
	if len(found) != len(blocks) {
		t.Errorf("README has %d Go blocks but %d carry a snippet marker: mark each with <!-- snippet: docs/snippets/NAME/main.go -->", len(blocks), len(found))
	}
	for _, m := range found {
		path, shown := string(m[1]), string(m[2])
		want, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(path)))
		if err != nil {
			t.Errorf("README names %s: %v", path, err)
			continue
		}
		if shown != string(want) {
			t.Errorf("README's block for %s differs from the file; copy the file into the README", path)
		}
	}
}
