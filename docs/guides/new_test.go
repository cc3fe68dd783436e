package guides

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
)

// The operator CLI, built once for the tests that run `lambdaidem new`.
var cli struct {
	once      sync.Once
	dir, path string
	err       error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if cli.dir != "" {
		os.RemoveAll(cli.dir)
	}
	os.Exit(code)
}

// lambdaidemCLI returns the path of cmd/lambdaidem built from this
// repository, as `go build` in a clone builds it: its `new` takes this
// repository for the clone to replace the library with.
func lambdaidemCLI(t *testing.T) string {
	t.Helper()
	cli.once.Do(func() {
		if cli.dir, cli.err = os.MkdirTemp("", "lambdaidem-cli-"); cli.err != nil {
			return
		}
		cli.path = filepath.Join(cli.dir, "lambdaidem")
		cmd := exec.Command("go", "build", "-o", cli.path, "./cmd/lambdaidem")
		cmd.Dir, cmd.Env = repoRoot, offline()
		if out, err := cmd.CombinedOutput(); err != nil {
			cli.err = fmt.Errorf("go build ./cmd/lambdaidem: %v\n%s", err, out)
		}
	})
	if cli.err != nil {
		t.Fatal(cli.err)
	}
	return cli.path
}

// TestGettingStartedIsGenerated: docs/getting-started is what
// `lambdaidem new -module example.com/welcome-email -replace
// ../go-lambdaidem welcome-email` writes beside a clone, go.sum included,
// file for file; -update writes it there.
func TestGettingStartedIsGenerated(t *testing.T) {
	t.Parallel()
	src := filepath.Join(t.TempDir(), "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(root, filepath.Join(src, "go-lambdaidem")); err != nil {
		t.Fatal(err)
	}
	fn := filepath.Join(src, consumerName)
	command(t, src, offline(), lambdaidemCLI(t), "new", "-module", "example.com/"+consumerName, "-replace", "../go-lambdaidem", consumerName)

	generated := filesOf(t, fn)
	if *update {
		if err := os.RemoveAll(consumerDir); err != nil {
			t.Fatal(err)
		}
		for _, name := range generated {
			copyFile(t, filepath.Join(fn, filepath.FromSlash(name)), filepath.Join(consumerDir, filepath.FromSlash(name)))
		}
		t.Logf("wrote %d files into %s", len(generated), consumerDir)
		return
	}
	committed := consumerFiles(t)
	if !slices.Equal(generated, committed) {
		t.Errorf("lambdaidem new writes %q, docs/getting-started has %q (go test ./docs/guides -run TestGettingStartedIsGenerated -update writes them)", generated, committed)
	}
	for _, name := range generated {
		want, err := os.ReadFile(filepath.Join(fn, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(consumerDir, filepath.FromSlash(name)))
		if err == nil && !bytes.Equal(got, want) {
			t.Errorf("docs/getting-started/%s is not what lambdaidem new writes (go test ./docs/guides -run TestGettingStartedIsGenerated -update writes it)", name)
		}
	}
}

// TestNewModule generates a module for each store with `lambdaidem new`,
// its replace directive pointing at this repository, and does what its
// README says: make test passes at once, cfn-lint accepts its template,
// and make local runs the function under the local runner on the local
// stack, where make send's signup, the same signup again and one with an
// invalid address come out as one email, one duplicate skipped and one
// dead letter with reason poison.
func TestNewModule(t *testing.T) {
	for _, store := range []string{"dynamodb", "redis"} {
		t.Run(store, func(t *testing.T) {
			testenv.Endpoint(t, testenv.SQSEndpointVar)
			if store == "redis" {
				testenv.RedisAddr(t)
			} else {
				testenv.Endpoint(t, testenv.DynamoDBEndpointVar)
			}
			t.Parallel()
			// A name of its own: its queues, table and namespace on a
			// stack that other tests, and earlier runs, share.
			name := testenv.Name("welcome")
			dir := filepath.Join(t.TempDir(), name)
			env := offline()
			command(t, filepath.Dir(dir), env, lambdaidemCLI(t), "new", "-store", store, name)
			root, err := filepath.Abs(repoRoot)
			if err != nil {
				t.Fatal(err)
			}
			if mod, err := os.ReadFile(filepath.Join(dir, "go.mod")); err != nil || !strings.Contains(string(mod), "=> "+root+"\n") {
				t.Fatalf("go.mod does not replace the library with this repository, %s (%v):\n%s", root, err, mod)
			}

			if out := command(t, dir, env, "make", "test"); !strings.Contains(out, "ok  \texample.com/"+name+"\t") {
				t.Errorf("make test passed without running the module's tests:\n%s", out)
			}

			if _, err := exec.LookPath("cfn-lint"); err == nil {
				command(t, dir, env, "cfn-lint", "template.yaml")
			} else if os.Getenv(testenv.RequireVar) == "1" {
				t.Errorf("cfn-lint is not on PATH: %v", err)
			} else {
				t.Log("cfn-lint is not on PATH: template.yaml not linted")
			}

			// Each send is waited for by what the function prints for it,
			// not by the runner's invocation count: on a loaded machine a
			// store call may time out, and the message comes back for
			// another invocation.
			local := startLocal(t, dir, env)
			for _, step := range []struct {
				body string // "": make send's default, Ada's signup
				done *regexp.Regexp
			}{
				{"", regexp.MustCompile(`(?m)INFO welcome email to=ada@example.com key=[0-9a-f-]{36}$`)},
				{"", regexp.MustCompile(`"DuplicatesSkipped":1,`)},
				{`{"user_id":"u-3","email":"not an address"}`, regexp.MustCompile(`WARN lambdaidem: record dead_lettered namespace=` + name + ` key=u-3 .*reason=poison`)},
			} {
				args := []string{"send"}
				if step.body != "" {
					args = append(args, "BODY="+step.body)
				}
				command(t, dir, env, "make", args...)
				local.waitForOutput(t, step.done)
			}
			runner, function := local.stop(t)
			if !regexp.MustCompile(`(?m)^records \d+: deleted 3,`).MatchString(runner) {
				t.Errorf("the runner's report:\n%s\nwant 3 records deleted\n%s", runner, function)
			}
			if n := strings.Count(function, "INFO welcome email"); n != 1 {
				t.Errorf("%d welcome emails, want one:\n%s", n, function)
			}
			// The dead letter, looked at as the module's README says.
			var view struct {
				Copies []struct{ Key, Reason string }
			}
			dlq := exec.Command("bash", "-c", `source .local/env && "$0" dlq -json -wait 0`, lambdaidemCLI(t))
			dlq.Dir, dlq.Env = dir, env
			out, err := dlq.Output() // the JSON; the note on receive counts goes to stderr
			if err != nil {
				t.Fatalf("source .local/env && lambdaidem dlq: %v\n%s", err, out)
			}
			if err := json.Unmarshal(out, &view); err != nil || len(view.Copies) != 1 ||
				view.Copies[0].Key != "u-3" || view.Copies[0].Reason != "poison" {
				t.Errorf("source .local/env && lambdaidem dlq -json (%v): want one copy, key u-3, reason poison:\n%s", err, out)
			}
		})
	}
}

// localRun is a `make local` running in a process group of its own, as a
// terminal runs it.
type localRun struct {
	cmd            *exec.Cmd
	stdout, stderr *testenv.Buffer
	done           chan error
}

func startLocal(t *testing.T, dir string, env []string) *localRun {
	t.Helper()
	l := &localRun{stdout: &testenv.Buffer{}, stderr: &testenv.Buffer{}, done: make(chan error, 1)}
	l.cmd = exec.Command("make", "local")
	l.cmd.Dir, l.cmd.Env, l.cmd.Stdout, l.cmd.Stderr = dir, env, l.stdout, l.stderr
	l.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := l.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { l.done <- l.cmd.Wait() }()
	t.Cleanup(func() {
		if l.cmd.ProcessState == nil {
			_ = syscall.Kill(-l.cmd.Process.Pid, syscall.SIGKILL)
			<-l.done
		}
	})
	l.waitFor(t, "lambdaidem-local: polling ")
	return l
}

// waitFor waits for the runner to report s on stderr, failing the test if
// make local ends first.
func (l *localRun) waitFor(t *testing.T, s string) {
	t.Helper()
	testenv.WaitFor(t, fmt.Sprintf("make local to report %q", s), func() bool {
		select {
		case err := <-l.done:
			l.done <- err
			t.Fatalf("make local exited (%v) before reporting %q:\n%s\n%s", err, s, l.stderr.String(), l.stdout.String())
		default:
		}
		return strings.Contains(l.stderr.String(), s)
	})
}

// waitForOutput waits for the function's output (make local's stdout) to
// match re, failing the test if make local ends first.
func (l *localRun) waitForOutput(t *testing.T, re *regexp.Regexp) {
	t.Helper()
	testenv.WaitFor(t, fmt.Sprintf("the function to print %s", re), func() bool {
		select {
		case err := <-l.done:
			l.done <- err
			t.Fatalf("make local exited (%v) before the function printed %s:\n%s\n%s", err, re, l.stderr.String(), l.stdout.String())
		default:
		}
		return re.MatchString(l.stdout.String())
	})
}

// stop sends Ctrl-C's signal to make local's process group and returns
// what it wrote on stderr (the runner) and stdout (make and the function).
func (l *localRun) stop(t *testing.T) (stderr, stdout string) {
	t.Helper()
	if err := syscall.Kill(-l.cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "make local to stop after Ctrl-C", func() bool {
		select {
		case err := <-l.done:
			l.done <- err
			return true
		default:
			return false
		}
	})
	if err := <-l.done; err != nil && !isInterrupt(err) {
		t.Errorf("make local after Ctrl-C: %v\n%s", err, l.stderr.String())
	}
	return l.stderr.String(), l.stdout.String()
}

// isInterrupt reports whether err is make's exit on SIGINT.
func isInterrupt(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && (ws.Signaled() && ws.Signal() == syscall.SIGINT || ws.ExitStatus() == 130)
}

// filesOf lists the files under dir, slash-separated and relative to it,
// leaving out what a build leaves behind.
func filesOf(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "vendor", ".local", ".aws-sam":
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(dir, path)
		names = append(names, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}
