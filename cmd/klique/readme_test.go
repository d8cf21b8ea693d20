package main

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/config"
)

var settingName = regexp.MustCompile(`KLIQUE_[A-Z0-9_]*[A-Z0-9]`)

// TestReadmeListsEverySettingTheBinaryReads collects every KLIQUE_
// variable the klique binary reads (the server's configuration, asked
// through a recording getenv, and every os.Getenv or os.LookupEnv of a
// KLIQUE_ name in the packages the binary is built from) and fails when
// the README's Configuration section does not list one, or lists one
// nothing reads.
func TestReadmeListsEverySettingTheBinaryReads(t *testing.T) {
	read := map[string]string{}
	if _, err := config.FromEnv(func(k string) string {
		read[k] = "internal/config"
		return ""
	}); err != nil {
		t.Fatal(err)
	}
	for name, where := range envReadsOfTheBinary(t) {
		read[name] = where
	}
	if len(read) < 10 {
		t.Fatalf("found only %d settings read: %v", len(read), read)
	}

	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Configuration\n")
	if !ok {
		t.Fatal("README.md has no ## Configuration section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	listed := map[string]bool{}
	for _, name := range settingName.FindAllString(section, -1) {
		listed[name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(read)) {
		if !listed[name] {
			t.Errorf("%s reads %s, which the README's Configuration section does not list", read[name], name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(listed)) {
		if read[name] == "" {
			t.Errorf("the README's Configuration section lists %s, which the klique binary does not read", name)
		}
	}
}

// envReadsOfTheBinary returns the KLIQUE_ names passed as a constant to
// os.Getenv or os.LookupEnv in the module's packages that the klique
// binary is built from (test helpers such as pgtest are not), with the
// file that reads each.
func envReadsOfTheBinary(t *testing.T) map[string]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-json=ImportPath,Dir,GoFiles,Module", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	reads := map[string]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var pkg struct {
			ImportPath, Dir string
			GoFiles         []string
			Module          *struct{ Main bool }
		}
		if err := dec.Decode(&pkg); err != nil {
			t.Fatal(err)
		}
		if pkg.Module == nil || !pkg.Module.Main {
			continue
		}
		fset := token.NewFileSet()
		var files []*ast.File
		consts := map[string]string{}
		for _, name := range pkg.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(pkg.Dir, name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
			for _, obj := range f.Scope.Objects {
				if obj.Kind != ast.Con {
					continue
				}
				if vs, ok := obj.Decl.(*ast.ValueSpec); ok {
					for i, id := range vs.Names {
						if i < len(vs.Values) {
							if s, ok := stringLit(vs.Values[i]); ok {
								consts[id.Name] = s
							}
						}
					}
				}
			}
		}
		for i, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) == 0 {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || (sel.Sel.Name != "Getenv" && sel.Sel.Name != "LookupEnv") {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "os" {
					return true
				}
				name, ok := stringLit(call.Args[0])
				if id, isIdent := call.Args[0].(*ast.Ident); !ok && isIdent {
					name, ok = consts[id.Name]
				}
				if ok && strings.HasPrefix(name, "KLIQUE_") {
					reads[name] = pkg.ImportPath + "/" + pkg.GoFiles[i]
				}
				return true
			})
		}
	}
	return reads
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// TestReadmeShellBlocksParse runs `bash -n` on every sh block of the
// README, those no test runs too (the scale-from-zero demo's subshell and
// heredoc), so that none is broken as written.
func TestReadmeShellBlocksParse(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(readme), "```sh\n")[1:]
	if len(blocks) < 5 {
		t.Fatalf("found %d sh blocks in the README", len(blocks))
	}
	for i, b := range blocks {
		body, _, _ := strings.Cut(b, "```")
		cmd := exec.Command("bash", "-n")
		cmd.Stdin = strings.NewReader(body)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("sh block %d does not parse: %v\n%s\n%s", i+1, err, out, body)
		}
	}
}

// The README sends its commands to $KLIQUE_SERVER, set once near the top,
// and the scale-from-zero demo keeps its own server and admin key inside
// its subshell instead of exporting them into the reader's shell.
func TestReadmeUsesKliqueServerAndKeepsTheDemoScoped(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	if !strings.Contains(readme, "\nexport KLIQUE_SERVER=http://127.0.0.1:8080\n") {
		t.Error("the README does not set KLIQUE_SERVER once near the top")
	}
	// The address appears only as a default or in what a command prints,
	// never in a command the reader types.
	for i, block := range strings.Split(readme, "```") {
		if i%2 == 0 {
			continue // prose between code blocks
		}
		for _, line := range strings.Split(block, "\n") {
			l := strings.TrimSpace(line)
			if strings.Contains(l, "127.0.0.1:8080") && !strings.HasPrefix(l, "#") &&
				l != "export KLIQUE_SERVER=http://127.0.0.1:8080" && !strings.HasPrefix(l, "make run") {
				t.Errorf("a command hard-codes the address instead of $KLIQUE_SERVER: %s", l)
			}
		}
	}
	_, demo, _ := strings.Cut(readme, "## Scale from zero")
	demo, _, _ = strings.Cut(demo, "\n## ")
	_, code, _ := strings.Cut(demo, "```sh\n")
	code, _, _ = strings.Cut(code, "```")
	depth := 0
	for _, line := range strings.Split(code, "\n") {
		switch l := strings.TrimSpace(line); {
		case l == "(":
			depth++
		case l == ")":
			depth--
		case strings.HasPrefix(l, "export ") && depth == 0:
			t.Errorf("the scale-from-zero demo exports into the reader's shell: %s", l)
		}
	}
}
