package appconf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/klique-ai/klique/internal/docbudget"
)

// MaxFormBytes bounds a launch form.
const MaxFormBytes = 64 << 10

// FormBudget bounds a launch form (a JSON Schema) before it is compiled,
// and ValuesBudget the values of one launch before they are checked
// against it (docbudget). A form of a few dozen fields has a few hundred
// values; its values are scalars, with an occasional list.
var (
	FormBudget   = docbudget.Budget{Document: "launch form", MaxBytes: MaxFormBytes, MaxNodes: 10_000, MaxDepth: 32}
	ValuesBudget = docbudget.Budget{Document: "launch values", MaxBytes: MaxFormBytes, MaxNodes: 10_000, MaxDepth: 32}
)

// Form is a compiled launch form.
type Form struct {
	schema *jsonschema.Schema
	// Fields are the names of the form's properties.
	Fields []string
	// Defaults are the properties' default values.
	Defaults map[string]any
}

// CompileForm checks that a launch form is a valid JSON Schema for an
// object and compiles it. An empty form takes no values.
func CompileForm(form string) (*Form, error) {
	if form == "" {
		form = `{"type":"object","additionalProperties":false}`
	}
	if err := FormBudget.JSON([]byte(form)); err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(form)))
	if err != nil {
		return nil, fmt.Errorf("the launch form is not JSON: %v; write it as a JSON Schema object", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok || obj["type"] != "object" {
		return nil, fmt.Errorf(`the launch form must be a JSON Schema with "type": "object"`)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("form.json", doc); err != nil {
		return nil, fmt.Errorf("the launch form is not a valid JSON Schema: %v", err)
	}
	s, err := c.Compile("form.json")
	if err != nil {
		return nil, fmt.Errorf("the launch form is not a valid JSON Schema: %s", oneLine(err.Error()))
	}
	f := &Form{schema: s, Defaults: map[string]any{}}
	props, _ := obj["properties"].(map[string]any)
	for name, p := range props {
		f.Fields = append(f.Fields, name)
		if pm, ok := p.(map[string]any); ok {
			if d, ok := pm["default"]; ok {
				f.Defaults[name] = d
			}
		}
	}
	sort.Strings(f.Fields)
	return f, nil
}

// Check validates launch values against the form, after filling in its
// defaults and holding them to ValuesBudget, and returns the values as the
// template sees them. Each problem
// names the field and says what to change.
func (f *Form) Check(values map[string]any) (map[string]any, []string) {
	v := map[string]any{}
	for k, d := range f.Defaults {
		v[k] = d
	}
	for k, x := range values {
		v[k] = x
	}
	// The validator wants JSON values: numbers as json.Number or float64.
	b, err := json.Marshal(v)
	if err != nil {
		return nil, []string{fmt.Sprintf("the launch values cannot be read as JSON: %v", err)}
	}
	if err := ValuesBudget.JSON(b); err != nil {
		return nil, []string{err.Error()}
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, []string{fmt.Sprintf("the launch values cannot be read as JSON: %v", err)}
	}
	err = f.schema.Validate(inst)
	if err == nil {
		return v, nil
	}
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return nil, []string{err.Error()}
	}
	var out []string
	for _, u := range ve.BasicOutput().Errors {
		if u.Error == nil {
			continue
		}
		field := strings.TrimPrefix(u.InstanceLocation, "/")
		msg := u.Error.String()
		if field == "" {
			out = append(out, "launch values: "+msg)
		} else {
			out = append(out, fmt.Sprintf("field %q: %s", strings.ReplaceAll(field, "/", "."), msg))
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) == 0 {
		out = []string{oneLine(ve.Error())}
	}
	return nil, out
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// String renders a launch value for a template: strings as they are,
// other values as JSON.
func String(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case json.Number:
		return x.String()
	case float64:
		b, _ := json.Marshal(x)
		return string(b)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
