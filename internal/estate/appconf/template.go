package appconf

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/shellarg"
)

// TemplateValues are the values every launch has besides its form's:
// gpus (the GPU count of the compute resource's profile, for tensor
// parallelism), port (the app's port), instance (the instance's id) and
// app (the app's name).
var TemplateValues = []string{"gpus", "port", "instance", "app"}

// reference is {name}, or {name|shell}: the value quoted for the script a
// shell runs (shellarg.Quote).
var reference = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)(\|shell)?\}`)

// references finds the {name} references of a template with their
// positions (m[4] >= 0 for |shell); a shell's ${NAME} is not one.
func references(tmpl string) [][]int {
	var out [][]int
	for _, m := range reference.FindAllStringSubmatchIndex(tmpl, -1) {
		if m[0] > 0 && tmpl[m[0]-1] == '$' {
			continue
		}
		out = append(out, m)
	}
	return out
}

// References lists the names a template refers to, in order, once each.
func References(tmpl string) []string {
	var out []string
	for _, m := range references(tmpl) {
		if name := tmpl[m[2]:m[3]]; !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// Templates are an app's templates, each with the field it comes from.
func Templates(a *model.App) map[string]string {
	t := map[string]string{"run.process": a.Run.Process, "run.image": a.Run.Image, "run.pod": a.Run.Pod, "run.batch": a.Run.Batch, "healthPath": a.HealthPath}
	for i, s := range a.Run.Args {
		t[fmt.Sprintf("run.args[%d]", i)] = s
	}
	return t
}

// Render replaces each {name} with its value as it is, and each
// {name|shell} with its value quoted for a shell (a shell's ${NAME} is
// left as it is). A name without a value (a form field left out with no
// default) renders empty; with |shell, as a word of its own, it leaves
// the word out.
func Render(tmpl string, values map[string]string) string {
	var sb strings.Builder
	last := 0
	for _, m := range references(tmpl) {
		sb.WriteString(tmpl[last:m[0]])
		v := values[tmpl[m[2]:m[3]]]
		if m[4] >= 0 && (v != "" || !aWord(tmpl, m[0], m[1])) {
			// An empty value that is a word of its own is left out
			// rather than passed as '': an optional field left empty
			// adds no argument, as in a process line.
			v = shellarg.Quote(v)
		}
		sb.WriteString(v)
		last = m[1]
	}
	sb.WriteString(tmpl[last:])
	return sb.String()
}

// aWord reports whether tmpl[start:end] is a word of its own: white space
// or the template's ends on both sides.
func aWord(tmpl string, start, end int) bool {
	space := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' }
	return (start == 0 || space(tmpl[start-1])) && (end == len(tmpl) || space(tmpl[end]) || tmpl[end] == ';')
}

// RenderArgv renders a template that is a list of arguments (run.args, or
// the words of run.process): each argument on its own, so that a value is
// one argument whatever it holds (spaces included) and is never split. An
// argument that is a single reference whose value is empty (an optional
// field left out) is left out, as an empty word of a command line would
// be.
func RenderArgv(words []string, values map[string]string) []string {
	out := make([]string, 0, len(words))
	for _, w := range words {
		r := Render(w, values)
		if ms := references(w); r == "" && len(ms) == 1 && ms[0][0] == 0 && ms[0][1] == len(w) {
			continue
		}
		out = append(out, r)
	}
	return out
}

// ProcessWords are the words of a process line, split on white space
// before anything is filled in: the template's words, each of which a
// value then fills as one argument.
func ProcessWords(process string) []string { return strings.Fields(process) }

// RenderRun renders every template of an app. Process is the rendered
// process line's arguments joined by spaces, for reading: what runs is
// ProcessArgv's argument vector.
func RenderRun(a *model.App, values map[string]string) model.AppRun {
	r := model.AppRun{Process: strings.Join(ProcessArgv(a, values), " "), Image: Render(a.Run.Image, values),
		Pod: Render(a.Run.Pod, values), Batch: Render(a.Run.Batch, values)}
	r.Args = RenderArgv(a.Run.Args, values)
	return r
}

// ProcessArgv is the command a process-mode worker runs for the app: the
// process line's words, each filled on its own (RenderArgv).
func ProcessArgv(a *model.App, values map[string]string) []string {
	return RenderArgv(ProcessWords(a.Run.Process), values)
}
