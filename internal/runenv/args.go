package runenv

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/shellarg"
)

// argTemplate is a parameter reference in a command argument: {name}, with
// the characters a parameter name usually has, or {name|shell}, which
// quotes the value for the script a shell runs.
var argTemplate = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_.-]*)(\|shell)?\}`)

// argRef is one template of an argument: where it stands, the parameter it
// names, and whether it asks for the value quoted.
type argRef struct {
	start, end int
	name       string
	shell      bool
}

// refsOf lists the templates of arg that name a parameter. In a shell's
// script a brace after '$' is the shell's own ${NAME}, not a template.
func refsOf(arg string, params map[string]string, script bool) []argRef {
	if !strings.Contains(arg, "{") {
		return nil
	}
	var out []argRef
	for _, m := range argTemplate.FindAllStringSubmatchIndex(arg, -1) {
		name := arg[m[2]:m[3]]
		if _, ok := params[name]; !ok || (script && m[0] > 0 && arg[m[0]-1] == '$') {
			continue
		}
		out = append(out, argRef{start: m[0], end: m[1], name: name, shell: m[4] >= 0})
	}
	return out
}

// ExpandArgs returns args with each {name} that names a parameter replaced
// by the parameter's value, so that `--lr {lr}` in a recorded command takes
// the value a clone changed. A brace that names no parameter is left as it
// is (a JSON argument, a shell-looking literal): the command is the user's,
// and only what they declared is theirs to template. args itself is not
// changed; with nothing to replace it is returned as it is.
//
// A value is one argument: it replaces the template as it is, and is never
// split. The script a shell runs (shellarg.ScriptIndex) is the exception,
// since a value there would be read as shell: a template in it is filled
// with the value quoted (shellarg.Quote), and only where a quoted value
// stays one word (shellarg.Bare); anywhere else in a script it is left as
// written. Enqueue refuses both cases unless the template says |shell
// (ScriptTemplateProblems); this holds the line for tasks enqueued before.
func ExpandArgs(args []string, params map[string]string) []string {
	if len(params) == 0 {
		return args
	}
	script := shellarg.ScriptIndex(args)
	var out []string
	for i, a := range args {
		refs := refsOf(a, params, i == script)
		if len(refs) == 0 {
			continue
		}
		var bare []bool
		if i == script {
			spans := make([][2]int, len(refs))
			for k, r := range refs {
				spans[k] = [2]int{r.start, r.end}
			}
			var err error
			if bare, err = shellarg.Bare(a, spans); err != nil {
				continue // a script that does not parse gets no values
			}
		}
		var b strings.Builder
		last := 0
		for k, r := range refs {
			b.WriteString(a[last:r.start])
			v := params[r.name]
			switch {
			case i == script && !bare[k]:
				v = a[r.start:r.end]
			case i == script || r.shell:
				v = shellarg.Quote(v)
			}
			b.WriteString(v)
			last = r.end
		}
		b.WriteString(a[last:])
		if out == nil {
			out = append([]string(nil), args...)
		}
		out[i] = b.String()
	}
	if out == nil {
		return args
	}
	return out
}

// ScriptTemplateProblems checks the {name} templates of a command that name
// one of its parameters against the rule that a value is one argument,
// never shell: in the script a shell runs, a template must ask for the
// value quoted ({lr|shell}) and stand where a quoted value stays one word;
// elsewhere, |shell would pass quote marks on and is refused. Each problem
// says what to write instead.
func ScriptTemplateProblems(args []string, params map[string]string) []string {
	var ps []string
	script := shellarg.ScriptIndex(args)
	for i, a := range args {
		refs := refsOf(a, params, i == script)
		if i != script {
			for _, r := range refs {
				if r.shell {
					ps = append(ps, fmt.Sprintf("command argument %d: {%s|shell} quotes the value for a shell script, and this argument is not one (a script is what sh -c and the like run): it would pass the quote marks on; write {%s}",
						i+1, r.name, r.name))
				}
			}
			continue
		}
		where := fmt.Sprintf("command argument %d is the script %s runs", i+1, strings.Join(args[:i], " "))
		var spans [][2]int
		var quoted []argRef
		for _, r := range refs {
			if !r.shell {
				ps = append(ps, fmt.Sprintf(`%s: {%s} would be read as shell there; read "$%s" instead (a task's parameters are environment variables), or write {%s|shell} to insert it quoted`,
					where, r.name, model.ParamEnvName(r.name), r.name))
				continue
			}
			spans = append(spans, [2]int{r.start, r.end})
			quoted = append(quoted, r)
		}
		if len(spans) == 0 {
			continue
		}
		bare, err := shellarg.Bare(a, spans)
		if err != nil {
			ps = append(ps, fmt.Sprintf("%s: %v; a template with |shell needs a script that parses", where, err))
			continue
		}
		for k, r := range quoted {
			if !bare[k] {
				ps = append(ps, fmt.Sprintf(`%s: {%s|shell} stands inside quotes, a here-document, backquotes, an expansion or a comment, where a quoted value does not stay one word; put it outside them, or read "$%s" instead`,
					where, r.name, model.ParamEnvName(r.name)))
			}
		}
	}
	return slices.Compact(ps) // a template used twice is named once
}

// ArgTemplates returns the parameter names args refer to as {name} (or
// {name|shell}), in order of first use.
func ArgTemplates(args []string) []string {
	var names []string
	seen := map[string]bool{}
	for _, a := range args {
		for _, m := range argTemplate.FindAllStringSubmatch(a, -1) {
			if !seen[m[1]] {
				seen[m[1]] = true
				names = append(names, m[1])
			}
		}
	}
	return names
}
