package pipelines

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/shellarg"
)

// Templates are {{params.NAME}}, {{steps.STEP.artifacts.NAME}} and
// {{steps.STEP.metrics.NAME}}, filled when the step is enqueued, each
// optionally with the shell filter ({{params.NAME|shell}}). (The
// single-brace {name} templates of a command are the task's own, filled
// by its worker from its parameters, and are left alone.)
var templateRE = regexp.MustCompile(`\{\{\s*([^{}]*?)\s*\}\}`)

// shellFilter is the one filter a template takes: the value quoted for a
// POSIX shell (shellarg.Quote), for a template in the script a shell step
// runs.
const shellFilter = "shell"

type refKind int

const (
	refParam refKind = iota
	refArtifact
	refMetric
)

type ref struct {
	kind refKind
	text string
	// name is the parameter's, artifact's or metric's name; step the
	// step's (for artifacts and metrics).
	step, name string
	// shell: the template asks for the value quoted for a shell.
	shell bool
	// span is where the template stands in its value.
	span [2]int
}

func parseRef(text string) (ref, error) {
	r := ref{text: text}
	if base, filter, ok := strings.Cut(text, "|"); ok {
		if strings.TrimSpace(filter) != shellFilter {
			return r, fmt.Errorf("template {{%s}} has the filter %q: the only filter is |shell, which quotes the value for a shell script", text, strings.TrimSpace(filter))
		}
		text, r.shell = strings.TrimSpace(base), true
	}
	if name, ok := strings.CutPrefix(text, "params."); ok && name != "" {
		r.kind, r.name = refParam, name
		return r, nil
	}
	if rest, ok := strings.CutPrefix(text, "steps."); ok {
		parts := strings.SplitN(rest, ".", 3)
		if len(parts) == 3 && parts[0] != "" && parts[2] != "" {
			r.step, r.name = parts[0], parts[2]
			switch parts[1] {
			case "artifacts":
				r.kind = refArtifact
				return r, nil
			case "metrics":
				r.kind = refMetric
				return r, nil
			}
		}
	}
	return r, fmt.Errorf("template {{%s}} is not one of {{params.NAME}}, {{steps.STEP.artifacts.NAME}} or {{steps.STEP.metrics.NAME}}", text)
}

// base is the template's text without its filter.
func (r ref) base() string {
	if r.kind == refParam {
		return "params." + r.name
	}
	what := "metrics"
	if r.kind == refArtifact {
		what = "artifacts"
	}
	return "steps." + r.step + "." + what + "." + r.name
}

// scriptProblems checks the templates of argv[i], the script a shell runs
// (shellarg.ScriptIndex): a value put there as text would be read as
// shell, so each template must ask for the value quoted (|shell), and
// stand where a quoted value is one word (shellarg.Bare).
func scriptProblems(argv []string, i int, refs []ref) []string {
	var ps []string
	where := fmt.Sprintf("command argument %d is the script %s runs", i+1, strings.Join(argv[:i], " "))
	var spans [][2]int
	for _, r := range refs {
		if !r.shell {
			ps = append(ps, fmt.Sprintf("%s: {{%s}} would be read as shell there; %s, or write {{%s|shell}} to insert it quoted",
				where, r.text, readFromEnv(r), r.text))
			continue
		}
		spans = append(spans, r.span)
	}
	if len(spans) == 0 {
		return ps
	}
	bare, err := shellarg.Bare(argv[i], spans)
	if err != nil {
		return append(ps, fmt.Sprintf("%s: %v; a template with |shell needs a script that parses", where, err))
	}
	k := 0
	for _, r := range refs {
		if !r.shell {
			continue
		}
		if !bare[k] {
			ps = append(ps, fmt.Sprintf("%s: {{%s}} stands inside quotes, a here-document, backquotes, an expansion or a comment, where a quoted value does not stay one word; "+
				"put it outside them, or %s", where, r.text, readFromEnv(r)))
		}
		k++
	}
	return ps
}

// readFromEnv says how a shell step reads the value of a template from
// its environment instead: a step's parameters and inputs are variables.
func readFromEnv(r ref) string {
	if r.kind == refArtifact {
		return fmt.Sprintf(`name the artifact under inputs: (%s: "{{%s}}") and read "$%s"`, r.name, r.base(), model.InputEnvName(r.name))
	}
	return fmt.Sprintf(`give the value to the step as a parameter (parameters: {%s: "{{%s}}"}) and read "$%s"`, r.name, r.base(), model.ParamEnvName(r.name))
}

// refsIn returns the templates of one value, and a problem for a value
// with a malformed one.
func refsIn(v string) ([]ref, []string) {
	var refs []ref
	var ps []string
	for _, m := range templateRE.FindAllStringSubmatchIndex(v, -1) {
		r, err := parseRef(v[m[2]:m[3]])
		if err != nil {
			ps = append(ps, err.Error())
			continue
		}
		r.span = [2]int{m[0], m[1]}
		refs = append(refs, r)
	}
	if rest := templateRE.ReplaceAllString(v, ""); strings.Contains(rest, "{{") || strings.Contains(rest, "}}") {
		ps = append(ps, fmt.Sprintf("%q has an unclosed or nested {{ }} template", v))
	}
	return refs, ps
}

// stepRefs returns every template of a step, and the problems with them.
func stepRefs(s model.PipelineStepDef) ([]ref, []string) {
	var refs []ref
	var ps []string
	scan := func(where, v string) {
		rs, p := refsIn(v)
		for _, x := range p {
			ps = append(ps, where+": "+x)
		}
		for _, r := range rs {
			if r.shell {
				ps = append(ps, fmt.Sprintf("%s: {{%s}} quotes the value for a shell script, and this is not one (a script is what sh -c and the like run): it would pass the quote marks on; write {{%s}}", where, r.text, r.base()))
			}
		}
		refs = append(refs, rs...)
	}
	script := shellarg.ScriptIndex(s.Spec.Command)
	for i, a := range s.Spec.Command {
		where := fmt.Sprintf("command argument %d", i+1)
		if i == script {
			rs, p := refsIn(a)
			for _, x := range p {
				ps = append(ps, where+": "+x)
			}
			ps = append(ps, scriptProblems(s.Spec.Command, i, rs)...)
			refs = append(refs, rs...)
			continue
		}
		scan(where, a)
	}
	for _, k := range slices.Sorted(maps.Keys(s.Spec.Parameters)) {
		scan("parameter "+k, s.Spec.Parameters[k])
	}
	for _, k := range slices.Sorted(maps.Keys(s.Spec.Env)) {
		scan("env "+k, s.Spec.Env[k])
	}
	for _, k := range slices.Sorted(maps.Keys(s.Inputs)) {
		v := s.Inputs[k]
		rs, p := refsIn(v)
		for _, x := range p {
			ps = append(ps, "input "+k+": "+x)
		}
		if len(p) == 0 && (len(rs) != 1 || rs[0].kind != refArtifact || rs[0].shell || strings.TrimSpace(v) != templateRE.FindString(v)) {
			ps = append(ps, fmt.Sprintf("input %s is %q: an input is one {{steps.STEP.artifacts.NAME}}", k, v))
		}
		refs = append(refs, rs...)
	}
	return refs, ps
}

// Outputs is what a step's templates are filled from: the run's
// parameters and, for each earlier step, the task whose outputs it
// reuses and that task's final metric values.
type Outputs struct {
	Params  map[string]string
	TaskIDs map[string]string
	// Metrics reads a step's final metric value; false when the step did
	// not report it.
	Metrics func(step, name string) (float64, bool, error)
}

// FillStep returns the task spec of a step with its templates filled:
// parameters by value, metrics by the step's final value, artifacts as
// inputs by reference (TaskSpec.Inputs; a template outside inputs: adds
// an input named for the artifact and is replaced by the input's name).
func FillStep(s model.PipelineStepDef, out Outputs) (model.TaskSpec, error) {
	// A definition stored before a rule was added (a schedule reruns
	// it) is held to it here.
	if _, ps := stepRefs(s); len(ps) > 0 {
		return s.Spec, fmt.Errorf("%s", strings.Join(ps, "; "))
	}
	spec := s.Spec
	inputs := map[string]model.ArtifactInput{}
	addInput := func(name string, r ref) (string, error) {
		taskID := out.TaskIDs[r.step]
		if taskID == "" {
			return "", fmt.Errorf("step %q has no task to take artifact %q from", r.step, r.name)
		}
		in := model.ArtifactInput{Name: name, TaskID: taskID, Artifact: r.name}
		if old, ok := inputs[name]; ok && old != in {
			name = r.step + "-" + r.name
			in.Name = name
		}
		inputs[name] = in
		return name, nil
	}
	fill := func(v string) (string, error) {
		var ferr error
		res := templateRE.ReplaceAllStringFunc(v, func(m string) string {
			r, err := parseRef(templateRE.FindStringSubmatch(m)[1])
			if err != nil {
				ferr = err
				return m
			}
			val := fillRef(r, m, out, addInput, &ferr)
			if r.shell {
				return shellarg.Quote(val)
			}
			return val
		})
		return res, ferr
	}
	var err error
	spec.Command = slices.Clone(spec.Command)
	for i, a := range spec.Command {
		if spec.Command[i], err = fill(a); err != nil {
			return spec, err
		}
	}
	if spec.Parameters, err = fillMap(spec.Parameters, fill); err != nil {
		return spec, err
	}
	if spec.Env, err = fillMap(spec.Env, fill); err != nil {
		return spec, err
	}
	for _, k := range slices.Sorted(maps.Keys(s.Inputs)) {
		rs, _ := refsIn(s.Inputs[k])
		if len(rs) != 1 {
			return spec, fmt.Errorf("input %s is not one artifact template", k)
		}
		if _, err := addInput(k, rs[0]); err != nil {
			return spec, err
		}
	}
	spec.Inputs = nil
	for _, k := range slices.Sorted(maps.Keys(inputs)) {
		spec.Inputs = append(spec.Inputs, inputs[k])
	}
	return spec, nil
}

func fillMap(m map[string]string, fill func(string) (string, error)) (map[string]string, error) {
	if m == nil {
		return nil, nil
	}
	out := make(map[string]string, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v, err := fill(m[k])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[k] = v
	}
	return out, nil
}

// fillRef is the value of one template m (parsed as r): a parameter's
// value, a metric's final value, or the name of the input an artifact
// template adds. A template that cannot be filled sets *ferr.
func fillRef(r ref, m string, out Outputs, addInput func(string, ref) (string, error), ferr *error) string {
	switch r.kind {
	case refParam:
		p, ok := out.Params[r.name]
		if !ok {
			*ferr = fmt.Errorf("no parameter %q", r.name)
		}
		return p
	case refMetric:
		if out.Metrics == nil {
			*ferr = fmt.Errorf("metrics cannot be read")
			return m
		}
		val, ok, err := out.Metrics(r.step, r.name)
		if err != nil {
			*ferr = err
			return m
		}
		if !ok {
			*ferr = fmt.Errorf("step %q reported no metric %q ({{%s}})", r.step, r.name, r.text)
			return m
		}
		return strconv.FormatFloat(val, 'g', -1, 64)
	default:
		name, err := addInput(r.name, r)
		if err != nil {
			*ferr = err
		}
		return name
	}
}
