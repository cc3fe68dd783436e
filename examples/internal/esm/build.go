package esm

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Build compiles the package in dir (a main package) as a Lambda
// provided.al2023 bootstrap for goos/goarch, into a temporary directory,
// and returns the binary's path. It is what `make build` does for the
// deployed function: static (CGO_ENABLED=0) and without the RPC runtime
// (-tags lambda.norpc).
func Build(t testing.TB, dir, goos, goarch string) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the example: %v", err)
	}
	out := filepath.Join(t.TempDir(), "bootstrap")
	cmd := exec.Command(gobin, "build", "-tags", "lambda.norpc", "-trimpath", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s for %s/%s: %v\n%s", dir, goos, goarch, err, msg)
	}
	return out
}
