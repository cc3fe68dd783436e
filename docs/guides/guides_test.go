package guides

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The consumer module the guides build (what `lambdaidem new` writes:
// TestGettingStartedIsGenerated), its directory's name beside the clone,
// and the repository it uses.
const (
	consumerDir  = "../getting-started"
	consumerName = "welcome-email"
	repoRoot     = "../.."
)

// fileBlock is a guide's marker for a file of the consumer module shown
// verbatim: the fenced block, in any language, after
// <!-- snippet: docs/getting-started/PATH --> (docs/snippets checks the Go
// blocks of every guide the same way).
var fileBlock = regexp.MustCompile("(?s)<!-- snippet: docs/getting-started/(\\S+) -->\\s*```[a-z]*\\n(.*?)```")

// TestGuidesShowTheFiles: every file block of the two guides is the
// consumer module's file, verbatim. The guides need not show every file:
// the module is lambdaidem new's output (TestGettingStartedIsGenerated),
// and a reader has the files themselves.
func TestGuidesShowTheFiles(t *testing.T) {
	t.Parallel()
	for _, guide := range []string{"../getting-started.md", "../local-development.md"} {
		text, err := os.ReadFile(guide)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range fileBlock.FindAllSubmatch(text, -1) {
			name := string(m[1])
			want, err := os.ReadFile(filepath.Join(consumerDir, filepath.FromSlash(name)))
			if err != nil {
				t.Errorf("%s shows %s: %v", guide, name, err)
				continue
			}
			if !bytes.Equal(m[2], want) {
				t.Errorf("%s's block for %s differs from docs/getting-started/%s; copy the file into the guide", guide, name, name)
			}
		}
	}
}

// consumerFiles lists the consumer module's files, slash-separated and
// relative to it, leaving out what a build leaves behind.
func consumerFiles(t *testing.T) []string {
	t.Helper()
	return filesOf(t, consumerDir)
}

// layout lays out what the guides assume next to each other and returns
// its directory: go-lambdaidem, a clone of this repository (a directory of
// links to the repository's files), and welcome-email, a copy of the
// consumer module.
func layout(t *testing.T) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "src")
	clone := filepath.Join(src, "go-lambdaidem")
	if err := os.MkdirAll(clone, 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		switch e.Name() {
		case ".git", ".tools", ".run", ".aws-sam":
			continue
		}
		if err := os.Symlink(filepath.Join(root, e.Name()), filepath.Join(clone, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	fn := filepath.Join(src, consumerName)
	for _, name := range consumerFiles(t) {
		copyFile(t, filepath.Join(consumerDir, filepath.FromSlash(name)), filepath.Join(fn, filepath.FromSlash(name)))
	}
	return src
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, info.Mode().Perm()); err != nil {
		t.Fatal(err)
	}
}

// copyTree copies the directory from to to, leaving out what sam build
// leaves out (.aws-sam, .git).
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".aws-sam" || d.Name() == ".git") {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(from, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		copyFile(t, path, filepath.Join(to, rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// offline is the environment of every command the tests run: the Go
// module proxy is never asked (the modules come from the module cache,
// which building this repository filled), and no workspace applies.
func offline(extra ...string) []string {
	return append(os.Environ(), append([]string{"GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local"}, extra...)...)
}

// command runs name with args in dir and returns its combined output,
// failing the test when it fails.
func command(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s (in %s): %v\n%s", name, strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}
