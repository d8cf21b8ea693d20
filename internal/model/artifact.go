package model

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds of artifact names and inputs.
const (
	MaxArtifactNameLength = 255
	MaxTaskInputs         = 64
)

// ArtifactNameProblem says what is wrong with an artifact's name, or ""
// when it is fine. A name is a relative path (a file the worker found
// under KLIQUE_ARTIFACTS_DIR keeps its path): 1 to 255 bytes of printable
// text, '/'-separated segments that are not empty, '.' or '..', no
// backslash.
func ArtifactNameProblem(name string) string {
	switch {
	case name == "":
		return "an artifact needs a name"
	case len(name) > MaxArtifactNameLength:
		return fmt.Sprintf("artifact name %.40q… is longer than %d bytes", name, MaxArtifactNameLength)
	case !utf8.ValidString(name) || strings.ContainsFunc(name, func(r rune) bool { return !unicode.IsPrint(r) || r == '\\' }):
		return fmt.Sprintf("artifact name %q holds characters that are not allowed (control characters, backslash)", name)
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Sprintf("artifact name %q must be a relative path without empty, '.' or '..' parts", name)
		}
	}
	return ""
}

// InputNameProblem says what is wrong with the name a task gives one of
// its inputs, or "" when it is fine: letters, digits, '-', '_' and '.',
// 1 to 64 of them, as the variable KLIQUE_INPUT_<NAME> is made from it.
func InputNameProblem(name string) string {
	if name == "" || len(name) > 64 {
		return fmt.Sprintf("input name %q must be 1 to 64 characters", name)
	}
	for _, r := range name {
		if !(r == '-' || r == '_' || r == '.' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')) {
			return fmt.Sprintf("input name %q may hold only letters, digits, '-', '_' and '.'", name)
		}
	}
	return ""
}

// IsPointer reports whether the artifact is a pointer (its bytes stay at
// the run's output destination) rather than stored.
func (a *Artifact) IsPointer() bool { return a.Pointer != "" }

// InputEnvName is the variable that holds an input's path (or a pointer
// input's URL): KLIQUE_INPUT_ and the name in upper case with every run of
// other characters as one '_', as parameters' KLIQUE_PARAM_ names are made.
func InputEnvName(name string) string { return envName("KLIQUE_INPUT_", name) }

// ParamEnvName is the variable a task's parameter is given in:
// KLIQUE_PARAM_ and the name upper-cased, each run of other characters
// than letters and digits written as one "_" ("learning-rate" →
// KLIQUE_PARAM_LEARNING_RATE). The worker sets it; the templates'
// refusals name it, as the way a shell script reads a value.
func ParamEnvName(name string) string { return envName("KLIQUE_PARAM_", name) }

func envName(prefix, name string) string {
	var b strings.Builder
	b.WriteString(prefix)
	under := false
	for _, r := range strings.ToUpper(name) {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			under = false
		} else if !under {
			b.WriteByte('_')
			under = true
		}
	}
	return b.String()
}
