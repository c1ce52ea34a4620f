package control

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// TestPure fails if the state machine gains a goroutine, a lock, a clock read or I/O of
// its own: time comes in through SetTime, and effects go out as records and actions.
func TestPure(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkg.GoFiles) == 0 {
		t.Fatal("no Go files found")
	}
	forbidden := map[string]bool{"os": true, "os/exec": true, "net": true, "net/http": true, "io/fs": true, "database/sql": true,
		"sync": true, "sync/atomic": true, "log": true, "log/slog": true, "math/rand": true, "math/rand/v2": true, "crypto/rand": true,
		"syscall": true, "unsafe": true, "context": true}
	for _, imp := range pkg.Imports {
		if forbidden[imp] {
			t.Errorf("control imports %s: the state machine does no I/O, locking, logging of its own or randomness", imp)
		}
		if first, _, _ := strings.Cut(imp, "/"); strings.Contains(first, ".") && !strings.HasPrefix(imp, "github.com/quotashare/quotashare") {
			t.Errorf("control imports %s: only the standard library and the project's own packages", imp)
		}
	}
	clock := map[string]bool{"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
		"Tick": true, "NewTimer": true, "NewTicker": true, "AfterFunc": true}
	fset := token.NewFileSet()
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s: a goroutine; the runner (dispatch) owns all concurrency", fset.Position(n.Pos()))
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok && id.Name == "time" && clock[n.Sel.Name] {
					t.Errorf("%s: time.%s reads the clock; time comes in through SetTime", fset.Position(n.Pos()), n.Sel.Name)
				}
			}
			return true
		})
	}
}
