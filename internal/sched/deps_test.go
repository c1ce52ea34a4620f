package sched_test

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// TestImports fails if the core imports anything beyond the standard library and the
// project's vocabulary package: it must stay pure (no I/O, no clock, no store).
func TestImports(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkg.GoFiles) == 0 {
		t.Fatal("no Go files found")
	}
	allowed := map[string]bool{"github.com/quotashare/quotashare": true}
	forbidden := map[string]bool{"os": true, "net": true, "net/http": true, "io/fs": true, "math/rand": true,
		"math/rand/v2": true, "crypto/rand": true, "log": true, "log/slog": true, "database/sql": true,
		"os/exec": true, "syscall": true, "unsafe": true, "sync": true}
	for _, imp := range pkg.Imports {
		first, _, _ := strings.Cut(imp, "/")
		isStd := !strings.Contains(first, ".")
		switch {
		case allowed[imp]:
		case !isStd:
			t.Errorf("sched imports %s: only the standard library and the vocabulary package are allowed", imp)
		case forbidden[imp]:
			t.Errorf("sched imports %s: the core does no I/O, logging, locking or randomness", imp)
		}
	}
	// time is allowed for its types; the clock must never be read.
	clock := map[string]bool{"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
		"Tick": true, "NewTimer": true, "NewTicker": true, "AfterFunc": true}
	fset := token.NewFileSet()
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "time" && clock[sel.Sel.Name] {
					t.Errorf("%s: time.%s reads the clock; time is an input of the core", fset.Position(sel.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
	}
}
