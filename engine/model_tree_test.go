package engine_test

import (
	"os"
	"testing"
	"time"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/engine/sim"
	"github.com/klique-ai/klique/internal/estate"
)

// treeOnExample puts the example's groups in a tree: ml-research and vision
// in research (40 GPUs, weight 2), research in company (no policy); nlp
// stays under the tenant.
const treeOnExample = `apiVersion: klique/v1
kind: Estate
departments:
  - name: research
    parent: company
  - name: company
groups:
  - name: ml-research
    department: research
  - name: vision
    department: research
policies:
  - department: research
    reservation: 40
    limit: 64
    weight: 2
`

func TestModelTree(t *testing.T) {
	data, err := os.ReadFile("../examples/estate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	flat, _, err := sim.LoadEstate(data)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := estate.ParseDocument([]byte(treeOnExample))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	e, err := doc.Apply(flat, "simulation", func() string { n++; return "tree-" + string(rune('a'+n)) }, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Validate(); err != nil {
		t.Fatal(err)
	}
	m := engine.NewModel(e)
	s := m.Empty(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC), nil)

	t.Run("the policies come first in their groups' name order, then departments without a policy", func(t *testing.T) {
		var names []string
		for _, g := range s.Groups {
			names = append(names, g.Name)
		}
		want := []string{"ml-research", "nlp", "research", "vision", "company"}
		if len(names) != len(want) {
			t.Fatalf("groups %v, want %v", names, want)
		}
		for i := range want {
			if names[i] != want[i] {
				t.Fatalf("groups %v, want %v", names, want)
			}
		}
		if len(m.Policies) != 4 {
			t.Fatalf("%d policies, want 4", len(m.Policies))
		}
	})

	node := func(name string) (int, *engine.Group) {
		for i := range s.Groups {
			if s.Groups[i].Name == name {
				return i, &s.Groups[i]
			}
		}
		t.Fatalf("no node %s", name)
		return 0, nil
	}
	parentName := func(g *engine.Group) string {
		if p, ok := g.ParentIndex(); ok {
			return s.Groups[p].Name
		}
		return ""
	}

	t.Run("every node's parent is its department's node, and the top is 0", func(t *testing.T) {
		for name, want := range map[string]string{"ml-research": "research", "vision": "research", "research": "company", "company": "", "nlp": ""} {
			if _, g := node(name); parentName(g) != want {
				t.Errorf("%s sits in %q, want %q", name, parentName(g), want)
			}
		}
	})

	t.Run("departments are marked, weights carried, the default weight left 0", func(t *testing.T) {
		_, research := node("research")
		_, company := node("company")
		_, vision := node("vision")
		if !research.Department || !company.Department || vision.Department {
			t.Errorf("department marks: research %v, company %v, vision %v", research.Department, company.Department, vision.Department)
		}
		if research.Weight != 2 || vision.Weight != 0 {
			t.Errorf("weights: research %d, vision %d", research.Weight, vision.Weight)
		}
		if research.Reservation != 40_000 || research.Limit != 64_000 {
			t.Errorf("research %+v", research)
		}
	})

	t.Run("a department without a policy reserves what its children do, has no limit, and is not paused", func(t *testing.T) {
		_, company := node("company")
		if company.Reservation != 40_000 {
			t.Errorf("company reserves %s, want research's 40", company.Reservation)
		}
		if company.Limit != engine.NoLimit || company.Paused() {
			t.Errorf("company's limit %d (paused %v), want NoLimit", company.Limit, company.Paused())
		}
		if company.Budget != nil {
			t.Error("a department without a policy has no budget")
		}
	})

	t.Run("the layout is the same whatever order the estate lists its objects in", func(t *testing.T) {
		r := e.Clone()
		for i, j := 0, len(r.Groups)-1; i < j; i, j = i+1, j-1 {
			r.Groups[i], r.Groups[j] = r.Groups[j], r.Groups[i]
		}
		for i, j := 0, len(r.Policies)-1; i < j; i, j = i+1, j-1 {
			r.Policies[i], r.Policies[j] = r.Policies[j], r.Policies[i]
		}
		s2 := engine.NewModel(r).Empty(s.Now, nil)
		if len(s2.Groups) != len(s.Groups) {
			t.Fatalf("%d groups, want %d", len(s2.Groups), len(s.Groups))
		}
		for i := range s.Groups {
			a, b := s.Groups[i], s2.Groups[i]
			if a.ID != b.ID || a.Parent != b.Parent || a.Reservation != b.Reservation || a.Limit != b.Limit || a.Weight != b.Weight || a.Department != b.Department {
				t.Errorf("node %d: %+v, then %+v", i, a, b)
			}
		}
	})

	t.Run("a pass over the tree runs", func(t *testing.T) {
		var cr string
		for _, q := range m.Queues {
			if e.PolicyGroupName(q.PolicyID) == "vision" && q.Name == "1 GPU" {
				cr = q.ID
			}
		}
		snap, err := m.Snapshot(s.Now, []engine.TaskState{{ID: "w", ComputeResourceID: cr, Size: e.ProfileByName("one-gpu").Size, Seq: 1}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if d := engine.Pass(snap); len(d.Placements) != 1 {
			t.Errorf("decisions %+v: the waiting task must be placed", d)
		}
	})
}

// TestDepartmentsExample applies examples/departments.yaml on top of the
// example estate, as its header says, and checks the tree it gives.
func TestDepartmentsExample(t *testing.T) {
	base, err := os.ReadFile("../examples/estate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e, _, err := sim.LoadEstate(base)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("../examples/departments.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := estate.ParseDocument(data)
	if err != nil {
		t.Fatal(err)
	}
	e, err = doc.Apply(e, "simulation", func() string { return "dept" }, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Validate(); err != nil {
		t.Fatal(err)
	}
	if ws := e.Warnings(); len(ws) != 0 {
		t.Errorf("warnings %v", ws)
	}
	s := engine.NewModel(e).Empty(time.Time{}, nil)
	var research int
	for i, g := range s.Groups {
		if g.Name == "research" {
			research = i
		}
	}
	for _, g := range s.Groups {
		p, ok := g.ParentIndex()
		in := ok && p == research
		if want := g.Name == "ml-research" || g.Name == "vision"; in != want {
			t.Errorf("%s in research: %v, want %v", g.Name, in, want)
		}
	}
	if g := s.Groups[research]; !g.Department || g.Weight != 2 || g.Reservation != 40_000 {
		t.Errorf("research %+v", g)
	}
}
