package main

import (
	"bufio"
	"bytes"
	"context"
	"embed"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/template"
)

// ---- new ----

// newModuleFS holds the templates of the module that `lambdaidem new`
// writes: each file's path in the module with .tmpl appended
// (gitignore.tmpl is .gitignore).
//
//go:embed newmodule
var newModuleFS embed.FS

const (
	// libraryModule is this module's path: a generated go.mod requires it
	// and replaces it with a clone.
	libraryModule = "github.com/lambdaidem/go-lambdaidem"
	// libraryGoVersion is the go line of this module's go.mod, which a
	// generated go.mod repeats (a test keeps the two equal).
	libraryGoVersion = "1.26.0"
)

const newUsage = `Usage: lambdaidem new [-store dynamodb|redis] [-module PATH] [-replace PATH] DIR

Write a Go module of your own in DIR (new, or empty): an SQS-triggered Lambda
function on lambdaidem, tested, runnable on your machine and deployable. It
sends each new user one welcome email; make it yours.

  handler.go       the handler: the key from the body (WithKeyJSONField),
                   lambdaidem.Poison, lambdaidem.RetryAfter, the effect
                   through an interface the tests fake, with EffectKey
  handler_test.go  kit tests (package lambdaidemtest): duplicates, a crash
                   and a 504 after the effect, poison, a busy downstream,
                   an exploration
  main.go          the store, the dead-letter queue, visibility changes,
                   backoff, metrics; settings from the environment
  template.yaml    the function, its queue, dead-letter queue and alarm, the
                   table (or, for Redis, the VPC settings), a least-privilege role
  Makefile         make test; make local (the function under lambdaidem-local
                   on the local stack) and make send; make vendor, then
                   sam build (build-Function)
  resources.json, send/, README.md, .gitignore

DIR's name names the function's queues, table and records' namespace. Then
it runs go mod tidy in DIR.

lambdaidem is not published yet: the generated go.mod requires it at v0.0.0
and replaces it with a clone, by default the clone this lambdaidem was built
from (go run or go install there), written as its absolute path; -replace
names another (a relative PATH is relative to DIR). sam build copies only
DIR, so the clone reaches it through vendor/: run make vendor before sam
build.

Flags:
`

// newModule is what the templates of a new module read.
type newModule struct {
	// Name is DIR's base name: the function's queues, table, namespace.
	Name string
	// Module is the module path.
	Module string
	// Store is "dynamodb" or "redis".
	Store string
	// Replace is where go.mod's replace directive points, as go.mod
	// spells it.
	Replace string
	// GoVersion is go.mod's go line.
	GoVersion string
}

// Redis reports whether the module uses the Redis store.
func (m newModule) Redis() bool { return m.Store == "redis" }

// validName is a DIR name the generated names can carry: SQS queue names
// (with -dlq) and DynamoDB table names (with -idempotency) take it as it is.
var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// validModule is a module path: what go.mod accepts without quotes.
var validModule = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._~-]*(/[A-Za-z0-9._~-]+)*$`)

// runNew runs `lambdaidem new` and returns the exit code.
func (a *app) runNew(ctx context.Context, args []string) int {
	err := a.writeNewModule(ctx, args)
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	}
	fmt.Fprintf(a.stderr, "lambdaidem new: %v\n", err)
	code := exitCode(err)
	if code == exitUsage {
		fmt.Fprintln(a.stderr, `(run "lambdaidem new -h" for usage)`)
	}
	return code
}

// writeNewModule parses new's command line, checks all of it, then writes
// the module and tidies it.
func (a *app) writeNewModule(ctx context.Context, args []string) error {
	var m newModule
	var replace string
	fs := flag.NewFlagSet("lambdaidem new", flag.ContinueOnError)
	fs.SetOutput(a.stderr)
	fs.StringVar(&m.Store, "store", "dynamodb", "the idempotency store: dynamodb or redis")
	fs.StringVar(&m.Module, "module", "", "the module `path` (default example.com/ and DIR's name)")
	fs.StringVar(&replace, "replace", "", "the lambdaidem clone go.mod's replace directive points at (default: the clone this lambdaidem was built from)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), newUsage)
		fs.PrintDefaults()
	}
	if helpAsked(args) {
		// -h prints to stdout: it is what was asked for, not an error.
		fs.SetOutput(a.stdout)
		fs.Usage()
		return flag.ErrHelp
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return usagef("%v", err)
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) != 1 {
		return usagef("one DIR expected, got %d arguments %q", len(pos), pos)
	}
	if m.Store != "dynamodb" && m.Store != "redis" {
		return usagef("-store %q: want dynamodb or redis", m.Store)
	}
	dir, err := filepath.Abs(pos[0])
	if err != nil {
		return err
	}
	m.Name = filepath.Base(dir)
	if !validName.MatchString(m.Name) {
		return usagef("DIR's name %q names the function's queues, table and namespace: use letters, digits, '-' and '_' (at most 64, the first a letter or digit)", m.Name)
	}
	if m.Module == "" {
		m.Module = "example.com/" + m.Name
	}
	if !validModule.MatchString(m.Module) {
		return usagef("-module %q is not a module path", m.Module)
	}
	if replace == "" {
		if replace = sourceClone(); replace == "" {
			return usagef("cannot tell which lambdaidem clone this lambdaidem was built from (a -trimpath build, or the clone has moved): pass -replace PATH")
		}
	}
	target := replace
	if !filepath.IsAbs(target) {
		target = filepath.Join(dir, target)
	}
	if !isClone(target) {
		return usagef("-replace %s: %s has no go.mod of %s", replace, target, libraryModule)
	}
	m.Replace, m.GoVersion = goModPath(replace), libraryGoVersion
	if err := emptyDir(dir); err != nil {
		return err
	}

	files, err := renderModule(m)
	if err != nil {
		return err
	}
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			return err
		}
	}
	store := map[string]string{"dynamodb": "DynamoDB", "redis": "Redis"}[m.Store]
	fmt.Fprintf(a.stdout, "lambdaidem new: wrote %s: module %s, %s store; go.mod replaces %s with %s\n", pos[0], m.Module, store, libraryModule, replace)
	fmt.Fprintf(a.stdout, "lambdaidem new: go mod tidy\n")
	if out, err := a.goTool(ctx, dir, "mod", "tidy"); err != nil {
		return fmt.Errorf("go mod tidy in %s: %w\n%s", pos[0], err, out)
	}
	fmt.Fprintf(a.stdout, `
  cd %s
  make test     # the handler under lambdaidem's kit
  make local    # the function under lambdaidem-local on the local stack, until Ctrl-C
  make send     # in another shell: send it a signup
  make vendor && sam build && sam deploy --guided
`, pos[0])
	return nil
}

// goTool runs the go command in dir and returns its output.
func (a *app) goTool(ctx context.Context, dir string, args ...string) ([]byte, error) {
	if a.goCmd != nil {
		return a.goCmd(ctx, dir, args...)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	return cmd.CombinedOutput()
}

// emptyDir makes sure dir is a directory with nothing in it, or does not
// exist: new writes a module of its own, never over one.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return usagef("DIR: %v", err)
	case len(entries) > 0:
		return refusef("%s is not empty: lambdaidem new writes a new module, never over files", dir)
	}
	return nil
}

// moduleFile is one file of a new module: its slash-separated path in the
// module and its contents.
type moduleFile struct {
	path string
	data []byte
}

// renderModule renders every template of newModuleFS for m, in path
// order. The templates write Go as gofmt does (a test checks it).
func renderModule(m newModule) ([]moduleFile, error) {
	var files []moduleFile
	err := fs.WalkDir(newModuleFS, "newmodule", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		name := strings.TrimSuffix(strings.TrimPrefix(p, "newmodule/"), ".tmpl")
		if path.Base(name) == "gitignore" {
			name = path.Join(path.Dir(name), ".gitignore")
		}
		text, err := newModuleFS.ReadFile(p)
		if err != nil {
			return err
		}
		t, err := template.New(name).Option("missingkey=error").Parse(string(text))
		if err != nil {
			return err
		}
		var b bytes.Buffer
		if err := t.Execute(&b, m); err != nil {
			return err
		}
		files = append(files, moduleFile{path: name, data: b.Bytes()})
		return nil
	})
	slices.SortFunc(files, func(a, b moduleFile) int { return strings.Compare(a.path, b.path) })
	return files, err
}

// sourceClone returns the root of the lambdaidem clone this binary was
// built from: where its source was when it was compiled (go run or go
// install in a clone). It returns "" when that is unknown (a -trimpath
// build) or the directory is no longer a clone.
func sourceClone() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return ""
	}
	root := filepath.Dir(filepath.Dir(filepath.Dir(file))) // cmd/lambdaidem/new.go
	if !isClone(root) {
		return ""
	}
	return root
}

// isClone reports whether dir holds the go.mod of lambdaidem.
func isClone(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`) == libraryModule
		}
	}
	return false
}

// unquotedPath is a path go.mod takes without quotes.
var unquotedPath = regexp.MustCompile(`^[A-Za-z0-9/._~+:@-]+$`)

// goModPath spells a path as go.mod needs it: quoted when it holds
// anything but the characters of an unquoted one.
func goModPath(p string) string {
	if unquotedPath.MatchString(p) {
		return p
	}
	return strconv.Quote(p)
}
