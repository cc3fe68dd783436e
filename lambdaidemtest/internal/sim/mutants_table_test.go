package sim

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const mutantPkg = "github.com/lambdaidem/go-lambdaidem/internal/mutant"

// mutantSwitch is one mutant.On call in the module's production code.
type mutantSwitch struct {
	name string
	file string // module-relative, slash-separated
	pos  token.Position
}

// TestMutantTableMatchesSwitches holds the mutant table and the production
// sources to each other: every mutant.On in a non-test file of the module
// names a row of Mutants, every row has exactly one switch, in the file its
// Where names, and every switch stands on a line of its own (the whole
// condition of an if, the whole right side of an assignment, or the whole
// expression of a switch case), never inside a compound condition.
func TestMutantTableMatchesSwitches(t *testing.T) {
	root := moduleRoot(t)
	switches := mutantSwitches(t, root)
	if len(switches) == 0 {
		t.Fatalf("found no mutant.On call under %s: is the walk reading the module?", root)
	}

	rows := map[string]Mutant{}
	for _, m := range Mutants {
		if _, dup := rows[m.Name]; dup {
			t.Errorf("mutant %q has two rows", m.Name)
		}
		rows[m.Name] = m
		if m.What == "" || m.Where == "" {
			t.Errorf("mutant %q: the row needs What and Where", m.Name)
		}
	}
	byName := map[string][]mutantSwitch{}
	for _, s := range switches {
		byName[s.name] = append(byName[s.name], s)
	}
	for name, ss := range byName {
		m, ok := rows[name]
		if !ok {
			t.Errorf("%s: switch %q has no row in Mutants (mutants.go)", ss[0].pos, name)
			continue
		}
		if len(ss) > 1 {
			t.Errorf("mutant %q has %d switches (%s and %s): one line must switch a bug on", name, len(ss), ss[0].pos, ss[1].pos)
		}
		for _, s := range ss {
			if s.file != m.Where {
				t.Errorf("%s: switch %q is in %s, its row says %s", s.pos, name, s.file, m.Where)
			}
		}
	}
	for _, m := range Mutants {
		if len(byName[m.Name]) == 0 {
			t.Errorf("mutant %q (%s) has no mutant.On switch in the sources; its row would measure nothing", m.Name, m.Where)
		}
	}
}

// moduleRoot is the directory of the module's go.mod, above this package.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/lambdaidem/go-lambdaidem\n") {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod of github.com/lambdaidem/go-lambdaidem above the test's directory")
		}
		dir = up
	}
}

// mutantSwitches parses every non-test .go file of the module (not
// testdata, not hidden directories, not nested modules) and returns its
// mutant.On calls, failing the test for a call that is not a standalone
// switch or does not name its mutant with a string literal.
func mutantSwitches(t *testing.T, root string) []mutantSwitch {
	t.Helper()
	var out []mutantSwitch
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); path != root && err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		local := ""
		for _, im := range f.Imports {
			if p, _ := strconv.Unquote(im.Path.Value); p == mutantPkg {
				local = "mutant"
				if im.Name != nil {
					local = im.Name.Name
				}
			}
		}
		if local == "" {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		for _, c := range onCalls(f, local) {
			pos := fset.Position(c.call.Pos())
			if !c.standalone {
				t.Errorf("%s: mutant.On inside a larger expression; give it a line of its own (if mutant.On(...) { ... } or x := mutant.On(...))", pos)
			}
			lit, ok := c.call.Args[0].(*ast.BasicLit)
			if len(c.call.Args) != 1 || !ok || lit.Kind != token.STRING {
				t.Errorf("%s: mutant.On must name its mutant with a string literal", pos)
				continue
			}
			mname, _ := strconv.Unquote(lit.Value)
			out = append(out, mutantSwitch{name: mname, file: filepath.ToSlash(rel), pos: pos})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(out, func(a, b mutantSwitch) int { return strings.Compare(a.pos.String(), b.pos.String()) })
	return out
}

type onCall struct {
	call       *ast.CallExpr
	standalone bool
}

// onCalls finds the calls local.On(...) in f and tells whether each stands
// alone: the whole condition of an if, the whole right side of a one-value
// assignment or declaration, or the only expression of a case.
func onCalls(f *ast.File, local string) []onCall {
	isOn := func(e ast.Expr) (*ast.CallExpr, bool) {
		c, ok := e.(*ast.CallExpr)
		if !ok {
			return nil, false
		}
		sel, ok := c.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "On" {
			return nil, false
		}
		id, ok := sel.X.(*ast.Ident)
		return c, ok && id.Name == local
	}
	alone := map[*ast.CallExpr]bool{}
	var all []*ast.CallExpr
	ast.Inspect(f, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.IfStmt:
			if c, ok := isOn(x.Cond); ok {
				alone[c] = true
			}
		case *ast.AssignStmt:
			if len(x.Rhs) == 1 && len(x.Lhs) == 1 {
				if c, ok := isOn(x.Rhs[0]); ok {
					alone[c] = true
				}
			}
		case *ast.ValueSpec:
			if len(x.Values) == 1 && len(x.Names) == 1 {
				if c, ok := isOn(x.Values[0]); ok {
					alone[c] = true
				}
			}
		case *ast.CaseClause:
			if len(x.List) == 1 {
				if c, ok := isOn(x.List[0]); ok {
					alone[c] = true
				}
			}
		case *ast.CallExpr:
			if c, ok := isOn(x); ok {
				all = append(all, c)
			}
		}
		return true
	})
	out := make([]onCall, len(all))
	for i, c := range all {
		out[i] = onCall{call: c, standalone: alone[c]}
	}
	return out
}
