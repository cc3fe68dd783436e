package main

import (
	"bytes"
	"context"
	"go/format"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// newCLI runs `lambdaidem new` in-process with args; go commands are
// recorded, not run.
func newCLI(t *testing.T, args ...string) (result, [][]string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	var goRuns [][]string
	a := &app{stdout: &stdout, stderr: &stderr, env: func(string) string { return "" }, now: time.Now,
		goCmd: func(_ context.Context, dir string, args ...string) ([]byte, error) {
			goRuns = append(goRuns, append([]string{dir}, args...))
			return nil, nil
		}}
	code := a.run(context.Background(), append([]string{"new"}, args...))
	return result{code, stdout.String(), stderr.String()}, goRuns
}

// repoRoot is the clone these tests run in.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// Every template renders for both stores; the Go files come out as gofmt
// writes them and the rest holds what each store needs.
func TestNewRendersBothStores(t *testing.T) {
	want := []string{".gitignore", "Makefile", "README.md", "go.mod", "handler.go", "handler_test.go", "main.go", "resources.json", "send/main.go", "template.yaml"}
	for _, store := range []string{"dynamodb", "redis"} {
		t.Run(store, func(t *testing.T) {
			files, err := renderModule(newModule{Name: "welcome-email", Module: "example.com/welcome-email", Store: store, Replace: "../go-lambdaidem", GoVersion: libraryGoVersion})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			var names []string
			for _, f := range files {
				got[f.path] = string(f.data)
				names = append(names, f.path)
				if strings.Contains(string(f.data), "<no value>") {
					t.Errorf("%s: a template field rendered as <no value>", f.path)
				}
				if !strings.HasSuffix(f.path, ".go") {
					continue
				}
				formatted, err := format.Source(f.data)
				if err != nil {
					t.Errorf("%s is not Go: %v\n%s", f.path, err, f.data)
				} else if !bytes.Equal(formatted, f.data) {
					t.Errorf("%s is not as gofmt writes it; fix its template:\n%s", f.path, formatted)
				}
			}
			if !slices.Equal(names, want) {
				t.Fatalf("files %q, want %q", names, want)
			}
			redis := store == "redis"
			checks := []struct {
				file, text string
				present    bool
			}{
				{"go.mod", "replace github.com/lambdaidem/go-lambdaidem => ../go-lambdaidem\n", true},
				{"go.mod", "\ngo " + libraryGoVersion + "\n", true},
				{"main.go", "dynamo.New(", !redis},
				{"main.go", "redisstore.New(client, ", redis},
				{"main.go", "lambdaidem.WithBackoff(", true},
				{"main.go", "sqsqueue.NewSink(", true},
				{"main.go", "sqsqueue.NewVisibilityChanger(", true},
				{"handler.go", `lambdaidem.WithKeyJSONField("user_id")`, true},
				{"handler.go", "lambdaidem.Poison(", true},
				{"handler.go", "lambdaidem.RetryAfter(", true},
				{"handler_test.go", "k.CrashAfterEffect(", true},
				{"handler_test.go", "k.Poison(", true},
				{"handler_test.go", "lambdaidemtest.Explore(", true},
				{"template.yaml", "FunctionResponseTypes: [ReportBatchItemFailures]", true},
				{"template.yaml", "Role: !GetAtt FunctionRole.Arn", true},
				{"template.yaml", "DeadLetterAlarm:", true},
				{"template.yaml", "IdempotencyTable:", !redis},
				{"template.yaml", "RedisUrl:", redis},
				{"template.yaml", "VpcConfig:", redis},
				{"template.yaml", "REDIS_URL: !Ref RedisUrl", redis},
				{"resources.json", `"name": "welcome-email-idempotency"`, !redis},
				{"resources.json", `"name": "welcome-email-dlq"`, true},
				{"Makefile", "\nbuild-Function:\n", true},
				{"Makefile", "\ntest:", true},
				{"Makefile", "\nlocal:", true},
				{"Makefile", "LAMBDAIDEM_DYNAMODB=0 ", redis},
				{"Makefile", "-tables=false", redis},
			}
			for _, c := range checks {
				if strings.Contains(got[c.file], c.text) != c.present {
					t.Errorf("%s has %q: %v, want %v", c.file, c.text, !c.present, c.present)
				}
			}
			// SAM's policy templates for SQS grant receive and delete on
			// every queue; the template names each resource instead.
			if regexp.MustCompile(`(?m)^\s+Policies:\s*\n\s+- (SQS|DynamoDB)\w*Policy`).MatchString(got["template.yaml"]) ||
				strings.Contains(got["template.yaml"], "AWSLambdaSQSQueueExecutionRole\n") {
				t.Error("template.yaml uses a SAM policy template or managed policy")
			}
		})
	}
}

// A generated go.mod names the go version this module's go.mod names.
func TestNewGoVersionIsTheLibrarys(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "\ngo "+libraryGoVersion+"\n") {
		t.Errorf("go.mod's go line is not %s: update libraryGoVersion", libraryGoVersion)
	}
}

// The default replace is the clone the command was built from, which is
// the one these tests run in; new writes the files and tidies the module.
func TestNewWritesTheModule(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "signups")
	r, goRuns := newCLI(t, dir, "-store", "redis")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "module example.com/signups\n"; !strings.HasPrefix(string(mod), want) {
		t.Errorf("go.mod starts %q, want %q", mod, want)
	}
	if want := "replace github.com/lambdaidem/go-lambdaidem => " + repoRoot(t) + "\n"; !strings.Contains(string(mod), want) {
		t.Errorf("go.mod:\n%s\nwant %q", mod, want)
	}
	if main, err := os.ReadFile(filepath.Join(dir, "main.go")); err != nil || !strings.Contains(string(main), "redisstore.New(") {
		t.Errorf("main.go does not use the Redis store (%v)", err)
	}
	if len(goRuns) != 1 || !slices.Equal(goRuns[0], []string{dir, "mod", "tidy"}) {
		t.Errorf("go commands %q, want go mod tidy in %s", goRuns, dir)
	}
	if !strings.Contains(r.stdout, "make test") || !strings.Contains(r.stdout, repoRoot(t)) {
		t.Errorf("stdout does not say where the replace points and what to run next:\n%s", r.stdout)
	}

	// -module and a relative -replace, which resolves from DIR.
	src := t.TempDir()
	if err := os.Symlink(repoRoot(t), filepath.Join(src, "go-lambdaidem")); err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(src, "fn")
	if r, _ := newCLI(t, "-module", "github.com/me/fn", "-replace", "../go-lambdaidem", dir); r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if mod, _ := os.ReadFile(filepath.Join(dir, "go.mod")); !strings.HasPrefix(string(mod), "module github.com/me/fn\n") ||
		!strings.Contains(string(mod), "=> ../go-lambdaidem\n") {
		t.Errorf("go.mod:\n%s", mod)
	}
}

// What new refuses, before it writes anything.
func TestNewRefuses(t *testing.T) {
	tmp := t.TempDir()
	full := filepath.Join(tmp, "full")
	if err := os.MkdirAll(full, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(full, "main.go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		says string
	}{
		{"no DIR", nil, exitUsage, "one DIR expected"},
		{"two DIRs", []string{"a", "b"}, exitUsage, "one DIR expected"},
		{"an unknown store", []string{"-store", "postgres", filepath.Join(tmp, "a")}, exitUsage, `-store "postgres"`},
		{"a name no queue can carry", []string{filepath.Join(tmp, "my fn")}, exitUsage, `DIR's name "my fn"`},
		{"a bad module path", []string{"-module", "a b", filepath.Join(tmp, "b")}, exitUsage, `-module "a b"`},
		{"a replace that is no clone", []string{"-replace", tmp, filepath.Join(tmp, "c")}, exitUsage, "has no go.mod of github.com/lambdaidem/go-lambdaidem"},
		{"a directory with files", []string{full}, exitRefused, "is not empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, goRuns := newCLI(t, tc.args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.says) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d saying %q", r.code, r.stderr, tc.code, tc.says)
			}
			if len(goRuns) > 0 {
				t.Errorf("ran go %q", goRuns)
			}
		})
	}
	entries, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("the refused commands left %d entries in %s, want only full/", len(entries), tmp)
	}
}

// new -h prints its usage on stdout; the command's usage lists new.
func TestNewUsage(t *testing.T) {
	r, _ := newCLI(t, "-h")
	if r.code != exitOK || !strings.HasPrefix(r.stdout, "Usage: lambdaidem new ") || !strings.Contains(r.stdout, "-replace") || r.stderr != "" {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(usage, "\n  new DIR ") {
		t.Error("lambdaidem's usage does not list new")
	}
}

// A replace path go.mod cannot take bare is quoted.
func TestNewQuotesTheReplacePath(t *testing.T) {
	for in, want := range map[string]string{
		"../go-lambdaidem":            "../go-lambdaidem",
		"/home/ada/src/go-lambdaidem": "/home/ada/src/go-lambdaidem",
		"/home/ada/my src/lambdaidem": `"/home/ada/my src/lambdaidem"`,
	} {
		if got := goModPath(in); got != want {
			t.Errorf("goModPath(%q) = %s, want %s", in, got, want)
		}
	}
}
