package appconf

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/klique-ai/klique/internal/model"
)

// TemplateValues are the values every launch has besides its form's:
// gpus (the GPU count of the compute resource's profile, for tensor
// parallelism), port (the app's port), instance (the instance's id) and
// app (the app's name).
var TemplateValues = []string{"gpus", "port", "instance", "app"}

var reference = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// references finds the {name} references of a template with their
// positions; a shell's ${NAME} is not one.
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

// Render replaces each {name} with its value (a shell's ${NAME} is left
// as it is). A name without a value (a form field left out with no
// default) renders empty.
func Render(tmpl string, values map[string]string) string {
	var sb strings.Builder
	last := 0
	for _, m := range references(tmpl) {
		sb.WriteString(tmpl[last:m[0]])
		sb.WriteString(values[tmpl[m[2]:m[3]]])
		last = m[1]
	}
	sb.WriteString(tmpl[last:])
	return sb.String()
}

// RenderRun renders every template of an app.
func RenderRun(a *model.App, values map[string]string) model.AppRun {
	r := model.AppRun{Process: Render(a.Run.Process, values), Image: Render(a.Run.Image, values),
		Pod: Render(a.Run.Pod, values), Batch: Render(a.Run.Batch, values)}
	for _, s := range a.Run.Args {
		r.Args = append(r.Args, Render(s, values))
	}
	r.Process = strings.Join(strings.Fields(r.Process), " ")
	return r
}
