package model_test

import (
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/runenv"
)

// FuzzArtifactName checks the rule for artifact names, which come from a
// task (a file it wrote, an SDK call) and become paths on a worker and
// keys in the control plane. A name the rule takes is a clean relative
// path that stays under any directory it is joined to; a name it refuses
// gets a message of bounded size (the name is quoted, not echoed whole).
//
//	go test -run '^$' -fuzz '^FuzzArtifactName$' -fuzztime 30s ./internal/model
func FuzzArtifactName(f *testing.F) {
	for _, s := range []string{"model.pt", "checkpoints/epoch-1/weights.bin", "../etc/passwd", "a//b", "./a", "a/.", "/abs", `a\b`,
		"\x00", "caf\xe9", "é/ü", strings.Repeat("x", 256), " ", "a/ /b", "\u202e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		msg := model.ArtifactNameProblem(name)
		if msg != "" {
			if len(msg) > 4*model.MaxArtifactNameLength+200 {
				t.Fatalf("a refusal of %d bytes: %.80q…", len(msg), msg)
			}
			return
		}
		if len(name) > model.MaxArtifactNameLength || !utf8.ValidString(name) || strings.ContainsAny(name, "\x00\\") {
			t.Fatalf("took %q", name)
		}
		if !filepath.IsLocal(name) || path.Clean(name) != name || path.IsAbs(name) {
			t.Fatalf("took %q, which is not a clean relative path", name)
		}
		root := "/srv/artifacts/run"
		if joined := filepath.Join(root, filepath.FromSlash(name)); !strings.HasPrefix(joined, root+"/") {
			t.Fatalf("took %q, which joined to %s is %s", name, root, joined)
		}
	})
}

var envNameRE = regexp.MustCompile(`^KLIQUE_(INPUT|PARAM)_[A-Z0-9_]*$`)

// FuzzInputName checks the rule for the names a task gives the datasets it
// reads (its inputs: earlier runs' artifacts), and the variables made of
// them and of parameter names: whatever the name, the variable is one a
// shell and the worker's environment take.
//
//	go test -run '^$' -fuzz '^FuzzInputName$' -fuzztime 30s ./internal/model
func FuzzInputName(f *testing.F) {
	for _, s := range []string{"train", "val-set_2.v1", "", "a b", "é", "$(id)", strings.Repeat("d", 65), "ﬀ", "ß"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		for _, v := range []string{model.ParamEnvName(name), model.InputEnvName(name)} {
			if !envNameRE.MatchString(v) {
				t.Fatalf("%q makes the variable %q", name, v)
			}
		}
		if model.InputNameProblem(name) != "" {
			return
		}
		if len(name) == 0 || len(name) > 64 {
			t.Fatalf("took %q", name)
		}
		if v := model.InputEnvName(name); !runenv.ValidName(v) || v == "KLIQUE_INPUT_" {
			t.Fatalf("took %q, whose variable %q is not a valid name", name, v)
		}
	})
}
