package guides

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGettingStartedBuildsAsSAMBuilds builds the guide's function as
// `sam build` does with BuildMethod makefile: it copies exactly the
// CodeUri directory (the module, after `make vendor`) into an empty
// directory, where ../go-lambdaidem, the replace directive's target, does
// not exist, and runs the Makefile's build-Function target there
// with ARTIFACTS_DIR set, offline. The result is a linux/arm64 bootstrap.
// Without vendor/ the same build stops with the Makefile's reason.
func TestGettingStartedBuildsAsSAMBuilds(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make is needed (sam build runs it): %v", err)
	}
	fn := filepath.Join(layout(t), consumerName)
	command(t, fn, offline(), "make", "vendor")

	build := func(t *testing.T, codeURI string) (string, error) {
		t.Helper()
		scratch := filepath.Join(t.TempDir(), "scratch")
		copyTree(t, codeURI, scratch)
		if _, err := os.Stat(filepath.Join(scratch, "..", "go-lambdaidem")); !os.IsNotExist(err) {
			t.Fatalf("the scratch directory has a ../go-lambdaidem beside it (%v): the test would prove nothing", err)
		}
		artifacts := t.TempDir()
		// sam build runs the Makefile where the template names it, in the
		// scratch copy, with ARTIFACTS_DIR in the environment.
		cmd := exec.Command("make", "--makefile", filepath.Join(codeURI, "Makefile"), "build-Function")
		cmd.Dir = scratch
		cmd.Env = offline("ARTIFACTS_DIR="+artifacts, "GOFLAGS=-mod=vendor")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return string(out), err
		}
		return filepath.Join(artifacts, "bootstrap"), nil
	}

	bootstrap, err := build(t, fn)
	if err != nil {
		t.Fatalf("build as sam build does: %v\n%s", err, bootstrap)
	}
	f, err := elf.Open(bootstrap)
	if err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	defer f.Close()
	if f.Machine != elf.EM_AARCH64 || f.Type != elf.ET_EXEC {
		t.Fatalf("bootstrap is %v %v, want an arm64 executable (provided.al2023 on arm64)", f.Machine, f.Type)
	}

	if err := os.RemoveAll(filepath.Join(fn, "vendor")); err != nil {
		t.Fatal(err)
	}
	out, err := build(t, fn)
	if err == nil || !strings.Contains(out, "vendor/ is missing") {
		t.Fatalf("build without vendor/: %v\n%s\nwant the Makefile's refusal", err, out)
	}
}

// The template's function is the one the Makefile builds, from this
// directory.
func TestGettingStartedTemplateBuildsWithTheMakefile(t *testing.T) {
	t.Parallel()
	tmpl, err := os.ReadFile(filepath.Join(consumerDir, "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile(filepath.Join(consumerDir, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"  Function:\n", "BuildMethod: makefile", "CodeUri: .\n",
		"IDEMPOTENCY_TABLE:", "IDEMPOTENCY_NAMESPACE:", "DLQ_URL:"} {
		if !strings.Contains(string(tmpl), want) {
			t.Errorf("template.yaml lacks %q", want)
		}
	}
	if !strings.Contains(string(mk), "\nbuild-Function:\n") {
		t.Error("the Makefile has no build-Function target, which sam build runs for Function")
	}
}
