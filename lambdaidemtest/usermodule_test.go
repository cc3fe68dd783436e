package lambdaidemtest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestUserModule runs the tests of testdata/usermodule, a module of its own
// that imports only the library and this kit (and the Lambda event types
// its handler's signature names), as a user's module would: the charging
// handler that charges before it checks its ledger is caught, and the
// fixed one passes 10,000 seeded scenarios. docs/testing.md shows its test
// files verbatim, so this checks that too.
func TestUserModule(t *testing.T) {
	dir := filepath.Join("testdata", "usermodule")
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to test the user module: %v", err)
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(gotool, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly", "GOPROXY=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
		}
		return string(out)
	}

	imports := strings.Fields(run("list", "-f", "{{join .Imports \" \"}} {{join .TestImports \" \"}} {{join .XTestImports \" \"}}", "."))
	allowed := []string{"github.com/lambdaidem/go-lambdaidem/lambdaidem", "github.com/lambdaidem/go-lambdaidem/lambdaidemtest", "github.com/aws/aws-lambda-go/events"}
	for _, imp := range imports {
		if strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") && !slices.Contains(allowed, imp) {
			t.Errorf("the user module imports %s: it may import only %v and the standard library", imp, allowed)
		}
	}

	out := run("test", "-count=1", "-v", ".")
	t.Log(out)
	for _, want := range []string{"--- PASS: TestChargingFirstIsCaught", "caught: seed ", "--- PASS: TestCheckingFirstPasses"} {
		if !strings.Contains(out, want) {
			t.Errorf("the user module's tests did not print %q", want)
		}
	}

	guide, err := os.ReadFile(filepath.Join("..", "docs", "testing.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"charge_test.go", "orders_test.go"} {
		src, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(guide), "```go\n"+string(src)+"```\n") {
			t.Errorf("docs/testing.md does not show %s verbatim", filepath.Join(dir, f))
		}
	}
}
