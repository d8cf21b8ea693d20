package archtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/klique-ai/klique"

// pkg is what `go list -json` says of one package.
type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// listPackages lists every package of the module with its direct imports
// and all its dependencies.
func listPackages(t *testing.T) map[string]*pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", module+"/...").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]*pkg{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		pkgs[strings.TrimPrefix(p.ImportPath, module+"/")] = &p
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	return pkgs
}

func local(path string) (string, bool) {
	if path == module {
		return "", true
	}
	rest, ok := strings.CutPrefix(path, module+"/")
	return rest, ok
}

// under reports whether a module-relative path is dir or below it.
func under(path, dir string) bool { return path == dir || strings.HasPrefix(path, dir+"/") }

// storePackage: the platform's store and its drivers, and the database
// clients behind them. (The gateway's rate limiter keeps its counters in
// Redis through a client of its own: that is not the platform's store.)
func storePackage(path string) bool {
	if p, ok := local(path); ok {
		return under(p, "internal/store")
	}
	return path == "database/sql" || strings.HasPrefix(path, "github.com/jackc/") || strings.HasPrefix(path, "modernc.org/sqlite")
}

// notDomains are the directories under internal/platform that are not a
// domain: what the domains share, and test support.
var notDomains = map[string]bool{"kernel": true, "view": true, "platformtest": true, "testdata": true}

// domains are the packages of the platform that own a part of it: every
// directory under internal/platform but notDomains, read from the tree so
// that a domain added later is guarded without a change here.
var domains = func() []string {
	entries, err := os.ReadDir("../platform")
	if err != nil {
		panic(fmt.Sprintf("read the platform's directory: %v", err))
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && !notDomains[e.Name()] {
			out = append(out, e.Name())
		}
	}
	return out
}()

func domainOf(path string) string {
	p, ok := local(path)
	if !ok {
		return ""
	}
	for _, d := range domains {
		if under(p, "internal/platform/"+d) {
			return d
		}
	}
	return ""
}

// TestImportRules checks the import rules of docs/architecture.md. Each
// failure names the package and the import that breaks a rule.
func TestImportRules(t *testing.T) {
	pkgs := listPackages(t)
	rule := func(name string, check func(p string, info *pkg) []string) {
		t.Run(name, func(t *testing.T) {
			for p, info := range pkgs {
				for _, bad := range check(p, info) {
					t.Errorf("%s imports %s", p, bad)
				}
			}
		})
	}

	rule("the engine imports no store, events, HTTP or metrics package, even indirectly", func(p string, info *pkg) []string {
		if p != "engine" {
			return nil
		}
		var bad []string
		for _, d := range info.Deps {
			l, _ := local(d)
			if storePackage(d) || strings.HasPrefix(d, "github.com/redis/") || under(l, "internal/events") || strings.HasPrefix(d, "net/http") ||
				strings.HasPrefix(d, "github.com/prometheus/") || under(l, "internal/platform") {
				bad = append(bad, d)
			}
		}
		return bad
	})

	rule("a domain imports no other domain, and not the facade", func(p string, info *pkg) []string {
		own := domainOf(module + "/" + p)
		isKernel := under(p, "internal/platform/kernel") || under(p, "internal/platform/view")
		if own == "" && !isKernel {
			return nil
		}
		var bad []string
		for _, imp := range info.Imports {
			if d := domainOf(imp); d != "" && d != own {
				bad = append(bad, imp)
			}
			if imp == module+"/internal/platform" {
				bad = append(bad, imp)
			}
		}
		return bad
	})

	rule("the channels import no store package", func(p string, info *pkg) []string {
		if !under(p, "graph") && !under(p, "mcp") && !under(p, "gateway") {
			return nil
		}
		var bad []string
		for _, imp := range info.Imports {
			if storePackage(imp) {
				bad = append(bad, imp)
			}
		}
		return bad
	})

	rule("nothing under internal imports graph, mcp or gateway but the composition root", func(p string, info *pkg) []string {
		if !under(p, "internal") || under(p, "internal/server") {
			return nil
		}
		var bad []string
		for _, imp := range info.Imports {
			if l, ok := local(imp); ok && (under(l, "graph") || under(l, "mcp") || under(l, "gateway")) {
				bad = append(bad, imp)
			}
		}
		return bad
	})

	rule("the engine loop knows the platform only through its planner interface, and reads in the engine's types (no store)", func(p string, info *pkg) []string {
		if !under(p, "engine/loop") {
			return nil
		}
		var bad []string
		for _, imp := range info.Imports {
			if l, ok := local(imp); ok && (under(l, "internal/platform") || storePackage(imp)) {
				bad = append(bad, imp)
			}
		}
		return bad
	})

	rule("the client side (CLI, client, code recorder) imports nothing of the platform: it knows the server by its API", func(p string, info *pkg) []string {
		if !under(p, "internal/cli") && !under(p, "internal/client") && !under(p, "internal/codestate") {
			return nil
		}
		var bad []string
		for _, imp := range info.Imports {
			if l, ok := local(imp); ok && under(l, "internal/platform") {
				bad = append(bad, imp)
			}
		}
		return bad
	})

	t.Run("the rules see the packages they are about", func(t *testing.T) {
		for _, p := range []string{"engine", "engine/loop", "graph", "mcp", "gateway", "internal/server", "internal/platform",
			"internal/platform/kernel", "internal/platform/view", "internal/cli", "internal/client", "internal/codestate"} {
			if pkgs[p] == nil {
				t.Errorf("package %s is missing: the rules above would pass without looking at it", p)
			}
		}
		for _, d := range domains {
			if pkgs["internal/platform/"+d] == nil {
				t.Errorf("domain %s is missing", d)
			}
		}
		for _, d := range []string{"allocation", "tasks", "fleet", "llm", "access", "live", "apps", "studies", "artifacts", "schedules", "pipelines"} {
			if !slices.Contains(domains, d) {
				t.Errorf("domain %s is not among the domains read from internal/platform (%v)", d, domains)
			}
		}
		if !slices.ContainsFunc(pkgs["internal/platform/allocation"].Imports, func(s string) bool { return strings.HasSuffix(s, "/kernel") }) {
			t.Error("the allocation domain does not import the kernel: is the rule looking at the right imports?")
		}
	})
}
