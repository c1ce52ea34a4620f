// Package purity is test support: it checks that a package's own files import nothing
// they must not, start no goroutine and never read the clock, for the packages that are
// pure functions of their inputs (internal/sched, internal/control).
package purity

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// Rules say what a pure package may import.
type Rules struct {
	// Forbidden standard-library packages, with why.
	Forbidden map[string]string
	// Allowed says whether a package outside the standard library may be imported.
	Allowed func(path string) bool
	// NoGoroutines forbids go statements.
	NoGoroutines bool
}

// clock are the time functions that read or wait on the clock; time's types are fine.
var clock = map[string]bool{"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
	"Tick": true, "NewTimer": true, "NewTicker": true, "AfterFunc": true}

// Check checks the package in dir (its non-test files) against the rules.
func Check(t testing.TB, dir string, r Rules) {
	t.Helper()
	pkg, err := build.ImportDir(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkg.GoFiles) == 0 {
		t.Fatal("no Go files found")
	}
	for _, imp := range pkg.Imports {
		first, _, _ := strings.Cut(imp, "/")
		switch why, bad := r.Forbidden[imp]; {
		case !strings.Contains(first, "."):
			if bad {
				t.Errorf("%s imports %s: %s", pkg.ImportPath, imp, why)
			}
		case r.Allowed == nil || !r.Allowed(imp):
			t.Errorf("%s imports %s: only the standard library and the packages its rules allow", pkg.ImportPath, imp)
		}
	}
	fset := token.NewFileSet()
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, dir+"/"+name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				if r.NoGoroutines {
					t.Errorf("%s: a goroutine in a pure package", fset.Position(n.Pos()))
				}
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok && id.Name == "time" && clock[n.Sel.Name] {
					t.Errorf("%s: time.%s reads the clock; time is an input", fset.Position(n.Pos()), n.Sel.Name)
				}
			}
			return true
		})
	}
}
