package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// The README's demo sample is Summary.Print's rendering of a real, passing
// run kept in testdata. A changed printer, a hand-edited sample or a sample
// from another run fails here; `make demo-readme` refreshes both.
func TestREADMESampleIsARealRun(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	js, err := os.ReadFile(filepath.Join(root, readmeSummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	var s Summary
	if err := json.Unmarshal(js, &s); err != nil {
		t.Fatalf("%s: %v", readmeSummaryFile, err)
	}
	if !s.OK() {
		t.Fatalf("the README's run failed: %q", s.Violations)
	}
	doc, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := readmeSampleOf(string(doc))
	if err != nil {
		t.Fatal(err)
	}
	if want := readmeSample(&s); got != want {
		t.Errorf("README.md's demo sample is not the recorded run; run `make demo-readme`.\nREADME:\n%s\nrecorded run:\n%s", got, want)
	}
}

func TestUpdateReadmeReplacesOnlyTheSample(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	readme := filepath.Join(dir, "README.md")
	summary := filepath.Join(dir, "summary.json")
	doc := "# title\n\nbefore\n\n" + readmeStart + "\n```\nold\n```\n" + readmeEnd + "\n\nafter\n"
	if err := os.WriteFile(readme, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &Summary{Sent: 3, UniqueOrders: 2, PoisonDeadLettered: true, DeadLettered: map[string]int{"poison": 1}}
	if err := updateReadme(readme, summary, s); err != nil {
		t.Fatal(err)
	}
	out, _ := os.ReadFile(readme)
	want := "# title\n\nbefore\n\n" + readmeStart + "\n" + readmeSample(s) + readmeEnd + "\n\nafter\n"
	if string(out) != want {
		t.Errorf("README after update:\n%s\nwant:\n%s", out, want)
	}
	failed := &Summary{Violations: []string{"lost o-1"}}
	if err := updateReadme(readme, summary, failed); err == nil {
		t.Error("a failed run updated the README")
	}
	if err := os.WriteFile(readme, []byte("no markers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := updateReadme(readme, summary, s); err == nil {
		t.Error("a README without the markers was accepted")
	}
}
