package platform_test

import (
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
)

// exampleTree puts the example's groups in an organisation tree: research
// (40 GPUs, limit 64, weight 2) holds ml-research and vision and sits in
// company, which has no policy; nlp stays under the tenant.
const exampleTree = `apiVersion: klique/v1
kind: Estate
departments:
  - name: company
    description: The whole company
  - name: research
    parent: company
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

func TestDepartments(t *testing.T) {
	t.Parallel()

	t.Run("an estate file with departments applies, is audited, reads back and exports whole", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			auditBefore := len(b.AuditLog(t))
			res := b.Apply(t, []byte(exampleTree))
			var got []string
			for _, c := range res.Changes {
				got = append(got, c.String())
			}
			list := strings.Join(got, "\n")
			for _, want := range []string{"create department company", "create department research", "update group ml-research (description, parentID)",
				"update group vision (description, parentID)", "create resource policy of department research"} {
				if !strings.Contains(list, want) {
					t.Errorf("changes lack %q:\n%s", want, list)
				}
			}
			if n := len(b.AuditLog(t)) - auditBefore; n != len(res.Changes) {
				t.Errorf("%d audit entries for %d changes", n, len(res.Changes))
			}
			var actions []string
			for _, a := range b.AuditLog(t)[:len(res.Changes)] {
				actions = append(actions, a.Action)
			}
			if !strings.Contains(strings.Join(actions, " "), "department.created") {
				t.Errorf("audit actions %v lack department.created", actions)
			}
			if again := b.Apply(t, []byte(exampleTree)); len(again.Changes) != 0 {
				t.Errorf("applying the tree again changed %v", again.Changes)
			}

			ds, err := b.Svc.Departments(b.Admin)
			platformtest.Must(t, err)
			if len(ds) != 2 || ds[0].Name != "company" || ds[1].Name != "research" || ds[1].ParentID != ds[0].ID {
				t.Fatalf("departments %+v", ds)
			}
			subs, groups, err := b.Svc.DepartmentChildren(b.Admin, ds[1].ID)
			platformtest.Must(t, err)
			if len(subs) != 0 || len(groups) != 2 || groups[0].Name != "ml-research" || groups[1].Name != "vision" {
				t.Errorf("research holds %v and %v", subs, groups)
			}
			lim, err := b.Svc.TreeLimits(b.Admin, "ml-research")
			platformtest.Must(t, err)
			if lim.ReservedGPUs != 16 || lim.EffectiveLimitGPUs == nil || *lim.EffectiveLimitGPUs != 48 {
				t.Errorf("ml-research's view %+v", lim)
			}
			lim, err = b.Svc.TreeLimits(b.Admin, "company")
			platformtest.Must(t, err)
			if lim.ReservedGPUs != 40 || lim.EffectiveLimitGPUs != nil {
				t.Errorf("company's view %+v: it reserves what research does and sets no limit", lim)
			}
			// research's policy view counts the work of the groups below it.
			ps := b.people(t)
			enqueue(t, b, ps.rita, "fraud-models", "1 GPU", "", nil)
			enqueue(t, b, ps.vic, "vision-detect", "1 GPU", "", nil)
			views, err := b.Svc.PolicyViews(b.Admin, "research")
			platformtest.Must(t, err)
			if len(views) != 1 || views[0].Waiting != 2 {
				t.Errorf("research's view %+v: 2 tasks wait below it", views)
			}
			views, err = b.Svc.PolicyViews(b.Admin, "vision")
			platformtest.Must(t, err)
			if len(views) != 1 || views[0].Waiting != 1 {
				t.Errorf("vision's view %+v: 1 task of its own waits", views)
			}
			gs, err := b.Svc.Groups(b.Admin)
			platformtest.Must(t, err)
			for _, g := range gs {
				if g.IsDepartment() {
					t.Errorf("Groups lists department %s; it lists teams", g.Name)
				}
			}

			out, err := b.Svc.ExportEstate(b.Admin)
			platformtest.Must(t, err)
			for _, want := range []string{"departments:", "parent: company", "department: research", "weight: 2"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("export lacks %q", want)
				}
			}
			if again := b.Apply(t, out); len(again.Changes) != 0 {
				t.Errorf("applying the export changed %v", again.Changes)
			}
		})
	})

	t.Run("a member sees the departments above their groups and not the others' groups; another tenant sees none", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			b.Apply(t, []byte(exampleTree))
			ps := b.people(t)
			ds, err := b.Svc.Departments(ps.vic)
			platformtest.Must(t, err)
			if len(ds) != 2 {
				t.Fatalf("vic sees departments %v, want company and research", ds)
			}
			_, groups, err := b.Svc.DepartmentChildren(ps.vic, ds[1].ID)
			platformtest.Must(t, err)
			if len(groups) != 1 || groups[0].Name != "vision" {
				t.Errorf("vic sees research holding %v; only vision is vic's", groups)
			}
			ds, err = b.Svc.Departments(ps.nobody)
			platformtest.Must(t, err)
			if len(ds) != 0 {
				t.Errorf("a member of no group sees departments %v", ds)
			}
			_, err = b.Svc.Department(ps.nobody, "research")
			platformtest.WantError(t, err, platform.CodeNotFound, "no department 'research'")

			nt, err := b.Svc.CreateTenant(b.Admin, "acme", "Acme Corp", "root")
			platformtest.Must(t, err)
			acme := b.SignIn(t, nt.Secret)
			ds, err = b.Svc.Departments(acme)
			platformtest.Must(t, err)
			if len(ds) != 0 {
				t.Errorf("another tenant's admin sees departments %v", ds)
			}
			_, err = b.Svc.Department(acme, ds0ID(t, b))
			platformtest.WantError(t, err, platform.CodeNotFound, "no department")
		})
	})

	t.Run("refused tree changes say what to change and leave the estate and the audit trail alone", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			b.Apply(t, []byte(exampleTree))
			cases := []struct {
				name  string
				doc   string
				words []string
			}{
				{"a group's reservation above its department's", "groups:\n  - name: nlp\n    department: research\npolicies:\n  - group: nlp\n    reservation: 48\n    limit: 64\n",
					[]string{"group nlp reserves 48 GPUs but its department research reserves only 40"}},
				{"siblings above their department", "policies:\n  - department: research\n    reservation: 30\n    limit: 64\n",
					[]string{`resource policy of department "research"`, "add up to 32 GPUs (ml-research 16, vision 16), more than the 30 GPUs department research reserves"}},
				{"a cycle", "departments:\n  - name: company\n    parent: research\n",
					[]string{"departments company → research → company form a cycle"}},
				{"compute resources under a department", "policies:\n  - department: research\n    limit: 64\n    computeResources:\n      - profile: one-gpu\n",
					[]string{"a department has no compute resources of its own"}},
			}
			for _, c := range cases {
				t.Log(c.name)
				before := b.snapshot(t)
				_, err := b.Svc.ApplyEstate(b.Admin, []byte("apiVersion: klique/v1\nkind: Estate\n"+c.doc), false)
				platformtest.WantError(t, err, platform.CodeInvalid, c.words...)
				b.unchanged(t, before)
			}
		})
	})

	t.Run("a department that still holds groups cannot be deleted", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			b.Apply(t, []byte(exampleTree))
			before := b.snapshot(t)
			_, err := b.Svc.DeleteGroup(b.Admin, "research")
			platformtest.WantError(t, err, platform.CodeConflict, "department research still holds ml-research, vision; move them")
			_, err = b.Svc.DeleteGroup(b.Admin, "company")
			platformtest.WantError(t, err, platform.CodeConflict, "department company still holds research")
			b.unchanged(t, before)
		})
	})

	t.Run("a group moves between departments through the API, within the reservations' rules", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			b.Apply(t, []byte(exampleTree))
			before := b.snapshot(t)
			_, err := b.Svc.UpdateGroup(b.Admin, "nlp", platform.GroupInput{Department: ptr("vision")})
			platformtest.WantError(t, err, platform.CodeInvalid, "group nlp: no department 'vision'; name a department")
			b.unchanged(t, before)
			_, err = b.Svc.UpdateGroup(b.Admin, "nlp", platform.GroupInput{Department: ptr("company")})
			platformtest.Must(t, err)
			_, err = b.Svc.UpdateGroup(b.Admin, "nlp", platform.GroupInput{Department: ptr("")})
			platformtest.Must(t, err)
			_, err = b.Svc.UpdatePolicy(b.Admin, "nlp", platform.PolicyInput{ReservationGPUs: ptr(16)})
			platformtest.Must(t, err)
			before = b.snapshot(t)
			_, err = b.Svc.UpdateGroup(b.Admin, "nlp", platform.GroupInput{Department: ptr("research")})
			platformtest.WantError(t, err, platform.CodeInvalid, "add up to 48 GPUs (ml-research 16, nlp 16, vision 16), more than the 40 GPUs department research reserves")
			b.unchanged(t, before)
			res, err := b.Svc.CreateGroup(b.Admin, platform.GroupInput{Name: ptr("robotics"), Department: ptr("research")})
			platformtest.Must(t, err)
			if g := res.Estate.GroupByName("robotics"); g == nil || g.ParentID != res.Estate.DepartmentByName("research").ID {
				t.Errorf("robotics %+v, want it in research", g)
			}
		})
	})

	t.Run("a policy's weight set through the API is refused below 1 and kept otherwise", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			before := b.snapshot(t)
			_, err := b.Svc.UpdatePolicy(b.Admin, "vision", platform.PolicyInput{Weight: ptr(0)})
			platformtest.WantError(t, err, platform.CodeInvalid, "weight 0 must be 1 or more")
			b.unchanged(t, before)
			res, err := b.Svc.UpdatePolicy(b.Admin, "vision", platform.PolicyInput{Weight: ptr(5)})
			platformtest.Must(t, err)
			if pol := res.Estate.PolicyOfGroup(res.Estate.GroupByName("vision").ID); pol.Weight != 5 {
				t.Errorf("weight %d, want 5", pol.Weight)
			}
			e, err := b.Svc.Estate(b.Admin)
			platformtest.Must(t, err)
			if w := e.PolicyOfGroup(e.GroupByName("vision").ID).Weight; w != 5 {
				t.Errorf("weight read back %d, want 5", w)
			}
		})
	})
}

// ds0ID is the id of the first department of b's tenant, as its admin
// reads it.
func ds0ID(t *testing.T, b *testBundle) string {
	t.Helper()
	ds, err := b.Svc.Departments(b.Admin)
	platformtest.Must(t, err)
	return ds[0].ID
}
