package platform_test

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
)

func TestValidateTaskSpec(t *testing.T) {
	t.Parallel()
	cmd := func(args ...string) model.TaskSpec { return model.TaskSpec{Command: args} }
	many := func(n int, v string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	params := func(n int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m["p"+strings.Repeat("x", i%100)+string(rune('a'+i/100))] = "v"
		}
		return m
	}
	tests := []struct {
		name     string
		taskName string
		spec     model.TaskSpec
		// want lists words of each problem, in order; nil means valid.
		want []string
	}{
		{name: "a command is valid", taskName: "train", spec: cmd("python", "train.py")},
		{name: "a repository with an entry point is valid", taskName: "train",
			spec: model.TaskSpec{Repository: "https://git.example/r.git", Commit: "abc123", EntryPoint: "train.py", Diff: "--- a\n+++ b\n"}},
		{name: "a repository with a command is valid", taskName: "train", spec: model.TaskSpec{Repository: "r", Command: []string{"make"}}},
		{name: "a name with inner spaces and unicode is valid", taskName: "entraînement n°1", spec: cmd("x")},
		{name: "parameters and environment within bounds are valid", taskName: "t",
			spec: model.TaskSpec{Command: []string{"x"}, Parameters: map[string]string{"lr": "0.1", "x.y-z": ""}, Env: map[string]string{"_A1": "x"}}},

		{name: "an empty name is refused", taskName: "", spec: cmd("x"), want: []string{"name is empty: give the task a name"}},
		{name: "a name of spaces is refused as empty", taskName: " \t", spec: cmd("x"), want: []string{"name is empty"}},
		{name: "a name with a leading space is refused", taskName: " t", spec: cmd("x"), want: []string{"name starts or ends with a space"}},
		{name: "a name longer than 200 bytes is refused", taskName: strings.Repeat("n", 201), spec: cmd("x"), want: []string{"name is longer than 200 characters"}},
		{name: "a name that is not UTF-8 is refused", taskName: "t\xff", spec: cmd("x"), want: []string{"name holds invalid characters"}},
		{name: "a name with a NUL is refused", taskName: "t\x00t", spec: cmd("x"), want: []string{"name holds invalid characters"}},
		{name: "a spec with nothing to run is refused", taskName: "t", spec: model.TaskSpec{Image: "pytorch"},
			want: []string{"say what to run: a command, or a repository with an entry point"}},
		{name: "a repository without an entry point or command is refused", taskName: "t", spec: model.TaskSpec{Repository: "r"},
			want: []string{"a repository needs an entry point (the script to run) or a command"}},
		{name: "a diff without a repository is refused", taskName: "t", spec: model.TaskSpec{Command: []string{"x"}, Diff: "+x"},
			want: []string{"without a repository a diff may only create files"}},
		{name: "a diff that changes a file without a repository is refused", taskName: "t",
			spec: model.TaskSpec{Command: []string{"x"}, Diff: "--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+x\n--- a/old.py\n+++ b/old.py\n"},
			want: []string{"a diff that changes files needs the repository it applies to"}},
		{name: "an uploaded script is a diff that creates a file, valid without a repository", taskName: "t",
			spec: model.TaskSpec{Command: []string{"python", "train.py"}, Diff: "diff --git a/train.py b/train.py\nnew file mode 100644\n--- /dev/null\n+++ b/train.py\n@@ -0,0 +1 @@\n+print(1)\n"}},
		{name: "a commit without a repository is refused", taskName: "t", spec: model.TaskSpec{Command: []string{"x"}, Commit: "abc"},
			want: []string{"a commit needs the repository it belongs to"}},
		{name: "more than 256 arguments are refused", taskName: "t", spec: cmd(many(257, "a")...),
			want: []string{"command has 257 arguments, more than 256"}},
		{name: "an empty program name is refused", taskName: "t", spec: cmd(" ", "x"), want: []string{"command starts with an empty program name"}},
		{name: "an argument longer than 16 KiB is refused", taskName: "t", spec: cmd("x", strings.Repeat("a", 16<<10+1)),
			want: []string{"command argument 2 is longer than 16384 bytes"}},
		{name: "an argument with a NUL is refused", taskName: "t", spec: cmd("x", "a\x00"), want: []string{"command argument 2 holds invalid characters"}},
		{name: "an image with a space is refused", taskName: "t", spec: model.TaskSpec{Command: []string{"x"}, Image: "py torch"},
			want: []string{`image "py torch" must not hold spaces`}},
		{name: "a working directory longer than 4096 bytes is refused", taskName: "t", spec: model.TaskSpec{Command: []string{"x"}, WorkingDir: strings.Repeat("d", 4097)},
			want: []string{"working directory is longer than 4096 bytes"}},
		{name: "a diff over 2 MiB is refused", taskName: "t", spec: model.TaskSpec{Repository: "r", EntryPoint: "e", Diff: strings.Repeat("d", 2<<20+1)},
			want: []string{"diff is longer than 2097152 bytes"}},
		{name: "more than 500 packages are refused", taskName: "t", spec: model.TaskSpec{Command: []string{"x"}, Packages: many(501, "numpy")},
			want: []string{"501 packages listed, more than 500"}},
		{name: "an empty package entry is refused", taskName: "t", spec: model.TaskSpec{Command: []string{"x"}, Packages: []string{"numpy", " "}},
			want: []string{"a package entry is empty"}},
		{name: "more than 512 parameters are refused", taskName: "t", spec: model.TaskSpec{Command: []string{"x"}, Parameters: params(513)},
			want: []string{"513 parameters, more than 512"}},
		{name: "an empty parameter name is refused", taskName: "t", spec: model.TaskSpec{Command: []string{"x"}, Parameters: map[string]string{"": "v"}},
			want: []string{`parameter name "" must be 1 to 128 characters`}},
		{name: "a parameter value over 8 KiB is refused", taskName: "t", spec: model.TaskSpec{Command: []string{"x"}, Parameters: map[string]string{"p": strings.Repeat("v", 8193)}},
			want: []string{"parameter p is longer than 8192 bytes"}},
		{name: "an environment variable name starting with a digit is refused", taskName: "t", spec: model.TaskSpec{Command: []string{"x"}, Env: map[string]string{"1X": "y"}},
			want: []string{`environment variable name "1X" must be letters, digits and '_'`}},
		{name: "an environment variable name with a dash is refused", taskName: "t", spec: model.TaskSpec{Command: []string{"x"}, Env: map[string]string{"A-B": "y"}},
			want: []string{`environment variable name "A-B"`}},
		{name: "an environment value that is not UTF-8 is refused", taskName: "t", spec: model.TaskSpec{Command: []string{"x"}, Env: map[string]string{"A": "\xc3"}},
			want: []string{"environment variable A holds invalid characters"}},
		{name: "every problem is reported, in a stable order", taskName: "", spec: model.TaskSpec{Commit: "c", Image: "a b", Env: map[string]string{"b-": "", "a-": ""}},
			want: []string{"name is empty", "say what to run", "a commit needs the repository", `image "a b"`, `environment variable name "a-"`, `environment variable name "b-"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec := tc.spec
			got := platform.ValidateTaskSpec(tc.taskName, &spec)
			if len(got) != len(tc.want) {
				t.Fatalf("%d problems %q, want %d holding %q", len(got), got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q, want it to hold %q", i, got[i], w)
				}
			}
		})
	}
}

func TestTaskSize(t *testing.T) {
	t.Parallel()
	fixed := &model.Profile{Name: "one", Size: model.Size{Nodes: 1, PerNode: 1000}}
	flex := &model.Profile{Name: "flex", Size: model.Size{Nodes: 1, PerNode: 2000}, SizeParameter: "gpus"}
	tests := []struct {
		name    string
		profile *model.Profile
		params  map[string]string
		want    model.Size
		err     string
	}{
		{"a fixed profile gives its own size", fixed, nil, model.Size{Nodes: 1, PerNode: 1000}, ""},
		{"a fixed profile ignores a size parameter", fixed, map[string]string{"gpus": "8"}, model.Size{Nodes: 1, PerNode: 1000}, ""},
		{"a task without the parameter gets the default", flex, map[string]string{"other": "8"}, model.Size{Nodes: 1, PerNode: 2000}, ""},
		{"a blank parameter gets the default", flex, map[string]string{"gpus": "  "}, model.Size{Nodes: 1, PerNode: 2000}, ""},
		{"a whole number is read", flex, map[string]string{"gpus": " 4 "}, model.Size{Nodes: 1, PerNode: 4000}, ""},
		{"a fraction is read", flex, map[string]string{"gpus": "0.125"}, model.Size{Nodes: 1, PerNode: 125}, ""},
		{"nodes by GPUs are read", flex, map[string]string{"gpus": "2X8"}, model.Size{Nodes: 2, PerNode: 8000}, ""},
		{"a word is refused", flex, map[string]string{"gpus": "many"}, model.Size{}, `parameter gpus: GPU size "many" is not a number`},
		{"zero is refused", flex, map[string]string{"gpus": "0"}, model.Size{}, "parameter gpus: GPU size 0 must be greater than 0"},
		{"a fraction over nodes is refused", flex, map[string]string{"gpus": "2x0.5"}, model.Size{}, "fractions cannot span nodes"},
		{"more than 1024 GPUs on a node is refused", flex, map[string]string{"gpus": "2048"}, model.Size{}, "more than 1024 GPUs on one node"},
		{"NaN is refused", flex, map[string]string{"gpus": "NaN"}, model.Size{}, "must be greater than 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := platform.TaskSize(tc.profile, &model.TaskSpec{Parameters: tc.params})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("TaskSize = %v, %v; want an error holding %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("TaskSize = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// FuzzValidateTaskSpec feeds names, commands and parameters to
// ValidateTaskSpec and TaskSize. Nothing may panic, and:
//   - a blank name is always a problem, a clean one never;
//   - a command starting with a blank program name is always a problem;
//   - the problems are the same on a second call, and the spec is untouched;
//   - a size TaskSize accepts is one NewSize accepts, and a blank
//     parameter gives the profile's default.
//
// Seeds live in testdata/fuzz/FuzzValidateTaskSpec; run it with
//
//	go test -run '^$' -fuzz FuzzValidateTaskSpec -fuzztime 60s ./internal/platform
func FuzzValidateTaskSpec(f *testing.F) {
	f.Add("train", "python", "train.py", "gpus", "2x8", "SEED")
	f.Add("", "", "", "", "", "")
	f.Add(" t ", " ", "\x00", "gpus", "0.3", "1X")
	f.Fuzz(func(t *testing.T, name, program, arg, paramKey, paramValue, envKey string) {
		spec := model.TaskSpec{
			Command:    []string{program, arg},
			Parameters: map[string]string{paramKey: paramValue},
			Env:        map[string]string{envKey: paramValue},
		}
		orig := spec
		orig.Command = slices.Clone(spec.Command)
		orig.Parameters = maps.Clone(spec.Parameters)
		orig.Env = maps.Clone(spec.Env)

		ps := platform.ValidateTaskSpec(name, &spec)
		for _, p := range ps {
			if p == "" {
				t.Fatalf("an empty problem in %q", ps)
			}
		}
		if again := platform.ValidateTaskSpec(name, &spec); !slices.Equal(ps, again) {
			t.Fatalf("problems changed between calls: %q then %q", ps, again)
		}
		if !slices.Equal(spec.Command, orig.Command) || !maps.Equal(spec.Parameters, orig.Parameters) || !maps.Equal(spec.Env, orig.Env) {
			t.Fatalf("ValidateTaskSpec changed the spec")
		}
		nameProblem := slices.ContainsFunc(ps, func(p string) bool { return strings.HasPrefix(p, "name ") })
		switch {
		case strings.TrimSpace(name) == "":
			if !slices.Contains(ps, "name is empty: give the task a name") {
				t.Fatalf("blank name %q: problems %q", name, ps)
			}
		case strings.TrimSpace(name) == name && len(name) <= platform.MaxTaskNameLength && utf8.ValidString(name) && !strings.ContainsRune(name, 0):
			if nameProblem {
				t.Fatalf("clean name %q: problems %q", name, ps)
			}
		default:
			if !nameProblem {
				t.Fatalf("bad name %q: no name problem in %q", name, ps)
			}
		}
		if strings.TrimSpace(program) == "" && !slices.Contains(ps, "command starts with an empty program name") {
			t.Fatalf("blank program %q: problems %q", program, ps)
		}

		def := model.Size{Nodes: 1, PerNode: 1000}
		pr := &model.Profile{Name: "p", Size: def, SizeParameter: paramKey}
		size, err := platform.TaskSize(pr, &spec)
		switch {
		case paramKey == "":
			// An empty SizeParameter means a fixed size.
			if err != nil || size != def {
				t.Fatalf("fixed profile: %v, %v", size, err)
			}
		case strings.TrimSpace(paramValue) == "":
			if err != nil || size != def {
				t.Fatalf("blank parameter %q: %v, %v; want the default", paramValue, size, err)
			}
		case err != nil:
			if !strings.HasPrefix(err.Error(), "parameter "+paramKey+": ") {
				t.Fatalf("error %q does not name the parameter", err)
			}
		default:
			if _, err := model.NewSize(size.Nodes, size.PerNode); err != nil {
				t.Fatalf("TaskSize(%q) = %v, which NewSize refuses: %v", paramValue, size, err)
			}
			if again, err := model.ParseSize(size.String()); err != nil || again != size {
				t.Fatalf("size %v does not read back from %q: %v, %v", size, size.String(), again, err)
			}
		}
	})
}
