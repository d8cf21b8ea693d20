package estate_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/estate/estatetest"
	"github.com/klique-ai/klique/internal/model"
)

// treeFile is a valid organisation tree on top of the base estate's
// classes, pools and profiles: science (64) holds ai (32) and the team
// vision (16); ai holds nlp (8) and speech (8); infra sits at the top.
const treeFile = estatetest.Header + `
departments:
  - name: ai
    parent: science
    description: Applied AI
  - name: science
policies:
  - department: science
    reservation: 64
    limit: 96
    weight: 3
  - department: ai
    reservation: 32
    limit: 200
  - group: nlp
    reservation: 8
    limit: 16
    weight: 2
    computeResources:
      - profile: one-gpu
  - group: speech
    reservation: 8
    limit: 16
  - group: vision
    reservation: 16
    limit: 32
groups:
  - name: nlp
    department: ai
  - name: speech
    department: ai
  - name: vision
    department: science
  - name: infra
`

// treeEstate applies treeFile onto the base estate and validates it.
func treeEstate(t *testing.T) *estate.Estate {
	t.Helper()
	e := estatetest.Apply(t, baseEstate(), treeFile)
	if err := e.Validate(); err != nil {
		t.Fatalf("the tree estate is invalid: %v", err)
	}
	return e
}

func TestTree(t *testing.T) {
	t.Run("departments, a group's department and weights are read from the file", func(t *testing.T) {
		e := treeEstate(t)
		science, ai := e.DepartmentByName("science"), e.DepartmentByName("ai")
		if science == nil || ai == nil {
			t.Fatalf("departments %v", e.Departments())
		}
		if science.ParentID != "" || ai.ParentID != science.ID || ai.Description != "Applied AI" {
			t.Errorf("science %+v, ai %+v", science, ai)
		}
		for name, parent := range map[string]string{"nlp": ai.ID, "speech": ai.ID, "vision": science.ID, "infra": ""} {
			g := e.GroupByName(name)
			if g == nil || g.IsDepartment() || g.ParentID != parent {
				t.Errorf("group %s: %+v, want a team in %q", name, g, parent)
			}
		}
		if w := e.PolicyOfGroup(science.ID).Weight; w != 3 {
			t.Errorf("science's weight %d, want 3", w)
		}
		if w := policyOf(e, "nlp").Weight; w != 2 {
			t.Errorf("nlp's weight %d, want 2", w)
		}
		if pol := policyOf(e, "vision"); pol.Weight != 0 || pol.EffectiveWeight() != 1 {
			t.Errorf("vision's weight %d (effective %d): a weight left out is the default, kept as 0 and read as 1", pol.Weight, pol.EffectiveWeight())
		}
		if got := e.Path(e.GroupByName("nlp").ID); got != "science → ai → nlp" {
			t.Errorf("path %q", got)
		}
	})

	t.Run("the effective limit is the smallest along the path, and a limit may exceed the parent's", func(t *testing.T) {
		e := treeEstate(t)
		// ai's limit 200 is above science's 96: allowed, and science's
		// holds.
		if l, ok := e.EffectiveLimit(e.GroupByName("nlp").ID); !ok || l != 16 {
			t.Errorf("nlp's effective limit %d %v, want its own 16", l, ok)
		}
		if l, ok := e.EffectiveLimit(e.GroupByName("ai").ID); !ok || l != 96 {
			t.Errorf("ai's effective limit %d %v, want science's 96", l, ok)
		}
		if _, ok := e.EffectiveLimit(e.GroupByName("infra").ID); ok {
			t.Error("infra has no policy on its path, so no limit")
		}
	})

	t.Run("export round-trips the tree: departments, their parents, groups' departments and weights", func(t *testing.T) {
		e := treeEstate(t)
		out, err := e.Export().Marshal()
		if err != nil {
			t.Fatal(err)
		}
		text := string(out)
		for _, want := range []string{"departments:", "parent: science", "department: ai", "department: science", "weight: 3", "weight: 2"} {
			if !strings.Contains(text, want) {
				t.Errorf("export lacks %q:\n%s", want, text)
			}
		}
		back := estatetest.Apply(t, e, text)
		if cs := estate.Diff(e, back); len(cs) != 0 {
			t.Errorf("export, parse and apply changed:%s", estatetest.ChangeList(cs))
		}
		fresh := estatetest.Apply(t, &estate.Estate{}, text)
		if err := fresh.Validate(); err != nil {
			t.Fatalf("the export applied onto an empty estate is invalid: %v", err)
		}
		again, err := fresh.Export().Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if string(again) != text {
			t.Errorf("the export of the export differs:\n%s\nwant:\n%s", again, text)
		}
	})

	t.Run("a flat estate exports without departments or weights", func(t *testing.T) {
		out, err := baseEstate().Export().Marshal()
		if err != nil {
			t.Fatal(err)
		}
		for _, no := range []string{"departments", "department:", "weight"} {
			if strings.Contains(string(out), no) {
				t.Errorf("export of a flat estate holds %q:\n%s", no, out)
			}
		}
	})

	t.Run("diff names department creates, updates and deletes, departments before their groups", func(t *testing.T) {
		base := baseEstate()
		e := treeEstate(t)
		cs := estate.Diff(base, e)
		list := estatetest.ChangeList(cs)
		for _, want := range []string{"create department science", "create department ai", "create resource policy of department science",
			"update group vision (parentID)", "create group nlp"} {
			if !strings.Contains(list, want) {
				t.Errorf("changes lack %q:%s", want, list)
			}
		}
		if strings.Index(list, "create department ai") > strings.Index(list, "create group nlp") {
			t.Errorf("a department must be created before the groups in it:%s", list)
		}
		next := e.Clone()
		next.DepartmentByName("ai").Description = "renamed"
		if cs := estate.Diff(e, next); len(cs) != 1 || cs[0].String() != "update department ai (description)" || cs[0].Kind != estate.KindDepartment {
			t.Errorf("changes:%s", estatetest.ChangeList(cs))
		}
		// Move infra into ai's place and remove ai with its groups.
		gone := e.Clone()
		ai := gone.DepartmentByName("ai")
		var keep []*model.Group
		for _, g := range gone.Groups {
			if g.ID != ai.ID && g.ParentID != ai.ID {
				keep = append(keep, g)
			}
		}
		gone.Groups = keep
		var pols []*model.ResourcePolicy
		for _, p := range gone.Policies {
			if gone.Group(p.GroupID) != nil {
				pols = append(pols, p)
			}
		}
		gone.Policies = pols
		var crs []*model.ComputeResource
		for _, cr := range gone.ComputeResources {
			if gone.Policy(cr.PolicyID) != nil {
				crs = append(crs, cr)
			}
		}
		gone.ComputeResources = crs
		gone.Normalize()
		if err := gone.Validate(); err != nil {
			t.Fatal(err)
		}
		list = estatetest.ChangeList(estate.Diff(e, gone))
		if !strings.Contains(list, "delete department ai") || strings.Index(list, "delete department ai") < strings.Index(list, "delete group nlp") {
			t.Errorf("a department is deleted after the groups in it:%s", list)
		}
	})
}

// refusedApply checks that applying text onto the tree estate is refused
// with a problem holding every one of want, and that the estate it was
// applied onto is unchanged.
func refusedApply(t *testing.T, text string, want ...string) {
	t.Helper()
	cur := treeEstate(t)
	before := cur.Clone()
	next, err := estatetest.Parse(t, text).Apply(cur, "t", estatetest.SeqIDs("x"), estatetest.Now)
	if err == nil {
		err = next.Validate()
	}
	ps := estatetest.Problems(t, err)
	if ps == nil {
		t.Fatalf("accepted; want a problem with %q", want)
	}
	if _, ok := estatetest.FindProblem(ps, want...); !ok {
		t.Errorf("no problem with %q:%s", want, estatetest.ProblemList(ps))
	}
	if !reflect.DeepEqual(cur, before) {
		t.Error("a refused apply changed the estate it was applied onto")
	}
}

func TestTreeRefusals(t *testing.T) {
	h := estatetest.Header
	cases := []struct {
		name string
		file string
		want []string
	}{
		{"a department whose parent is unknown", h + "departments:\n  - name: lab\n    parent: nowhere\n",
			[]string{`department "lab"`, `parent "nowhere" is not a known department; add it under departments`}},
		{"a department whose parent is a group", h + "departments:\n  - name: lab\n    parent: vision\n",
			[]string{`department "lab"`, `parent "vision" is a group`}},
		{"a group in an unknown department", h + "groups:\n  - name: vision\n    department: nowhere\n",
			[]string{`group "vision"`, `department "nowhere" is not a known department; add it under departments`}},
		{"a group in a group", h + "groups:\n  - name: vision\n    department: infra\n",
			[]string{`group "vision"`, `department "infra" is a group`}},
		{"departments that form a cycle", h + "departments:\n  - name: science\n    parent: ai\n  - name: ai\n    parent: science\n",
			[]string{`department "ai"`, "departments ai → science → ai form a cycle; give one of them a parent outside it"}},
		{"more than four levels of departments", h + `departments:
  - name: d1
  - name: d2
    parent: d1
  - name: d3
    parent: d2
  - name: d4
    parent: d3
  - name: d5
    parent: d4
`, []string{`department "d5"`, "is 5 levels of departments deep (d1 → d2 → d3 → d4 → d5); departments nest at most 4 levels"}},
		{"a name used by a group and a department in one file", h + "departments:\n  - name: robotics\ngroups:\n  - name: robotics\n",
			[]string{`"robotics"`, "used by both a group and a department"}},
		{"a department named like an existing group", h + "departments:\n  - name: vision\n",
			[]string{`department "vision"`, "used by both a group and a department"}},
		{"a group named like an existing department", h + "groups:\n  - name: ai\n",
			[]string{`group "ai"`, "used by both a group and a department"}},
		{"a child's reservation above its department's", h + "groups:\n  - name: vision\n    department: ai\npolicies:\n  - group: vision\n    reservation: 40\n    limit: 64\n",
			[]string{`resource policy of group "vision"`, "group vision reserves 40 GPUs but its department ai reserves only 32: lower vision's reservation or raise ai's"}},
		{"siblings' reservations above their department's", h + "policies:\n  - group: nlp\n    reservation: 20\n    limit: 32\n  - group: speech\n    reservation: 20\n    limit: 32\n",
			[]string{`resource policy of department "ai"`, "add up to 40 GPUs (nlp 20, speech 20), more than the 32 GPUs department ai reserves", "at least 40"}},
		{"a department's reservation below what its children reserve", h + "policies:\n  - department: science\n    reservation: 40\n    limit: 96\n",
			[]string{`resource policy of department "science"`, "add up to 48 GPUs (ai 32, vision 16)"}},
		{"compute resources under a department's policy", h + "policies:\n  - department: ai\n    reservation: 32\n    limit: 64\n    computeResources:\n      - profile: one-gpu\n",
			[]string{`resource policy of department "ai"`, "a department has no compute resources of its own"}},
		{"a policy naming a group and a department", h + "policies:\n  - group: vision\n    department: ai\n    limit: 8\n",
			[]string{`names group "vision" and department "ai"`, "name one"}},
		{"a group's policy naming a department", h + "policies:\n  - group: ai\n    limit: 8\n",
			[]string{`"ai" is a department: write department: "ai"`}},
		{"a department's policy naming an unknown department", h + "policies:\n  - department: vision\n    limit: 8\n",
			[]string{`department "vision" is not a known department`}},
		{"a weight of 0", h + "policies:\n  - group: infra\n    limit: 8\n    weight: 0\n",
			[]string{`resource policy of group "infra"`, "weight 0 must be 1 or more"}},
		{"a weight above the bound", h + "policies:\n  - group: infra\n    limit: 8\n    weight: 20000\n",
			[]string{"weight 20000 must be between 1 and 10000"}},
		{"a project of a department", h + "projects:\n  - name: lab-notes\n    group: ai\n",
			[]string{`project "lab-notes"`, `belongs to department "ai"; a project belongs to a team`}},
		{"a department described twice", h + "departments:\n  - name: ai\n  - name: ai\n",
			[]string{`department "ai"`, "appears twice"}},
	}
	for _, c := range cases {
		t.Run(c.name+" is refused, saying what to change, and nothing changes", func(t *testing.T) {
			refusedApply(t, c.file, c.want...)
		})
	}

	t.Run("a limit above the parent's is accepted", func(t *testing.T) {
		e := estatetest.Apply(t, treeEstate(t), h+"policies:\n  - group: vision\n    reservation: 16\n    limit: 500\n")
		if err := e.Validate(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a department without a policy reserves what its children reserve", func(t *testing.T) {
		// lab has no policy; its groups' 20 + 20 count against science's 64
		// beside ai's 32 and vision's 16.
		refusedApply(t, h+`departments:
  - name: lab
    parent: science
groups:
  - name: infra
    department: lab
  - name: ops
    department: lab
policies:
  - group: infra
    reservation: 20
    limit: 20
  - group: ops
    reservation: 20
    limit: 20
`, `resource policy of department "science"`, "add up to 88 GPUs (ai 32, infra 20, ops 20, vision 16), more than the 64 GPUs")
	})

	t.Run("a group whose department is deleted by a change is refused", func(t *testing.T) {
		e := treeEstate(t)
		next := e.Clone()
		next.Groups = slicesDelete(next.Groups, next.DepartmentByName("ai"))
		var pols []*model.ResourcePolicy
		for _, p := range next.Policies {
			if next.Group(p.GroupID) != nil {
				pols = append(pols, p)
			}
		}
		next.Policies = pols
		ps := estatetest.Problems(t, next.Validate())
		if _, ok := estatetest.FindProblem(ps, `group "nlp"`, "sits in a department that does not exist"); !ok {
			t.Errorf("problems:%s", estatetest.ProblemList(ps))
		}
	})
}

func slicesDelete(gs []*model.Group, g *model.Group) []*model.Group {
	var out []*model.Group
	for _, x := range gs {
		if x != g {
			out = append(out, x)
		}
	}
	return out
}

func TestTreeWarnings(t *testing.T) {
	t.Run("a department reaches its groups' pools, and a pool's sum counts it and not the groups inside it", func(t *testing.T) {
		// science reserves 64 and reaches, through nlp's one-gpu, k8s (16)
		// and metal (8): 24 GPUs, less than 64. Its groups' 8 + 8 + 16 are
		// inside its 64, so no pool warning names them.
		ws := treeEstate(t).Warnings()
		list := warningList(ws)
		if !strings.Contains(list, `department "science"`) || !strings.Contains(list, "the reservation of department science is 64 GPUs, more than the 24 GPUs declared in the pools behind them (k8s, metal)") {
			t.Errorf("warnings lack science's:%s", list)
		}
		for _, w := range ws {
			if w.Code == "RESERVATIONS_EXCEED_CAPACITY" && strings.HasPrefix(w.Object, "pool") && strings.Contains(w.Message, "nlp (8)") {
				t.Errorf("a pool's sum counts nlp inside science: %s", w)
			}
		}
	})
}
