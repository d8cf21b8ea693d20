package appconf

import (
	"strings"
	"testing"
)

// A launch form is held to FormBudget before it is compiled (deep nesting
// would take the schema compiler as deep), and a launch's values to
// ValuesBudget before they are checked against the form.
func TestFormsAndValuesHoldTheirBudgets(t *testing.T) {
	deep := `{"type":"object","properties":{"a":` + strings.Repeat(`{"type":"array","items":`, 40) + `{"type":"string"}` + strings.Repeat("}", 40) + `}}`
	if _, err := CompileForm(deep); err == nil || !strings.Contains(err.Error(), "launch form: 43 levels of nesting; the limit is 32") {
		t.Fatalf("a form nested 43 deep: %v", err)
	}
	wide := `{"type":"object","properties":{"a":{"enum":[` + strings.TrimSuffix(strings.Repeat("1,", 12_000), ",") + `]}}}`
	if _, err := CompileForm(wide); err == nil || !strings.Contains(err.Error(), "launch form: 12,009 values; the limit is 10,000") {
		t.Fatalf("a form of 12,009 values: %v", err)
	}
	f, err := CompileForm(`{"type":"object","properties":{"tags":{"type":"array"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	many := make([]any, 12_000)
	for i := range many {
		many[i] = 0
	}
	if _, ps := f.Check(map[string]any{"tags": many}); len(ps) != 1 || !strings.Contains(ps[0], "launch values: 12,003 values; the limit is 10,000") {
		t.Fatalf("12,000 tags: %v", ps)
	}
	if v, ps := f.Check(map[string]any{"tags": []any{"a", "b"}}); len(ps) > 0 || len(v["tags"].([]any)) != 2 {
		t.Fatalf("two tags: %v %v", v, ps)
	}
}
