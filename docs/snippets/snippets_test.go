package snippets

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

var update = flag.Bool("update", false, "copy each snippet file into the document blocks that name it")

// root is the repository's root, seen from this package's directory.
var root = filepath.Join("..", "..")

// documents returns README.md and docs/*.md, as paths from the root.
func documents(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, filepath.ToSlash(rel))
	}
	if len(out) < 2 {
		t.Fatal("found no docs/*.md")
	}
	return out
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var (
	// marker names the file a Go block shows; the block follows it.
	marker   = regexp.MustCompile("(?s)<!-- snippet: (\\S+) -->\\s*```go\\n(.*?)```")
	goBlocks = regexp.MustCompile("(?m)^```go$")
)

// TestSnippets checks that every Go block of the README and the guides is
// one of the programs of this directory (or of the kit's user module),
// verbatim, so that each compiles (go vet ./... type-checks them) and none
// drifts from what a user can paste; and that no program here is shown
// nowhere. With -update it first copies each named file into its block.
func TestSnippets(t *testing.T) {
	shown := map[string]bool{}
	for _, doc := range documents(t) {
		text := read(t, doc)
		if *update {
			text = fill(t, doc, text)
		}
		blocks := goBlocks.FindAllIndex(text, -1)
		found := marker.FindAllSubmatch(text, -1)
		if len(found) != len(blocks) {
			t.Errorf("%s has %d Go blocks but %d carry a snippet marker: put <!-- snippet: docs/snippets/NAME/main.go --> before each", doc, len(blocks), len(found))
		}
		for _, m := range found {
			path, block := string(m[1]), string(m[2])
			shown[path] = true
			want, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
			if err != nil {
				t.Errorf("%s names %s: %v", doc, path, err)
				continue
			}
			if block != string(want) {
				t.Errorf("%s: the block for %s differs from the file; copy the file into the block", doc, path)
			}
		}
	}
	programs, err := filepath.Glob("*/main.go")
	if err != nil {
		t.Fatal(err)
	}
	if len(programs) == 0 {
		t.Fatal("no docs/snippets/*/main.go")
	}
	for _, p := range programs {
		if path := "docs/snippets/" + filepath.ToSlash(p); !shown[path] {
			t.Errorf("%s is shown in no document: show it, or delete it", path)
		}
	}
}

// fill rewrites the Go block after each snippet marker of doc with the
// file the marker names, and writes doc back when that changed it.
func fill(t *testing.T, doc string, text []byte) []byte {
	t.Helper()
	out := marker.ReplaceAllFunc(text, func(m []byte) []byte {
		path := string(marker.FindSubmatch(m)[1])
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
		if err != nil {
			t.Errorf("%s names %s: %v", doc, path, err)
			return m
		}
		return []byte("<!-- snippet: " + path + " -->\n```go\n" + string(src) + "```")
	})
	if string(out) != string(text) {
		if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(doc)), out, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: copied the snippet files into their blocks", doc)
	}
	return out
}

var (
	// link is an inline Markdown link or image: [text](target) or
	// [text](target "title"). Text may hold one level of brackets.
	link = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)
	// refLink is a reference definition: [name]: target
	refLink = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s+(\S+)`)
	// heading is an ATX heading.
	heading = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	fence   = regexp.MustCompile("^\\s*(```|~~~)")
	// codeSpan is inline code, whose brackets are not links.
	codeSpan = regexp.MustCompile("`[^`\n]*`")
)

// prose returns the lines of a Markdown text outside fenced code blocks.
func prose(text []byte) []string {
	var out []string
	in := false
	for _, l := range strings.Split(string(text), "\n") {
		if fence.MatchString(l) {
			in = !in
			continue
		}
		if !in {
			out = append(out, l)
		}
	}
	return out
}

// anchors returns the fragments GitHub gives the headings of a Markdown
// text: lower case, punctuation dropped, spaces as hyphens, and -1, -2, ...
// after repeats.
func anchors(text []byte) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range prose(text) {
		m := heading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		title := link.ReplaceAllStringFunc(m[2], func(s string) string { // a link's text stays
			return s[strings.Index(s, "[")+1 : strings.LastIndex(s, "](")]
		})
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// pending are guides that are linked and being written on another branch
// at the same time: a link to one passes while it is absent (and is
// logged), and is checked like any other once it exists. Empty this list
// when they have landed.
var pending = map[string]bool{}

// TestLinks checks that every relative link of the README and the guides
// resolves: the file or directory exists, and a #fragment names a heading
// of the Markdown file (a link to a line, #L12, needs only the file).
func TestLinks(t *testing.T) {
	docs := documents(t)
	checked := 0
	for _, doc := range docs {
		var targets []string
		for _, l := range prose(read(t, doc)) {
			l = codeSpan.ReplaceAllString(l, "")
			for _, m := range link.FindAllStringSubmatch(l, -1) {
				targets = append(targets, m[1])
			}
		}
		for _, m := range refLink.FindAllStringSubmatch(strings.Join(prose(read(t, doc)), "\n"), -1) {
			targets = append(targets, m[1])
		}
		for _, target := range targets {
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			file := doc
			if path != "" {
				if strings.HasPrefix(path, "/") {
					t.Errorf("%s: link %q is absolute; make it relative to the document", doc, target)
					continue
				}
				file = filepath.ToSlash(filepath.Join(filepath.Dir(doc), path))
				if strings.HasPrefix(file, "../") {
					t.Errorf("%s: link %q leaves the repository", doc, target)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(file))); err != nil {
					if pending[file] {
						t.Logf("%s: link %q: %s is not written yet", doc, target, file)
					} else {
						t.Errorf("%s: link %q: %s does not exist", doc, target, file)
					}
					continue
				}
			}
			checked++
			if frag == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			if !anchors(read(t, file))[frag] {
				t.Errorf("%s: link %q: %s has no heading whose anchor is #%s", doc, target, file, frag)
			}
		}
	}
	if checked == 0 {
		t.Error("found no relative link to check")
	}
	t.Logf("%d relative links in %d documents resolve", checked, len(docs))
}

// TestAnchors pins the heading rule TestLinks relies on to GitHub's.
func TestAnchors(t *testing.T) {
	text := []byte("# lambdaidem\n## Any event: `Wrap`\n```\n# not a heading\n```\n## Limits, stated plainly\n## Limits, stated plainly\n### [CLI](x) and *metrics*\n## Where the time went (round 2)\n")
	got := anchors(text)
	want := []string{"lambdaidem", "any-event-wrap", "limits-stated-plainly", "limits-stated-plainly-1", "cli-and-metrics", "where-the-time-went-round-2"}
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Errorf("anchors = %q, want %q", keys, want)
	}
}
