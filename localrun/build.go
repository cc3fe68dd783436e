package localrun

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Build compiles the Go Lambda function in pkg (a package path relative to
// the current module's root, such as "./examples/orders") into
// dir/bootstrap for this machine, as the provided.al2023 runtime expects it
// apart from the operating system: named bootstrap, without the RPC
// transport (-tags lambda.norpc), statically linked. It must run inside the
// module, and returns the binary's path.
func Build(ctx context.Context, pkg, dir string) (string, error) {
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("localrun: go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(pkg))); err != nil {
		return "", fmt.Errorf("localrun: build %s inside the go-lambdaidem module: %w", pkg, err)
	}
	out := filepath.Join(dir, "bootstrap")
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "lambda.norpc", "-trimpath", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("localrun: build %s: %w\n%s", pkg, err, b)
	}
	return out, nil
}
