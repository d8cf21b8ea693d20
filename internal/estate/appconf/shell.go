package appconf

import (
	"fmt"
	"slices"
	"strings"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/shellarg"
)

// ShellProblems checks an entry's templates against the rule that a launch
// value is one argument, never shell (docs/apps.md, "Templates"). A shell
// script is run.batch (an HPC job runs it with /bin/sh -c, and so does a
// process-mode worker when the entry has no process line), and the
// argument a shell runs as its script in run.process or run.args
// (shellarg.ScriptIndex). In a script, a form field's value must be asked
// for quoted, {name|shell}, where quoting holds (shellarg.Bare); the values
// every launch has (TemplateValues: a count, a port, an id, the app's name)
// are the platform's own and may stand as they are. Anywhere else |shell
// is refused: it would pass quote marks on.
func ShellProblems(a *model.App) []string {
	var out []string
	notScript := func(field, tmpl string) {
		for _, m := range references(tmpl) {
			if m[4] >= 0 {
				name := tmpl[m[2]:m[3]]
				out = append(out, fmt.Sprintf("%s: {%s|shell} quotes the value for a shell script, and this is not one: it would pass the quote marks on; write {%s}", field, name, name))
			}
		}
	}
	argv := func(field string, words []string) {
		script := shellarg.ScriptIndex(words)
		for i, w := range words {
			where := fmt.Sprintf("%s[%d]", field, i)
			if field == "run.process" {
				where = fmt.Sprintf("run.process word %d", i+1)
			}
			if i == script {
				out = append(out, scriptProblems(where+" is the script "+strings.Join(words[:i], " ")+" runs", w)...)
			} else {
				notScript(where, w)
			}
		}
	}
	argv("run.process", ProcessWords(a.Run.Process))
	argv("run.args", a.Run.Args)
	if a.Run.Batch != "" {
		out = append(out, scriptProblems("run.batch is a shell script (an HPC job runs it with /bin/sh -c)", a.Run.Batch)...)
	}
	notScript("run.image", a.Run.Image)
	notScript("run.pod", a.Run.Pod)
	notScript("healthPath", a.HealthPath)
	return out
}

// scriptProblems checks the references of one shell script: a form
// field's must say |shell, and every |shell must stand where quoting holds.
func scriptProblems(where, script string) []string {
	var out []string
	var spans [][2]int
	var names []string
	for _, m := range references(script) {
		name := script[m[2]:m[3]]
		if m[4] < 0 {
			if !slices.Contains(TemplateValues, name) {
				out = append(out, fmt.Sprintf("%s: {%s} would put a launch value into it as shell; write {%s|shell} to insert it quoted", where, name, name))
			}
			continue
		}
		spans = append(spans, [2]int{m[0], m[1]})
		names = append(names, name)
	}
	if len(spans) == 0 {
		return slices.Compact(out)
	}
	bare, err := shellarg.Bare(script, spans)
	if err != nil {
		return append(out, fmt.Sprintf("%s: %v; a reference with |shell needs a script that parses", where, err))
	}
	for i, ok := range bare {
		if !ok {
			out = append(out, fmt.Sprintf("%s: {%s|shell} stands inside quotes, a here-document, backquotes, an expansion or a comment, where a quoted value does not stay one word; put it outside them", where, names[i]))
		}
	}
	return slices.Compact(out)
}
