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
	out := testModule(t, "usermodule", []string{
		"github.com/lambdaidem/go-lambdaidem/lambdaidem", "github.com/lambdaidem/go-lambdaidem/lambdaidemtest", "github.com/aws/aws-lambda-go/events",
	}, "charge_test.go", "orders_test.go")
	for _, want := range []string{"--- PASS: TestChargingFirstIsCaught", "caught: seed ", "--- PASS: TestCheckingFirstPasses"} {
		if !strings.Contains(out, want) {
			t.Errorf("the user module's tests did not print %q", want)
		}
	}
}

// TestPaymentsModule runs the tests of testdata/paymentsmodule, a module
// whose handler commits its effects with the completion, as the README
// recommends for exactly-once: it passes the explorer on the in-memory
// store with the kit's in-memory DynamoDB tables, and the variant that
// writes its payment outside the transaction is caught with a duplicate
// effect. docs/testing.md shows its files verbatim.
func TestPaymentsModule(t *testing.T) {
	out := testModule(t, "paymentsmodule", []string{
		"github.com/lambdaidem/go-lambdaidem/lambdaidem", "github.com/lambdaidem/go-lambdaidem/lambdaidemtest",
		"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore", "github.com/lambdaidem/go-lambdaidem/dynamo/dynamotest",
		"github.com/aws/aws-lambda-go/events", "github.com/aws/aws-sdk-go-v2/aws",
		"github.com/aws/aws-sdk-go-v2/service/dynamodb", "github.com/aws/aws-sdk-go-v2/service/dynamodb/types",
	}, "payments.go", "payments_test.go")
	for _, want := range []string{"--- PASS: TestTransactionalPaysExactlyOnce", "--- PASS: TestPaymentOutsideTheTransactionIsCaught",
		"duplicate effect", "--- PASS: TestEachFailureModePaysOnce", "--- PASS: TestInsufficientFundsAreDeadLettered"} {
		if !strings.Contains(out, want) {
			t.Errorf("the payments module's tests did not print %q", want)
		}
	}
}

// testModule runs the tests of testdata/name with the module proxy off,
// checks that it imports only allowed packages besides the standard
// library, and that docs/testing.md shows each of shown verbatim. It
// returns the tests' output.
func testModule(t *testing.T, name string, allowed []string, shown ...string) string {
	t.Helper()
	dir := filepath.Join("testdata", name)
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
	for _, imp := range imports {
		if strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") && !slices.Contains(allowed, imp) {
			t.Errorf("%s imports %s: it may import only %v and the standard library", name, imp, allowed)
		}
	}

	out := run("test", "-count=1", "-v", ".")
	t.Log(out)

	guide, err := os.ReadFile(filepath.Join("..", "docs", "testing.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range shown {
		src, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(guide), "```go\n"+string(src)+"```\n") {
			t.Errorf("docs/testing.md does not show %s verbatim", filepath.Join(dir, f))
		}
	}
	return out
}
