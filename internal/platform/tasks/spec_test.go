package tasks_test

import (
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/tasks"
)

// The task spec's rules, one problem at a time: each bad spec is refused
// with a problem that names what to change, and a good one passes.

func TestValidateTaskSpec(t *testing.T) {
	cmd := []string{"python", "train.py"}
	newFile := "--- /dev/null\n+++ b/train.py\n@@ -0,0 +1 @@\n+print(1)\n"
	changesFile := "--- a/train.py\n+++ b/train.py\n@@ -1 +1 @@\n-print(1)\n+print(2)\n"
	cases := []struct {
		name string
		task string
		spec model.TaskSpec
		want string // a word of the one problem; "" when the spec is good
	}{
		{"a command", "train", model.TaskSpec{Command: cmd}, ""},
		{"a repository and entry point", "train", model.TaskSpec{Repository: "https://git.example/r.git", EntryPoint: "train.py", Commit: "abc"}, ""},
		{"a script uploaded as a diff", "train", model.TaskSpec{Command: cmd, Diff: newFile}, ""},
		{"empty name", " ", model.TaskSpec{Command: cmd}, "name is empty"},
		{"name with a trailing space", "train ", model.TaskSpec{Command: cmd}, "starts or ends with a space"},
		{"name too long", strings.Repeat("n", tasks.MaxTaskNameLength+1), model.TaskSpec{Command: cmd}, "longer than 200 characters"},
		{"name with a NUL", "tr\x00ain", model.TaskSpec{Command: cmd}, "name holds invalid characters"},
		{"nothing to run", "train", model.TaskSpec{}, "say what to run"},
		{"repository without entry point", "train", model.TaskSpec{Repository: "r"}, "needs an entry point"},
		{"diff that changes files without repository", "train", model.TaskSpec{Command: cmd, Diff: changesFile}, "a diff that changes files needs the repository"},
		{"commit without repository", "train", model.TaskSpec{Command: cmd, Commit: "abc"}, "a commit needs the repository"},
		{"too many arguments", "train", model.TaskSpec{Command: strings.Fields(strings.Repeat("x ", tasks.MaxCommandArgs+1))}, "more than 256"},
		{"empty program", "train", model.TaskSpec{Command: []string{" ", "x"}}, "empty program name"},
		{"argument too long", "train", model.TaskSpec{Command: []string{"echo", strings.Repeat("a", tasks.MaxArgLength+1)}}, "command argument 2 is longer"},
		{"image with a space", "train", model.TaskSpec{Command: cmd, Image: "py torch"}, "must not hold spaces"},
		{"empty package", "train", model.TaskSpec{Command: cmd, Packages: []string{"torch", " "}}, "a package entry is empty"},
		{"empty parameter name", "train", model.TaskSpec{Command: cmd, Parameters: map[string]string{"": "1"}}, "parameter name \"\""},
		{"parameter value too long", "train", model.TaskSpec{Command: cmd, Parameters: map[string]string{"lr": strings.Repeat("1", tasks.MaxParamValueLength+1)}}, "parameter lr is longer"},
		{"bad environment name", "train", model.TaskSpec{Command: cmd, Env: map[string]string{"1X": "y"}}, "environment variable name \"1X\""},
		{"bad secret name", "train", model.TaskSpec{Command: cmd, Secrets: []string{"a-b"}}, "secret name \"a-b\""},
		{"secret named twice", "train", model.TaskSpec{Command: cmd, Secrets: []string{"TOKEN", "TOKEN"}}, "secret TOKEN is named twice"},
		{"secret also in env", "train", model.TaskSpec{Command: cmd, Secrets: []string{"CACHE_DIR"}, Env: map[string]string{"CACHE_DIR": "x"}}, "name it in secrets only"},
		{"input named twice", "train", model.TaskSpec{Command: cmd, Inputs: []model.ArtifactInput{
			{Name: "data", TaskID: "r1", Artifact: "out"}, {Name: "DATA", TaskID: "r2", Artifact: "out"}}}, "input DATA is named twice"},
		{"input without its run", "train", model.TaskSpec{Command: cmd, Inputs: []model.ArtifactInput{{Name: "data", Artifact: "out"}}}, "give the id of the run"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ps := tasks.ValidateTaskSpec(c.task, &c.spec)
			if c.want == "" {
				if len(ps) > 0 {
					t.Fatalf("a good spec was refused: %q", ps)
				}
				return
			}
			if len(ps) != 1 || !strings.Contains(ps[0], c.want) {
				t.Fatalf("problems %q; want one saying %q", ps, c.want)
			}
		})
	}
}

// A spec with several problems gets all of them, so that one round trip
// fixes it.
func TestValidateTaskSpecReportsEveryProblem(t *testing.T) {
	ps := tasks.ValidateTaskSpec("", &model.TaskSpec{Commit: "abc", Image: "a b"})
	for _, want := range []string{"name is empty", "say what to run", "a commit needs", "must not hold spaces"} {
		found := false
		for _, p := range ps {
			found = found || strings.Contains(p, want)
		}
		if !found {
			t.Errorf("problems %q miss %q", ps, want)
		}
	}
}

func TestValidateTags(t *testing.T) {
	many := make([]string, tasks.MaxTags+1)
	for i := range many {
		many[i] = "t" + strings.Repeat("x", i)
	}
	cases := []struct {
		name string
		in   []string
		want string // the kept tags joined by ","; or the error's words
		ok   bool
	}{
		{"none", nil, "", true},
		{"trimmed and deduplicated in order", []string{" b ", "a", "b", "team/ml:v1.2_x-y"}, "b,a,team/ml:v1.2_x-y", true},
		{"sixteen after deduplication", append(many[:tasks.MaxTags:tasks.MaxTags], many[0]), strings.Join(many[:tasks.MaxTags], ","), true},
		{"empty", []string{"a", "  "}, "a tag is empty", false},
		{"too long", []string{strings.Repeat("a", tasks.MaxTagLength+1)}, "longer than 64", false},
		{"space", []string{"two words"}, "use letters, digits", false},
		{"non-ascii", []string{"café"}, "use letters, digits", false},
		{"too many", many, "17 tags", false},
	}
	for _, c := range cases {
		got, err := tasks.ValidateTags(c.in)
		switch {
		case c.ok && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.ok && strings.Join(got, ",") != c.want:
			t.Errorf("%s: kept %q, want %q", c.name, got, c.want)
		case !c.ok && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v; want an error saying %q", c.name, err, c.want)
		}
	}
}

func TestTaskSize(t *testing.T) {
	one, err := model.ParseSize("1")
	if err != nil {
		t.Fatal(err)
	}
	fixed := &model.Profile{Name: "one", Size: one}
	fromParam := &model.Profile{Name: "flex", Size: one, SizeParameter: "gpus"}
	cases := []struct {
		name   string
		pr     *model.Profile
		params map[string]string
		want   string
		err    string
	}{
		{"the profile's own size", fixed, map[string]string{"gpus": "8"}, "1", ""},
		{"read from the parameter", fromParam, map[string]string{"gpus": "4"}, "4", ""},
		{"multi-node from the parameter", fromParam, map[string]string{"gpus": "2x8"}, "2x8", ""},
		{"the default without the parameter", fromParam, nil, "1", ""},
		{"the default for a blank parameter", fromParam, map[string]string{"gpus": " "}, "1", ""},
		{"a parameter that is no size", fromParam, map[string]string{"gpus": "lots"}, "", "parameter gpus"},
	}
	for _, c := range cases {
		got, err := tasks.TaskSize(c.pr, &model.TaskSpec{Parameters: c.params})
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want an error saying %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || got.String() != c.want {
			t.Errorf("%s: size %s, %v; want %s", c.name, got, err, c.want)
		}
	}
}
