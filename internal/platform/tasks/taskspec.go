package tasks

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/runenv"
)

// Bounds on a task spec. A task record holds intent, not data: anything
// larger belongs in the repository, the image or a dataset.
const (
	MaxTaskNameLength   = 200
	MaxCommandArgs      = 256
	MaxArgLength        = 16 << 10
	MaxFieldLength      = 4096
	MaxDiffBytes        = model.MaxDiffBytes
	MaxPackages         = 500
	MaxParameters       = 512
	MaxParamKeyLength   = 128
	MaxParamValueLength = 8192
	MaxEnvVars          = runenv.MaxVars
)

// ValidateTaskSpec checks what a task runs and returns every problem, each
// saying what to change. It is the same check for every channel.
func ValidateTaskSpec(name string, spec *model.TaskSpec) []string {
	var ps []string
	add := func(format string, args ...any) { ps = append(ps, fmt.Sprintf(format, args...)) }
	text := func(field, v string, max int) {
		if len(v) > max {
			add("%s is longer than %d bytes", field, max)
		}
		if !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
			add("%s holds invalid characters", field)
		}
	}

	switch n := strings.TrimSpace(name); {
	case n == "":
		add("name is empty: give the task a name")
	case utf8.RuneCountInString(name) > MaxTaskNameLength:
		add("name is longer than %d characters", MaxTaskNameLength)
	case n != name:
		add("name starts or ends with a space")
	default:
		text("name", name, MaxTaskNameLength)
	}

	hasCommand := len(spec.Command) > 0
	hasRepo := spec.Repository != ""
	switch {
	case !hasCommand && !hasRepo:
		add("say what to run: a command, or a repository with an entry point")
	case hasRepo && spec.EntryPoint == "" && !hasCommand:
		add("a repository needs an entry point (the script to run) or a command")
	}
	if spec.Diff != "" && !hasRepo && !onlyCreatesFiles(spec.Diff) {
		add("without a repository a diff may only create files (a script 'klique run' uploads); a diff that changes files needs the repository it applies to")
	}
	if spec.Commit != "" && !hasRepo {
		add("a commit needs the repository it belongs to")
	}
	if len(spec.Command) > MaxCommandArgs {
		add("command has %d arguments, more than %d", len(spec.Command), MaxCommandArgs)
	}
	for i, arg := range spec.Command {
		if i == 0 && strings.TrimSpace(arg) == "" {
			add("command starts with an empty program name")
		}
		text(fmt.Sprintf("command argument %d", i+1), arg, MaxArgLength)
	}
	text("repository", spec.Repository, MaxFieldLength)
	text("commit", spec.Commit, MaxFieldLength)
	text("entry point", spec.EntryPoint, MaxFieldLength)
	text("working directory", spec.WorkingDir, MaxFieldLength)
	text("image", spec.Image, MaxFieldLength)
	text("diff", spec.Diff, MaxDiffBytes)
	if strings.ContainsAny(spec.Image, " \t\n") {
		add("image %q must not hold spaces", spec.Image)
	}
	if len(spec.Packages) > MaxPackages {
		add("%d packages listed, more than %d", len(spec.Packages), MaxPackages)
	}
	for _, p := range spec.Packages {
		if strings.TrimSpace(p) == "" {
			add("a package entry is empty")
		}
		text("package "+p, p, 512)
	}
	if len(spec.Parameters) > MaxParameters {
		add("%d parameters, more than %d", len(spec.Parameters), MaxParameters)
	}
	for _, k := range kernel.SortedKeys(spec.Parameters) {
		if k == "" || len(k) > MaxParamKeyLength {
			add("parameter name %q must be 1 to %d characters", k, MaxParamKeyLength)
		}
		text("parameter "+k, spec.Parameters[k], MaxParamValueLength)
	}
	if len(spec.Env) > MaxEnvVars {
		add("%d environment variables, more than %d", len(spec.Env), MaxEnvVars)
	}
	for _, k := range kernel.SortedKeys(spec.Env) {
		if !runenv.ValidName(k) {
			add("environment variable name %q must be letters, digits and '_', not starting with a digit", k)
		}
		text("environment variable "+k, spec.Env[k], runenv.MaxValueLength)
	}
	if len(spec.Secrets) > MaxEnvVars {
		add("%d secrets named, more than %d", len(spec.Secrets), MaxEnvVars)
	}
	seen := map[string]bool{}
	for _, name := range spec.Secrets {
		switch {
		case !runenv.ValidName(name):
			add("secret name %q must be letters, digits and '_', not starting with a digit", name)
		case seen[name]:
			add("secret %s is named twice", name)
		case spec.Env[name] != "":
			add("secret %s is also set as an environment variable; name it in secrets only", name)
		}
		seen[name] = true
	}
	// A parameter filled into the script a shell runs would be read as
	// shell (docs/experiments.md, "Parameters and the shell").
	ps = append(ps, runenv.ScriptTemplateProblems(spec.Command, spec.Parameters)...)
	ps = append(ps, inputProblems(spec.Inputs)...)
	ps = append(ps, credentialProblems(spec)...)
	return ps
}

// TaskSize resolves the GPU size of a task on a profile: the profile's, or
// the task's own when the profile reads it from a parameter.
func TaskSize(pr *model.Profile, spec *model.TaskSpec) (model.Size, error) {
	if pr.SizeParameter == "" {
		return pr.Size, nil
	}
	v, ok := spec.Parameters[pr.SizeParameter]
	if !ok || strings.TrimSpace(v) == "" {
		return pr.Size, nil
	}
	size, err := model.ParseSize(v)
	if err != nil {
		return model.Size{}, fmt.Errorf("parameter %s: %w", pr.SizeParameter, err)
	}
	return size, nil
}

// onlyCreatesFiles reports whether a unified diff only adds new files: what
// 'klique run' sends for a script outside a git checkout, applied in an
// empty working directory.
func onlyCreatesFiles(diff string) bool {
	files := 0
	for line := range strings.Lines(diff) {
		if strings.HasPrefix(line, "--- ") {
			if strings.TrimRight(line, "\r\n") != "--- /dev/null" {
				return false
			}
			files++
		}
	}
	return files > 0
}
