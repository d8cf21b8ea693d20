package kernel_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/platform/kernel/kerneltest"
)

// The estate rules the kernel owns: the one way the allocation model
// changes (ChangeEstate: admins only, validated whole, dry runs, no
// deletion that strands work), what a non-admin sees of it, and a
// caller's default project.

const kernelEstate = `apiVersion: klique/v1
kind: Estate
gpuClasses:
  - {name: h100, memoryGb: 80}
pools:
  - {name: k8s, kind: kubernetes, capacity: 8, gpuClass: h100}
profiles:
  - {name: one-gpu, size: 1, pools: [k8s]}
groups:
  - {name: ml}
  - {name: vision}
policies:
  - group: ml
    limit: 8
    computeResources:
      - {name: 1 GPU, profile: one-gpu}
  - group: vision
    limit: 8
    computeResources:
      - {name: 1 GPU, profile: one-gpu}
projects:
  - {name: ml-proj, group: ml}
  - {name: vis-proj, group: vision}
  - {name: open}
`

// applyDoc changes the estate to doc as p.
func applyDoc(w *world, p *identity.Principal, doc string, dryRun bool) (*kernel.EstateResult, error) {
	return kerneltest.ApplyEstate(identity.WithPrincipal(w.ctx, p), w.k, doc, dryRun)
}

func estateWorld(t *testing.T) (*world, *identity.Principal, *estate.Estate) {
	t.Helper()
	w := newWorld(t, model.RoleTenantAdmin)
	if err := w.st.CreateUser(context.Background(), &model.User{ID: "u1", TenantID: "t1", Name: "alice", Role: model.RoleTenantAdmin}); err != nil {
		t.Fatal(err)
	}
	admin, _ := kernel.Caller(w.ctx)
	res, err := applyDoc(w, admin, kernelEstate, false)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	return w, admin, res.Estate
}

func TestChangeEstateRules(t *testing.T) {
	w, admin, e := estateWorld(t)
	member := &identity.Principal{TenantID: "t1", UserID: "u1", Role: model.RoleMember}
	more := kernelEstate + "  - {name: extra}\n"
	_, err := applyDoc(w, member, more, false)
	if kernel.ErrorCode(err) != kernel.CodeForbidden {
		t.Errorf("a member changed the estate: %v", err)
	}
	res, err := applyDoc(w, admin, more, true)
	if err != nil || !res.DryRun || len(res.Changes) != 1 || res.Changes[0].Action != estate.Create {
		t.Fatalf("a dry run: %+v, %v", res, err)
	}
	if cur, _ := w.k.Estate(w.ctx); cur.ProjectByName("extra") != nil {
		t.Error("a dry run wrote its change")
	}
	// A model that does not validate is refused whole, with every problem.
	bad := strings.Replace(kernelEstate, "limit: 8", "limit: -1", 2)
	_, err = applyDoc(w, admin, bad, false)
	var pe *kernel.Error
	if kernel.ErrorCode(err) != kernel.CodeInvalid || !errors.As(err, &pe) || len(pe.Problems) < 2 {
		t.Errorf("an invalid estate: %v", err)
	}

	// A compute resource with waiting work, and a project with tasks, stay.
	cr := e.ComputeResourcesOfPolicy(e.PolicyOfGroup(e.GroupByName("ml").ID).ID)[0]
	task := &model.Task{ID: model.NewID(), TenantID: "t1", ProjectID: e.ProjectByName("ml-proj").ID, OwnerID: "u1",
		ComputeResourceID: cr.ID, PolicyID: cr.PolicyID, ProfileID: cr.ProfileID, GroupID: e.GroupByName("ml").ID, Name: "train",
		Spec: model.TaskSpec{Command: []string{"x"}}, Status: model.TaskQueued}
	if err := w.st.CreateTask(context.Background(), task); err != nil {
		t.Fatal(err)
	}
	disconnect := func(_ *kernel.Txn, _, next *estate.Estate) (string, error) {
		next.ComputeResources = kernel.Remove(next.ComputeResources, next.ComputeResource(cr.ID))
		return cr.ID, nil
	}
	_, err = w.k.ChangeEstate(w.ctx, admin, "disconnect", false, disconnect)
	if kernel.ErrorCode(err) != kernel.CodeConflict || !strings.Contains(err.Error(), "compute resource '1 GPU' of group ml has 1 tasks queued or running") {
		t.Errorf("disconnecting a compute resource with waiting work: %v", err)
	}
	_, err = w.k.ChangeEstate(w.ctx, admin, "delete projects", false, func(_ *kernel.Txn, _, next *estate.Estate) (string, error) {
		next.Projects = kernel.Remove(next.Projects, next.ProjectByName("ml-proj"))
		return "", nil
	})
	if kernel.ErrorCode(err) != kernel.CodeConflict || !strings.Contains(err.Error(), "kept for their history") {
		t.Errorf("deleting a project with tasks: %v", err)
	}
	task.Status = model.TaskCompleted
	if err := w.st.UpdateTask(context.Background(), task); err != nil {
		t.Fatal(err)
	}
	if _, err := w.k.ChangeEstate(w.ctx, admin, "disconnect", false, disconnect); err != nil {
		t.Errorf("a compute resource whose work ended disconnects: %v", err)
	}
}

// A non-admin sees every pool and profile, but only their groups' groups,
// policies and compute resources, and the projects they use.
func TestVisibleEstate(t *testing.T) {
	_, _, e := estateWorld(t)
	ml := e.GroupByName("ml")
	p := &identity.Principal{TenantID: "t1", UserID: "u2", Role: model.RoleMember,
		Groups: []identity.GroupGrant{{GroupID: ml.ID, GroupName: "ml", Role: model.GroupRoleMember}}}
	v := kernel.VisibleEstate(p, e)
	if len(v.Pools) != 1 || len(v.Profiles) != 1 || len(v.Groups) != 1 || len(v.Policies) != 1 || len(v.ComputeResources) != 1 {
		t.Errorf("a member of ml sees %d pools, %d profiles, %d groups, %d policies, %d compute resources",
			len(v.Pools), len(v.Profiles), len(v.Groups), len(v.Policies), len(v.ComputeResources))
	}
	var projects []string
	for _, pr := range v.Projects {
		projects = append(projects, pr.Name)
	}
	if strings.Join(projects, ",") != "ml-proj,open" && strings.Join(projects, ",") != "open,ml-proj" {
		t.Errorf("projects seen: %v", projects)
	}
	if v := kernel.VisibleEstate(&identity.Principal{TenantID: "t1", Role: model.RoleMember}, e); len(v.Groups) != 0 || len(v.Projects) != 1 {
		t.Errorf("a member of no group sees %d groups and %d projects", len(v.Groups), len(v.Projects))
	}
}

// The default project: the credential's, the chosen one while usable, or
// the only project of the caller's groups.
func TestDefaultProject(t *testing.T) {
	_, _, e := estateWorld(t)
	ml, vision := e.GroupByName("ml"), e.GroupByName("vision")
	grant := func(g *model.Group) identity.GroupGrant { return identity.GroupGrant{GroupID: g.ID, GroupName: g.Name} }
	mlProj, visProj, open := e.ProjectByName("ml-proj"), e.ProjectByName("vis-proj"), e.ProjectByName("open")
	cases := []struct {
		name string
		p    identity.Principal
		want *model.Project
	}{
		{"the credential's project", identity.Principal{ProjectID: visProj.ID, Groups: []identity.GroupGrant{grant(ml)}}, visProj},
		{"the chosen one", identity.Principal{DefaultProjectID: open.ID, Groups: []identity.GroupGrant{grant(ml)}}, open},
		{"a chosen one no longer usable", identity.Principal{DefaultProjectID: visProj.ID, Groups: []identity.GroupGrant{grant(ml)}}, mlProj},
		{"the groups' only project", identity.Principal{Groups: []identity.GroupGrant{grant(ml)}}, mlProj},
		{"two groups, two projects", identity.Principal{Groups: []identity.GroupGrant{grant(ml), grant(vision)}}, nil},
		{"no group", identity.Principal{}, nil},
	}
	for _, c := range cases {
		c.p.Role = model.RoleMember
		if got := kernel.DefaultProject(e, &c.p); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if e := kernel.ProjectRequired("the task belongs to"); e.Reason != kernel.ReasonProjectRequired || e.Code != kernel.CodeInvalid {
		t.Errorf("ProjectRequired: %+v", e)
	}
}
