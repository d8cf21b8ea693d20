package pipelines

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/klique-ai/klique/internal/model"
)

// TestCheckOverRandomGraphs: over random graphs, a graph whose edges all
// point to earlier steps is accepted with an order that puts every step
// after its dependencies (and levels one more than the deepest
// dependency); adding an edge back from a step to one of its dependants
// makes it refused with a cycle that holds that edge.
func TestCheckOverRandomGraphs(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 12).Draw(t, "steps")
		def := &model.PipelineDefinition{Name: "p"}
		for i := range n {
			st := model.PipelineStepDef{Name: fmt.Sprintf("s%d", i), ComputeResource: "c", Spec: model.TaskSpec{Command: []string{"x"}}}
			for j := range i {
				switch rapid.IntRange(0, 3).Draw(t, fmt.Sprintf("edge %d-%d", i, j)) {
				case 1:
					st.DependsOn = append(st.DependsOn, fmt.Sprintf("s%d", j))
				case 2: // the same dependency, through a template
					st.Spec.Command = append(st.Spec.Command, fmt.Sprintf("{{steps.s%d.metrics.m}}", j))
				}
			}
			def.Steps = append(def.Steps, st)
		}
		// Shuffle the definition's order: the check must not depend on it.
		perm := rapid.Permutation(def.Steps).Draw(t, "order")
		def.Steps = perm
		plan, ps := Check(def, nil)
		if len(ps) > 0 {
			t.Fatalf("an acyclic graph refused: %v", ps)
		}
		pos := map[string]int{}
		for k, i := range plan.Order {
			pos[def.Steps[i].Name] = k
		}
		levels := plan.Levels()
		for _, st := range def.Steps {
			want := 0
			for _, d := range plan.Deps[st.Name] {
				if pos[d] >= pos[st.Name] {
					t.Fatalf("%s is ordered before its dependency %s", st.Name, d)
				}
				want = max(want, levels[d]+1)
			}
			if levels[st.Name] != want {
				t.Fatalf("%s at level %d, want %d", st.Name, levels[st.Name], want)
			}
		}
		// An edge back from a dependency to one of its dependants closes a cycle.
		var from, to string
		for _, st := range def.Steps {
			if len(plan.Deps[st.Name]) > 0 {
				from, to = plan.Deps[st.Name][0], st.Name
				break
			}
		}
		if from == "" {
			return
		}
		for i := range def.Steps {
			if def.Steps[i].Name == from {
				def.Steps[i].DependsOn = append(slices.Clone(def.Steps[i].DependsOn), to)
			}
		}
		_, ps = Check(def, nil)
		if len(ps) != 1 || !strings.Contains(ps[0], "cycle") || !strings.Contains(ps[0], from+" → "+to) && !strings.Contains(ps[0], to+" → ") {
			t.Fatalf("a cycle through %s → %s: %v", from, to, ps)
		}
	})
}
