package compat

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// featureWords are the words prose uses for each feature of the table.
var featureWords = map[string]string{
	"completion writes":   `AddCompletionWrite|WithCompletionWrites|completion writes?|transactional completions?|transactional effects`,
	"at-most-once":        `WithAtMostOnce|at-most-once`,
	"heartbeat":           `WithHeartbeat|heartbeats?`,
	"cache":               `WithCache`,
	"FIFO":                `FIFO|WithKeyDeduplicationID`,
	"redrive reset":       `redrive|ResetDeadLetter`,
	"large results":       `WithMaxResultBytes`,
	"fail-on-any":         `WithFailBatchOnAnyFailure`,
	"key conflict":        `key conflicts?`,
	"late replay":         `late replays?|WithResultRetention`,
	"wait-for-completion": `WithWaitForCompletion|wait(?:ing)? for completion`,
	"batched writes":      `WithBatchedWrites|batched writes`,
	"optimistic commit":   `WithOptimisticCommit|optimistic mode|optimistic commits?`,
}

// targetWords are the words prose uses for the stores and entry points.
var targetWords = map[string]string{
	"in-memory": `in-memory store|memstore`,
	"DynamoDB":  `DynamoDB(?: store)?`,
	"Redis":     `Redis(?: store)?|redisstore`,
	"SQS":       `SQS handler|lambdaidem\.SQS`,
	"Wrap":      "`?Wrap`?",
	"httpidem":  "`?httpidem`?",
	"kit":       `the kit|lambdaidemtest`,
}

// supports is what the table says of target and feature: "supported",
// "refused", or "" where the table says neither plainly (the in-memory
// store's completion writes depend on how it was built).
func supports(target, featureName string) string {
	var f *feature
	for i := range features {
		if features[i].name == featureName {
			f = &features[i]
		}
	}
	if f == nil {
		return ""
	}
	refused := false
	switch target {
	case "in-memory":
		if featureName == "completion writes" {
			return ""
		}
	case "SQS":
		refused = f.wrapOnly
	case "kit":
		refused = f.wrapOnly || f.kitRefused != nil
	case "Wrap", "httpidem":
		refused = f.sqsOnly
	}
	if refused {
		return "refused"
	}
	return "supported"
}

// claim is what a passage of prose says of one cell.
type claim struct {
	where, text, target, feature, says string
}

var (
	negation = `(?:refuses|rejects|does not (?:support|commit|run|take|use|keep)|cannot (?:run|commit|take|use|keep)|has no|never (?:runs|commits))`
	heading  = regexp.MustCompile(`^#+\s+(.*)`)
)

func alternation(words map[string]string, prefix string) string {
	var alts []string
	for name, re := range words {
		alts = append(alts, "(?P<"+prefix+strings.NewReplacer("-", "_", " ", "_").Replace(name)+">"+re+")")
	}
	return "(?:" + strings.Join(alts, "|") + ")"
}

// claimsIn finds the claims of refusal in a document: a sentence whose
// store or entry point (or "the store", under a heading that names one)
// refuses a feature, a feature refused by one, and a table cell under a
// store's or entry point's column that says no to a feature's row.
func claimsIn(name, text string) []claim {
	t := alternation(targetWords, "t_")
	f := alternation(featureWords, "f_")
	sentences := []*regexp.Regexp{
		regexp.MustCompile(`(?i)\b(?:` + t + `|the store)\b[^.;:()]{0,40}?\b` + negation + `\b[^.;:]{0,60}?` + f),
		regexp.MustCompile(`(?i)` + f + `[^.;:]{0,60}?\b(?:is|are) (?:refused|not supported|unsupported|not available) (?:by|on|in|with) [^.;:]{0,30}?\b` + t),
		regexp.MustCompile(`(?i)\bno ` + f + `\b (?:on|in|for|with) (?:the )?` + t),
		regexp.MustCompile(`(?i)` + f + `[^.;]{0,80}?\b(?:` + t + `|the store)\s+` + negation + `\s+(?:them|it)\b`),
		regexp.MustCompile(`(?i)\b` + t + `\b[^.]{0,80}?\bit\s+` + negation + `\b[^.;:]{0,40}?` + f),
	}
	nameOf := func(re *regexp.Regexp, m []string, prefix string) string {
		for i, n := range re.SubexpNames() {
			if strings.HasPrefix(n, prefix) && m[i] != "" {
				return strings.ReplaceAll(strings.TrimPrefix(n, prefix), "_", "-")
			}
		}
		return ""
	}
	canon := func(s string, words map[string]string) string {
		for name := range words {
			if strings.ReplaceAll(name, " ", "-") == s {
				return name
			}
		}
		return s
	}
	var out []claim
	section := ""
	var header []string
	lines := strings.Split(text, "\n")
	inCode := false
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inCode = !inCode
			continue
		}
		if inCode {
			continue
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			section = m[1]
			continue
		}
		if strings.HasPrefix(line, "|") {
			row := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(line), "|"), "|")
			cells := strings.Split(row, "|")
			if header == nil {
				header = cells
				continue
			}
			if strings.Contains(line, "---") {
				continue
			}
			fm := regexp.MustCompile(`(?i)` + f).FindStringSubmatch(cells[0])
			if fm == nil {
				continue
			}
			feat := canon(nameOf(regexp.MustCompile(`(?i)`+f), fm, "f_"), featureWords)
			for c := 1; c < len(cells) && c < len(header); c++ {
				tm := regexp.MustCompile(`(?i)^\s*` + t + `\s*$`).FindStringSubmatch(header[c])
				cell := strings.TrimSpace(cells[c])
				if tm == nil || !regexp.MustCompile(`(?i)^(no\b|refused|not supported|unsupported)`).MatchString(cell) {
					continue
				}
				target := canon(nameOf(regexp.MustCompile(`(?i)^\s*`+t+`\s*$`), tm, "t_"), targetWords)
				out = append(out, claim{fmt.Sprintf("%s:%d", name, i+1), cell, target, feat, "refused"})
			}
			continue
		}
		header = nil
		if strings.TrimSpace(line) == "" {
			continue
		}
		// A paragraph: join its lines.
		start := i
		para := line
		for i+1 < len(lines) && strings.TrimSpace(lines[i+1]) != "" && !strings.HasPrefix(lines[i+1], "|") && !strings.HasPrefix(lines[i+1], "#") && !strings.HasPrefix(strings.TrimSpace(lines[i+1]), "```") {
			i++
			para += " " + lines[i]
		}
		para = strings.Join(strings.Fields(para), " ")
		for _, re := range sentences {
			for _, m := range re.FindAllStringSubmatch(para, -1) {
				target := canon(nameOf(re, m, "t_"), targetWords)
				if target == "" {
					// "the store": the store the section is about.
					for name, words := range targetWords {
						if regexp.MustCompile(`(?i)^(?:` + words + `)$`).MatchString(section) {
							target = name
						}
					}
				}
				if target == "" {
					continue
				}
				out = append(out, claim{fmt.Sprintf("%s:%d", name, start+1), m[0], target, canon(nameOf(re, m, "f_"), featureWords), "refused"})
			}
		}
	}
	return out
}

// TestProseAgreesWithTable holds every guide, and every package's
// documentation, to the compatibility table: a
// sentence or a table cell that says a store or an entry point refuses a
// feature the table runs there fails, so no guide can say, for example,
// that the Redis store refuses completion writes while the table runs
// them on redis-server.
func TestProseAgreesWithTable(t *testing.T) {
	for _, f := range features {
		if featureWords[f.name] == "" {
			t.Errorf("feature %q has no words in featureWords: prose about it would go unchecked", f.name)
		}
	}
	docs, err := filepath.Glob("../*.md")
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, "../../README.md", "../../examples/README.md")
	// The packages' documentation, its comment markers taken off.
	for _, pattern := range []string{"../../*/doc.go", "../../*/*/doc.go", "../../*/*/*/doc.go"} {
		more, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, more...)
	}
	checked := 0
	for _, doc := range docs {
		if filepath.Base(doc) == filepath.Base(document) {
			continue
		}
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(doc, ".go") {
			text = regexp.MustCompile(`(?m)^//\s?`).ReplaceAll(text, nil)
		}
		for _, c := range claimsIn(strings.TrimPrefix(doc, "../"), string(text)) {
			checked++
			if want := supports(c.target, c.feature); want != "" && want != c.says {
				t.Errorf("%s says %s %s %s, the compatibility table says %s: %q", c.where, c.target, c.says, c.feature, want, c.text)
			}
		}
	}
	t.Logf("%d claims checked", checked)
}

// The checker finds the contradiction it was built for, in a sentence, a
// sentence about "the store" of a section, and a table, and passes what
// agrees.
func TestProseClaims(t *testing.T) {
	doc := strings.Join([]string{
		"The Redis store refuses `AddCompletionWrite` with `ErrUnsupportedWrite`.",
		"",
		"## Redis",
		"",
		"- **Not supported.** Completion writes: the store refuses",
		"  completion writes.",
		"",
		"| | DynamoDB | Redis |",
		"|---|---|---|",
		"| effects committed with the completion (`AddCompletionWrite`) | yes | no: refused |",
		"",
		"`Wrap` refuses `WithCache`: it has no batch.",
		"",
		"Package redisstore (Redis OSS, Valkey; it refuses completion writes).",
	}, "\n")
	var bad []string
	for _, c := range claimsIn("doc", doc) {
		if supports(c.target, c.feature) != c.says {
			bad = append(bad, c.where+" "+c.target+" "+c.feature)
		}
	}
	want := []string{"doc:1 Redis completion writes", "doc:5 Redis completion writes", "doc:10 Redis completion writes", "doc:14 Redis completion writes"}
	if strings.Join(bad, "; ") != strings.Join(want, "; ") {
		t.Errorf("contradictions found: %q, want %q", bad, want)
	}
}
