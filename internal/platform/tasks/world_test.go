package tasks_test

import (
	"context"
	"testing"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/platform/kernel/kerneltest"
	"github.com/klique-ai/klique/internal/platform/tasks"
	"github.com/klique-ai/klique/internal/store"
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
	st := kerneltest.Store(t)
	k := kernel.New(kernel.Options{Store: st})
	w := &world{k: k, st: st, tasks: tasks.New(k, tasks.Deps{})}
	res, err := kerneltest.ApplyEstate(w.as(t, "admin", model.RoleTenantAdmin), k, testEstate, false)
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
	return kerneltest.User(t, w.st, w.e, name, role, groups...)
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
