package loop_test

import (
	"context"
	"testing"
	"time"

	"github.com/klique-ai/klique/engine/loop"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
	"github.com/klique-ai/klique/internal/store"
)

// world is a control plane without HTTP: platformtest's bundle (store,
// platform service, event bus, users) on a fake clock, and the engine loop
// on the same clock.
type world struct {
	*platformtest.Bundle
	t    testing.TB
	loop *loop.Loop
}

// worldOptions give every world an event bus and a clock of its own.
var worldOptions = []platformtest.Option{platformtest.WithEvents(), platformtest.WithClock(start)}

func forEachStore(t *testing.T, fn func(t *testing.T, w *world)) {
	platformtest.ForEachStore(t, func(t *testing.T, b *platformtest.Bundle) { fn(t, newWorld(t, b)) }, worldOptions...)
}

// A Wednesday, so that a weekly budget period runs until Monday.
var start = time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)

// newWorld puts the engine loop over a bundle built with worldOptions.
func newWorld(t testing.TB, b *platformtest.Bundle) *world {
	return &world{Bundle: b, t: t, loop: &loop.Loop{State: platform.EngineState{Store: b.Store}, Planner: b.Svc, Now: b.Clock.Now, Holder: "test"}}
}

func (w *world) apply(doc string) {
	w.t.Helper()
	w.Apply(w.t, []byte(doc))
}

// member creates a member of group and signs in as them.
func (w *world) member(name, group string) context.Context {
	w.t.Helper()
	return w.User(w.t, name, model.RoleMember, group)
}

func (w *world) enqueue(as context.Context, resource, project string, n int) []*model.Task {
	w.t.Helper()
	var out []*model.Task
	for i := 0; i < n; i++ {
		task, err := w.Svc.EnqueueTask(as, platform.EnqueueInput{Name: "train", Project: project, ComputeResource: resource,
			Spec: model.TaskSpec{Command: []string{"python", "train.py"}}})
		if err != nil {
			w.t.Fatal(err)
		}
		out = append(out, task)
	}
	return out
}

func (w *world) pass() loop.Report {
	w.t.Helper()
	reports, err := w.loop.PassAll(context.Background())
	if err != nil {
		w.t.Fatal(err)
	}
	if len(reports) != 1 {
		w.t.Fatalf("%d reports, want one per tenant", len(reports))
	}
	return reports[0]
}

func (w *world) task(id string) *model.Task {
	w.t.Helper()
	t, err := w.Svc.Task(w.Admin, id)
	if err != nil {
		w.t.Fatal(err)
	}
	return t
}

// consistent checks the rule that makes the ledger lose nothing: every task
// holding capacity has exactly one open ledger interval, and no other task
// has one.
func (w *world) consistent(tenantID string) {
	w.t.Helper()
	open, err := w.Store.ListPlacements(context.Background(), tenantID, store.PlacementFilter{OpenOnly: true})
	if err != nil {
		w.t.Fatal(err)
	}
	held, err := w.Store.ListSchedulable(context.Background(), tenantID, 0)
	if err != nil {
		w.t.Fatal(err)
	}
	openBy := map[string]int{}
	for _, p := range open {
		openBy[p.TaskID]++
	}
	for _, h := range held {
		if openBy[h.ID] != 1 {
			w.t.Fatalf("task %s holds capacity with %d open ledger intervals", h.ID, openBy[h.ID])
		}
		delete(openBy, h.ID)
	}
	for id := range openBy {
		w.t.Fatalf("task %s holds no capacity but has an open ledger interval", id)
	}
}

const smallEstate = `apiVersion: klique/v1
kind: Estate
gpuClasses:
  - {name: h100, memoryGb: 80, pricePerGpuHour: 2}
pools:
  - {name: p1, kind: kubernetes, capacity: 4, gpuClass: h100}
  - {name: p2, kind: cloud, capacity: 2, gpuClass: h100}
profiles:
  - {name: one-gpu, size: 1, pools: [p1, p2]}
groups:
  - {name: A}
  - {name: B}
policies:
  - group: A
    reservation: 2
    limit: 6
    computeResources: [{name: 1 GPU, profile: one-gpu}]
  - group: B
    reservation: 2
    limit: 6
    computeResources: [{name: 1 GPU, profile: one-gpu}]
projects:
  - {name: research}
`
