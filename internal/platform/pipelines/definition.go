package pipelines

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/klique-ai/klique/internal/docbudget"
	"github.com/klique-ai/klique/internal/model"
)

// Bounds on a definition.
const (
	MaxSteps          = 100
	MaxDefinitionSize = 1 << 20
	MaxRetry          = 10
)

// Budget bounds what a definition may hold, checked before it is decoded
// (docbudget): a definition of MaxSteps steps with long commands and many
// parameters has a few thousand values; one that expands to more is an
// alias bomb, which the decoder would expand while filling a step's fields.
var Budget = docbudget.Budget{Document: "pipeline definition", MaxBytes: MaxDefinitionSize,
	MaxNodes: 100_000, MaxAliases: 1_000, MaxDepth: 32, Split: "split the pipeline into smaller ones"}

// stepName is what a step's and a pipeline's names may be: they appear in
// templates ({{steps.NAME.metrics.M}}) and task names.
var stepName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$`)

// fileStep is a step as the YAML file writes it: the task spec's fields
// inline, parameter values of any scalar type.
type fileStep struct {
	Name            string         `json:"name"`
	ComputeResource string         `json:"computeResource"`
	Group           string         `json:"group,omitempty"`
	DependsOn       []string       `json:"dependsOn,omitempty"`
	Command         []string       `json:"command,omitempty"`
	Repository      string         `json:"repository,omitempty"`
	Commit          string         `json:"commit,omitempty"`
	Diff            string         `json:"diff,omitempty"`
	EntryPoint      string         `json:"entryPoint,omitempty"`
	WorkingDir      string         `json:"workingDir,omitempty"`
	Packages        []string       `json:"packages,omitempty"`
	Image           string         `json:"image,omitempty"`
	Parameters      map[string]any `json:"parameters,omitempty"`
	Env             map[string]any `json:"env,omitempty"`
	Secrets         []string       `json:"secrets,omitempty"`
	Inputs          map[string]any `json:"inputs,omitempty"`
	OnFailure       string         `json:"onFailure,omitempty"`
	Retry           int            `json:"retry,omitempty"`
	Cache           *bool          `json:"cache,omitempty"`
}

type fileDef struct {
	Name    string         `json:"name"`
	Project string         `json:"project,omitempty"`
	Params  map[string]any `json:"params,omitempty"`
	Steps   []fileStep     `json:"steps"`
}

// ParseDefinition reads a pipeline written in YAML (or JSON, which is
// YAML): one over Budget is refused before it is decoded, and fields it
// does not know are refused, so a typo is not silently ignored.
func ParseDefinition(text string) (*model.PipelineDefinition, error) {
	var over *docbudget.Error
	if err := Budget.YAML([]byte(text)); errors.As(err, &over) {
		return nil, err
	} else if err != nil {
		return nil, fmt.Errorf("read the pipeline definition: %v", err)
	}
	if strings.TrimSpace(text) == "" {
		return nil, fmt.Errorf("the pipeline definition is empty: give its name and steps")
	}
	var f fileDef
	// YAML 1.2: "n", "no" and "off" are strings, not booleans.
	if err := docbudget.Decode([]byte(text), &f, yaml.DisallowUnknownField()); err != nil {
		return nil, fmt.Errorf("read the pipeline definition: %v", err)
	}
	def := &model.PipelineDefinition{Name: f.Name, Project: f.Project}
	var err error
	if def.Params, err = scalars("params", f.Params); err != nil {
		return nil, err
	}
	for _, s := range f.Steps {
		st := model.PipelineStepDef{Name: s.Name, ComputeResource: s.ComputeResource, Group: s.Group, DependsOn: s.DependsOn,
			OnFailure: s.OnFailure, Retry: s.Retry, Cache: s.Cache,
			Spec: model.TaskSpec{Command: s.Command, Repository: s.Repository, Commit: s.Commit, Diff: s.Diff, EntryPoint: s.EntryPoint,
				WorkingDir: s.WorkingDir, Packages: s.Packages, Image: s.Image, Secrets: s.Secrets}}
		where := "step " + strconv.Quote(s.Name)
		if st.Spec.Parameters, err = scalars(where+" parameters", s.Parameters); err != nil {
			return nil, err
		}
		if st.Spec.Env, err = scalars(where+" env", s.Env); err != nil {
			return nil, err
		}
		if st.Inputs, err = scalars(where+" inputs", s.Inputs); err != nil {
			return nil, err
		}
		def.Steps = append(def.Steps, st)
	}
	// Aliases within the budget may still repeat long strings: the
	// definition as read is held to the budget as a rerun of it will be.
	if err := Budget.Check(DefinitionUsage(def)); err != nil {
		return nil, err
	}
	return def, nil
}

// DefinitionUsage measures a definition already read, such as an earlier
// run's that a schedule reruns, as Budget counts its text: a value for the
// definition, each step, each field set, each list and its items, and each
// map, key and value; bytes are those of its strings. A run stored before
// the budget, or a definition whose aliases the budget let through, is
// held to the same limits when it is started again.
func DefinitionUsage(def *model.PipelineDefinition) docbudget.Usage {
	u := docbudget.Usage{Nodes: 1, Depth: 4}
	str := func(ss ...string) {
		for _, s := range ss {
			if s != "" {
				u.Nodes, u.Bytes = u.Nodes+1, u.Bytes+int64(len(s))
			}
		}
	}
	list := func(l []string) {
		if len(l) > 0 {
			u.Nodes++
			for _, s := range l {
				u.Nodes, u.Bytes = u.Nodes+1, u.Bytes+int64(len(s))
			}
		}
	}
	kv := func(m map[string]string) {
		if len(m) > 0 {
			u.Nodes++
			for k, v := range m {
				u.Nodes, u.Bytes = u.Nodes+2, u.Bytes+int64(len(k)+len(v))
			}
		}
	}
	str(def.Name, def.Project)
	kv(def.Params)
	for i := range def.Steps {
		s := &def.Steps[i]
		u.Nodes++
		str(s.Name, s.ComputeResource, s.Group, s.OnFailure, s.Spec.Repository, s.Spec.Commit, s.Spec.Diff,
			s.Spec.EntryPoint, s.Spec.WorkingDir, s.Spec.Image)
		list(s.DependsOn)
		list(s.Spec.Command)
		list(s.Spec.Packages)
		list(s.Spec.Secrets)
		kv(s.Spec.Parameters)
		kv(s.Spec.Env)
		kv(s.Inputs)
	}
	return u
}

// scalars turns YAML scalar values (strings, numbers, booleans) into
// strings; a list or map is refused.
func scalars(where string, m map[string]any) (map[string]string, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		switch x := v.(type) {
		case string:
			out[k] = x
		case float64:
			out[k] = strconv.FormatFloat(x, 'g', -1, 64)
		case int, int64, uint64:
			out[k] = fmt.Sprint(x)
		case bool:
			out[k] = strconv.FormatBool(x)
		case nil:
			out[k] = ""
		default:
			return nil, fmt.Errorf("%s: %s must be a string, number or boolean", where, k)
		}
	}
	return out, nil
}

// Plan is a definition checked: its steps in an order where each comes
// after its dependencies, and each step's dependencies (those it names
// and those its templates refer to).
type Plan struct {
	Def *model.PipelineDefinition
	// Order lists step indexes, dependencies first.
	Order []int
	// Deps maps a step's name to its dependencies' names, sorted.
	Deps map[string][]string
	// Params are the run's values: the definition's defaults with the
	// run's own over them.
	Params map[string]string
}

// Dependants returns the steps that depend on name, directly or not.
func (p *Plan) Dependants(name string) []string {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(n string) {
		for _, s := range p.Def.Steps {
			if !seen[s.Name] && slices.Contains(p.Deps[s.Name], n) {
				seen[s.Name] = true
				walk(s.Name)
			}
		}
	}
	walk(name)
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Levels returns each step's depth in the graph (0 for a step with no
// dependencies), for drawing it by level.
func (p *Plan) Levels() map[string]int {
	lv := map[string]int{}
	for _, i := range p.Order {
		s := p.Def.Steps[i]
		for _, d := range p.Deps[s.Name] {
			lv[s.Name] = max(lv[s.Name], lv[d]+1)
		}
	}
	return lv
}

// Check validates a definition and the run's parameters and returns the
// plan, or every problem found, each saying what to change. It reads
// nothing but the definition: whether the compute resources are open to
// the owner is checked by the platform after it.
func Check(def *model.PipelineDefinition, params map[string]string) (*Plan, []string) {
	var ps []string
	add := func(format string, args ...any) { ps = append(ps, fmt.Sprintf(format, args...)) }
	if !stepName.MatchString(def.Name) {
		add("the pipeline's name %q: use 1 to 63 letters, digits, '-' and '_', starting with a letter or digit", def.Name)
	}
	plan := &Plan{Def: def, Deps: map[string][]string{}, Params: map[string]string{}}
	for k, v := range def.Params {
		plan.Params[k] = v
	}
	var unknown []string
	for k, v := range params {
		if _, ok := def.Params[k]; !ok {
			unknown = append(unknown, k)
			continue
		}
		plan.Params[k] = v
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		add("unknown parameter %s: the pipeline declares %s; declare it under params: with a default", strings.Join(unknown, ", "), declared(def.Params))
	}
	switch {
	case len(def.Steps) == 0:
		add("the pipeline has no steps: list them under steps:")
	case len(def.Steps) > MaxSteps:
		add("the pipeline has %d steps, more than %d", len(def.Steps), MaxSteps)
	}
	index := map[string]int{}
	for i, s := range def.Steps {
		if !stepName.MatchString(s.Name) {
			add("step %d's name %q: use 1 to 63 letters, digits, '-' and '_', starting with a letter or digit", i+1, s.Name)
			continue
		}
		if _, dup := index[s.Name]; dup {
			add("two steps are named %q: give each step its own name", s.Name)
			continue
		}
		index[s.Name] = i
	}
	for _, s := range def.Steps {
		where := "step " + strconv.Quote(s.Name)
		if strings.TrimSpace(s.ComputeResource) == "" {
			add("%s: say which compute resource it runs on (computeResource:)", where)
		}
		switch s.OnFailure {
		case "", model.FailureStop, model.FailureContinue:
		default:
			add("%s: onFailure %q: use %q or %q (and retry: N to try again first)", where, s.OnFailure, model.FailureStop, model.FailureContinue)
		}
		if s.Retry < 0 || s.Retry > MaxRetry {
			add("%s: retry %d: use 0 to %d", where, s.Retry, MaxRetry)
		}
		deps := map[string]bool{}
		for _, d := range s.DependsOn {
			if _, ok := index[d]; !ok {
				add("%s depends on %q, which is not a step of the pipeline", where, d)
				continue
			}
			deps[d] = true
		}
		refs, tps := stepRefs(s)
		for _, p := range tps {
			add("%s: %s", where, p)
		}
		for _, r := range refs {
			switch r.kind {
			case refParam:
				if _, ok := plan.Params[r.name]; !ok {
					add("%s refers to {{params.%s}}, which the pipeline does not declare: declare it under params: (declared: %s)", where, r.name, declared(def.Params))
				}
			default:
				if _, ok := index[r.step]; !ok {
					add("%s refers to step %q ({{%s}}), which is not a step of the pipeline", where, r.step, r.text)
					continue
				}
				deps[r.step] = true
			}
		}
		if deps[s.Name] {
			add("%s depends on itself", where)
			delete(deps, s.Name)
		}
		for d := range deps {
			plan.Deps[s.Name] = append(plan.Deps[s.Name], d)
		}
		sort.Strings(plan.Deps[s.Name])
	}
	if len(ps) > 0 {
		return nil, ps
	}
	order, cycle := topo(def, plan.Deps, index)
	if cycle != nil {
		return nil, []string{fmt.Sprintf("the steps form a cycle: %s; a pipeline is a graph without cycles", strings.Join(cycle, " → "))}
	}
	plan.Order = order
	return plan, nil
}

func declared(m map[string]string) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}

// topo orders the steps dependencies first, or returns a cycle (its
// first step repeated at the end).
func topo(def *model.PipelineDefinition, deps map[string][]string, index map[string]int) ([]int, []string) {
	const (
		unseen = iota
		onStack
		done
	)
	mark := make([]int, len(def.Steps))
	var order []int
	var stack []string
	var cycle []string
	var visit func(i int) bool
	visit = func(i int) bool {
		name := def.Steps[i].Name
		switch mark[i] {
		case done:
			return true
		case onStack:
			at := slices.Index(stack, name)
			cycle = append(append([]string{}, stack[at:]...), name)
			return false
		}
		mark[i] = onStack
		stack = append(stack, name)
		for _, d := range deps[name] {
			if !visit(index[d]) {
				return false
			}
		}
		stack = stack[:len(stack)-1]
		mark[i] = done
		order = append(order, i)
		return true
	}
	for i := range def.Steps {
		if !visit(i) {
			return nil, cycle
		}
	}
	return order, nil
}
