package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
)

// The README's demo sample sits between these markers. `make demo-readme`
// fills it from a real run and keeps that run's summary in
// readmeSummaryFile; `make test` checks that the sample is exactly what
// Summary.Print makes of that summary, so neither can drift.
const (
	readmeStart       = "<!-- demo-output -->"
	readmeEnd         = "<!-- /demo-output -->"
	readmeSummaryFile = "cmd/lambdaidem-demo/testdata/readme-summary.json"
)

// errNoSample: the README has no well-formed demo sample block.
var errNoSample = errors.New("README has no " + readmeStart + " ... " + readmeEnd + " block")

// readmeSample renders s as the README shows it: a fenced block holding
// Print's output, without its leading blank line or trailing spaces.
func readmeSample(s *Summary) string {
	var b strings.Builder
	s.Print(&b)
	lines := strings.Split(strings.TrimLeft(b.String(), "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return "```\n" + strings.TrimRight(strings.Join(lines, "\n"), "\n") + "\n```\n"
}

// sampleBounds returns the offsets of the text between the markers.
func sampleBounds(doc string) (start, end int, err error) {
	i := strings.Index(doc, readmeStart)
	j := strings.Index(doc, readmeEnd)
	if i < 0 || j < i {
		return 0, 0, errNoSample
	}
	return i + len(readmeStart) + 1, j, nil
}

// readmeSampleOf returns the sample block of a README.
func readmeSampleOf(doc string) (string, error) {
	start, end, err := sampleBounds(doc)
	if err != nil {
		return "", err
	}
	return doc[start:end], nil
}

// updateReadme writes s's sample into the README at readme and s itself
// into summaryFile. It refuses a failed run: the README shows a passing one.
func updateReadme(readme, summaryFile string, s *Summary) error {
	if !s.OK() {
		return fmt.Errorf("not updating %s from a failed run: %q", readme, s.Violations)
	}
	doc, err := os.ReadFile(readme)
	if err != nil {
		return err
	}
	start, end, err := sampleBounds(string(doc))
	if err != nil {
		return fmt.Errorf("%s: %w", readme, err)
	}
	js, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(summaryFile, append(js, '\n'), 0o644); err != nil {
		return err
	}
	out := string(doc[:start]) + readmeSample(s) + string(doc[end:])
	return os.WriteFile(readme, []byte(out), 0o644)
}
