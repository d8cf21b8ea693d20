package taskcmd

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestFailRulesParseOrSayHowToWriteThem(t *testing.T) {
	for _, s := range []string{"accuracy < baseline - 0.01", "loss>baseline*1.05", "eval/f1 <= 0.8", "loss != baseline", "acc >= -1e-3"} {
		if _, err := parseFailRule(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	for _, s := range []string{"accuracy", "accuracy < ", "accuracy ~ 1", "accuracy < baseline / 2", "accuracy < baseline - x", "< 1"} {
		_, err := parseFailRule(s)
		if err == nil || !strings.Contains(err.Error(), "METRIC OP VALUE") && !strings.Contains(err.Error(), "is not a number") {
			t.Errorf("%q: %v, want a message saying how to write a rule", s, err)
		}
	}
}

// comparisonOf builds a comparison of a baseline and runs with their final
// values of one metric (nil: not reported).
func comparisonOf(metric string, finals ...*float64) *comparison {
	c := &comparison{}
	m := struct {
		Name, Direction string
		Differs         bool
		Final, Best     []*struct {
			Value float64
			Step  int64
		}
	}{Name: metric}
	for i, f := range finals {
		c.Tasks = append(c.Tasks, struct{ ID, Name, Status string }{ID: "id" + string(rune('0'+i)), Name: "run" + string(rune('0'+i)), Status: "COMPLETED"})
		if f == nil {
			m.Final = append(m.Final, nil)
			continue
		}
		m.Final = append(m.Final, &struct {
			Value float64
			Step  int64
		}{Value: *f})
	}
	c.Metrics = append(c.Metrics, m)
	return c
}

func f64(v float64) *float64 { return &v }

func TestTheRegressionGate(t *testing.T) {
	rule := func(s string) []failRule {
		r, err := parseFailRule(s)
		if err != nil {
			t.Fatal(err)
		}
		return []failRule{r}
	}
	for _, c := range []struct {
		name  string
		cmp   *comparison
		rule  string
		broke []string
	}{
		{"within the tolerance passes", comparisonOf("accuracy", f64(0.85), f64(0.845)), "accuracy < baseline - 0.01", nil},
		{"beyond it fails, saying the values", comparisonOf("accuracy", f64(0.85), f64(0.83)), "accuracy < baseline - 0.01",
			[]string{"run run1 (id1) has accuracy = 0.83 against 0.84 (the baseline's 0.85)"}},
		{"each run is checked", comparisonOf("loss", f64(1), f64(1.01), f64(1.2)), "loss > baseline * 1.05", []string{"run run2 (id2) has loss = 1.2"}},
		{"a run without the metric fails", comparisonOf("accuracy", f64(0.85), nil), "accuracy < baseline - 0.01", []string{"run run1 (id1) reported no accuracy"}},
		{"a baseline without the metric fails", comparisonOf("accuracy", nil, f64(0.9)), "accuracy < baseline", []string{"the baseline reported no accuracy"}},
		{"a fixed threshold needs no baseline value", comparisonOf("accuracy", nil, f64(0.7)), "accuracy < 0.8", []string{"has accuracy = 0.7"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			broke := c.cmp.check(rule(c.rule))
			if len(broke) != len(c.broke) {
				t.Fatalf("broken: %q, want %d like %q", broke, len(c.broke), c.broke)
			}
			for i, want := range c.broke {
				if !strings.Contains(broke[i], want) {
					t.Fatalf("broken[%d] = %q, want %q", i, broke[i], want)
				}
			}
		})
	}
}

func TestTheMarkdownReportIsStable(t *testing.T) {
	exit := 0
	r := runReport{Task: waitedTask{ID: "01930f2e-0000-7000-8000-000000000001", Name: "pr-42", Status: "COMPLETED", ExitCode: &exit},
		Parameters: map[string]string{"lr": "0.1", "note": "a|b"},
		Metrics:    []reportMetric{{Name: "accuracy", Value: 0.8512345678, Step: 10}, {Name: "loss", Value: 0.25, Step: 10}},
		Link:       "https://klique.example.com/#/task/01930f2e-0000-7000-8000-000000000001"}
	r.Baseline = comparisonOf("accuracy", f64(0.85), f64(0.8512345678))
	var b bytes.Buffer
	r.markdown(&b)
	golden := filepath.Join("testdata", "report.md")
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if b.String() != string(want) {
		t.Fatalf("report:\n%s\nwant (%s):\n%s", b.String(), golden, want)
	}
}
