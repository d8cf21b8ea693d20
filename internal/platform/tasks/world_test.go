package tasks_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/platform/tasks"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlite"
)

// world is the tasks domain alone, on a kernel over a fresh SQLite store,
// with the estate below applied: no facade, no other domain.
type world struct {
	k     *kernel.Kernel
	st    store.Store
	tasks *tasks.Tasks
	e     *estate.Estate
}

// The estate of these tests: group ml may hold 6 GPUs; profile flex reads
// its size from the "gpus" parameter and runs only on the 4-GPU
// bare-metal pool; wide reads it too, on a Kubernetes pool of 8; shut's
// only pool declares 0 GPUs. "1 GPU" is a name both groups have.
const testEstate = `apiVersion: klique/v1
kind: Estate
gpuClasses:
  - {name: h100, memoryGb: 80}
pools:
  - {name: k8s, kind: kubernetes, capacity: 8, gpuClass: h100}
  - {name: metal, kind: bare_metal, capacity: 4, gpuClass: h100}
  - {name: closed, kind: bare_metal, capacity: 0, gpuClass: h100}
profiles:
  - {name: one-gpu, size: 1, pools: [k8s, metal]}
  - {name: flex, sizeFromParameter: {parameter: gpus, default: 1}, pools: [metal]}
  - {name: wide, sizeFromParameter: {parameter: gpus, default: 1}, pools: [k8s, metal]}
  - {name: shut, size: 2, pools: [closed]}
groups:
  - {name: ml}
  - {name: vision}
policies:
  - group: ml
    limit: 6
    computeResources:
      - {name: 1 GPU, profile: one-gpu}
      - {name: flex, profile: flex}
      - {name: wide, profile: wide}
      - {name: shut, profile: shut}
  - group: vision
    limit: 8
    computeResources:
      - {name: 1 GPU, profile: one-gpu}
projects:
  - {name: ml-proj, group: ml}
  - {name: vis-proj, group: vision}
  - {name: open}
`

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "klique.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.CreateTenant(ctx, &model.Tenant{ID: "t1", Name: "acme"}); err != nil {
		t.Fatal(err)
	}
	k := kernel.New(kernel.Options{Store: st})
	w := &world{k: k, st: st, tasks: tasks.New(k)}
	doc, err := estate.ParseDocument([]byte(testEstate))
	if err != nil {
		t.Fatal(err)
	}
	admin := w.as(t, "admin", model.RoleTenantAdmin)
	p, _ := kernel.Caller(admin)
	res, err := k.ChangeEstate(admin, p, "apply the test estate", false, func(tx *kernel.Txn, cur, next *estate.Estate) (string, error) {
		applied, err := doc.Apply(cur, "t1", model.NewID, tx.Now)
		if err != nil {
			return "", err
		}
		*next = *applied
		return "", nil
	})
	if err != nil {
		t.Fatalf("apply the test estate: %v", err)
	}
	w.e = res.Estate
	return w
}

// as creates a user of role in the groups named (a name prefixed "lead:"
// makes them its lead) and returns a context acting as them.
func (w *world) as(t *testing.T, name string, role model.Role, groups ...string) context.Context {
	t.Helper()
	u := &model.User{ID: model.NewID(), TenantID: "t1", Name: name, Role: role}
	if err := w.st.CreateUser(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	p := &identity.Principal{TenantID: "t1", UserID: u.ID, UserName: name, Role: role}
	for _, g := range groups {
		gr := model.GroupRoleMember
		if len(g) > 5 && g[:5] == "lead:" {
			g, gr = g[5:], model.GroupRoleLead
		}
		grp := w.e.GroupByName(g)
		if grp == nil {
			t.Fatalf("no group %s", g)
		}
		p.Groups = append(p.Groups, identity.GroupGrant{GroupID: grp.ID, GroupName: g, Role: gr})
	}
	return identity.WithPrincipal(context.Background(), p)
}

// computeResource is the id of a group's compute resource of a name.
func (w *world) computeResource(t *testing.T, group, name string) string {
	t.Helper()
	pol := w.e.PolicyOfGroup(w.e.GroupByName(group).ID)
	for _, cr := range w.e.ComputeResourcesOfPolicy(pol.ID) {
		if cr.Name == name {
			return cr.ID
		}
	}
	t.Fatalf("group %s has no compute resource %s", group, name)
	return ""
}

// enqueue sends a small command task; gpus, when set, is its "gpus"
// parameter.
func (w *world) enqueue(ctx context.Context, project, cr, group, gpus string) (*model.Task, error) {
	spec := model.TaskSpec{Command: []string{"python", "train.py"}}
	if gpus != "" {
		spec.Parameters = map[string]string{"gpus": gpus}
	}
	return w.tasks.EnqueueTask(ctx, tasks.EnqueueInput{Name: "train", Project: project, ComputeResource: cr, Group: group, Spec: spec})
}

func (w *world) audits(t *testing.T, action string) int {
	t.Helper()
	es, err := w.st.ListAudit(context.Background(), "t1", store.AuditFilter{ObjectKind: "task"}, store.Page{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range es {
		if e.Action == action {
			n++
		}
	}
	return n
}
