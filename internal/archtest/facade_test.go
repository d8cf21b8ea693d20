package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// channels are the packages (with those below them) that serve a channel
// over the platform: they reach it through one narrow interface per domain,
// never through the facade.
var channels = []string{"graph", "mcp", "internal/server"}

// facadeHolders are the only files of the channels that may name
// *platform.Service: each channel's platform.go, where its per-domain
// interfaces are declared, the service asserted to satisfy them and passed
// for each, and the server's composition root, which builds the service
// and everything over it.
var facadeHolders = []string{"graph/platform.go", "mcp/platform.go", "internal/server/platform.go", "internal/server/app.go"}

// TestChannelsReachTheFacadeNarrowly checks the rule of docs/architecture.md
// that the channels reach the platform through a narrow interface per
// domain: outside facadeHolders, no non-test file of a channel names
// *platform.Service, and no non-test file of internal/server but its root
// reads a field named Service (App.Service, which holds the concrete
// service for the root and the tests: a handler or a loop reading it would
// take the whole facade back without naming its type).
func TestChannelsReachTheFacadeNarrowly(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, dir := range channels {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if name := d.Name(); strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			names, fields := facadeUses(t, path)
			if names > 0 {
				seen[rel] = true
			}
			if slices.Contains(facadeHolders, rel) {
				return nil
			}
			if names > 0 {
				t.Errorf("%s names *platform.Service: reach the platform through the package's per-domain interfaces (platform.go)", rel)
			}
			if fields > 0 && under(filepath.ToSlash(filepath.Dir(rel)), "internal/server") {
				t.Errorf("%s reads a field named Service (the concrete platform service): depend on an interface of internal/server/platform.go", rel)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The holders do name the service: else the walk is not looking at the
	// files it means to.
	for _, f := range facadeHolders {
		if !seen[f] {
			t.Errorf("%s does not name *platform.Service: is this test looking at the right files?", f)
		}
	}
}

// facadeUses counts, in one Go file, the places that name the platform's
// Service type (through whatever name the file imports internal/platform
// by), and the selections of a field or method named Service on anything
// else.
func facadeUses(t *testing.T, path string) (names, fields int) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	pkgName := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == module+"/internal/platform" {
			pkgName = "platform"
			if imp.Name != nil {
				pkgName = imp.Name.Name
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "Service" {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && pkgName != "" && id.Name == pkgName {
			names++
		} else {
			fields++
		}
		return true
	})
	return names, fields
}
