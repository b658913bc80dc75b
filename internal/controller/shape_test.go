package controller_test

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/reloader-operator/reloader/internal/controller"
)

// The reconciler stays a narrow thing: a new guardrail is a gate in a package of its own and
// one line in the order (internal/app), never another field or method here. DEVELOPMENT.md
// states these bounds.
const (
	maxReconcilerFields  = 12
	maxReconcilerMethods = 25
	maxReconcilerFiles   = 8
	maxPackageLines      = 3000
)

func TestReconcilerStaysNarrow(t *testing.T) {
	if n := reflect.TypeFor[controller.WorkloadReconciler]().NumField(); n > maxReconcilerFields {
		t.Errorf("WorkloadReconciler has %d fields, at most %d", n, maxReconcilerFields)
	}
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	methods, in := 0, map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) == 0 {
				continue
			}
			typ := fn.Recv.List[0].Type
			if star, ok := typ.(*ast.StarExpr); ok {
				typ = star.X
			}
			if id, ok := typ.(*ast.Ident); ok && id.Name == "WorkloadReconciler" {
				methods++
				in[name] = true
			}
		}
	}
	if methods == 0 {
		t.Fatal("no method of WorkloadReconciler found: the test reads the wrong files")
	}
	if methods > maxReconcilerMethods || len(in) > maxReconcilerFiles {
		t.Errorf("WorkloadReconciler has %d methods in %d files, at most %d in %d", methods, len(in), maxReconcilerMethods, maxReconcilerFiles)
	}
}

// No package of internal/ holds more than maxPackageLines lines of non-test code.
func TestNoPackageGrowsPastItsBound(t *testing.T) {
	lines := map[string]int{}
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines[filepath.Dir(path)]++
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if lines[filepath.Join("..", "controller")] == 0 || len(lines) < 10 {
		t.Fatalf("counted %d packages (this one %d lines): the walk missed internal/", len(lines), lines[filepath.Join("..", "controller")])
	}
	for pkg, n := range lines {
		if n > maxPackageLines {
			t.Errorf("internal/%s: %d lines of non-test code, at most %d", strings.TrimPrefix(filepath.ToSlash(pkg), "../"), n, maxPackageLines)
		}
	}
}
