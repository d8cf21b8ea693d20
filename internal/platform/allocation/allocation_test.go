package allocation_test

import (
	"context"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/allocation"
	"github.com/klique-ai/klique/internal/platform/kernel"
)

// Only an unscoped tenant admin changes the allocation model; a refused
// change writes nothing.
func TestOnlyAnAdminChangesTheEstate(t *testing.T) {
	w := newWorld(t)
	rita := w.as(t, "rita", model.RoleMember, "", "ml")
	scoped := w.as(t, "sam", model.RoleTenantAdmin, "p1")
	in := allocation.GroupInput{Name: ptr("nlp")}
	_, err := w.alloc.CreateGroup(rita, in)
	wantError(t, "a member", err, kernel.CodeForbidden, "only a tenant admin can")
	_, err = w.alloc.CreateGroup(scoped, in)
	wantError(t, "a project-scoped admin", err, kernel.CodeForbidden, "scoped to one project")
	_, err = w.alloc.ApplyEstate(rita, []byte(testEstate), false)
	wantError(t, "a member applying a file", err, kernel.CodeForbidden, "apply an estate file")
	_, err = w.alloc.SetEngineEnabled(rita, false)
	wantError(t, "a member pausing the engine", err, kernel.CodeForbidden, "disable the compute policy engine")
	if n := w.audits(t, "group.created"); n != 2 {
		t.Errorf("%d groups created; want the estate's 2", n)
	}
	if res, err := w.alloc.CreateGroup(w.admin, in); err != nil || len(res.Changes) != 1 || res.Changes[0].Action != estate.Create || res.ID == "" {
		t.Fatalf("the admin creates a group: %+v, %v", res, err)
	}
}

// The rules of creating and changing pools.
func TestPoolRules(t *testing.T) {
	w := newWorld(t)
	kind, eight := model.PoolBareMetal, 8
	_, err := w.alloc.CreatePool(w.admin, allocation.PoolInput{Kind: &kind})
	wantError(t, "no name", err, kernel.CodeInvalid, "a pool needs a name")
	_, err = w.alloc.CreatePool(w.admin, allocation.PoolInput{Name: ptr("k8s"), Kind: &kind, CapacityGPUs: &eight, GPUClass: ptr("h100")})
	wantError(t, "a taken name", err, kernel.CodeConflict, "a pool named 'k8s' already exists")
	_, err = w.alloc.CreatePool(w.admin, allocation.PoolInput{Name: ptr("metal"), Kind: &kind})
	wantError(t, "no capacity or class", err, kernel.CodeInvalid, "needs a kind, a capacity in whole GPUs and a GPU class")
	_, err = w.alloc.CreatePool(w.admin, allocation.PoolInput{Name: ptr("metal"), Kind: &kind, CapacityGPUs: &eight, GPUClass: ptr("a100")})
	wantError(t, "an unknown class", err, kernel.CodeInvalid, "pool 'metal'")
	_, err = w.alloc.CreatePool(w.admin, allocation.PoolInput{Name: ptr("metal"), Kind: &kind, CapacityGPUs: &eight, GPUClass: ptr("l4"),
		ExecutionPriority: []string{"no-such-profile"}})
	wantError(t, "an unknown profile in the execution priority", err, kernel.CodeInvalid, "execution priority")

	res, err := w.alloc.CreatePool(w.admin, allocation.PoolInput{Name: ptr("metal"), Kind: &kind, CapacityGPUs: &eight, GPUClass: ptr("l4")})
	if err != nil {
		t.Fatal(err)
	}
	pool := res.Estate.Pool(res.ID)
	if pool.GPUMemoryGB != 24 || pool.ClaimTimeout != nil {
		t.Errorf("a new pool takes its class's memory and the default claim timeout: %d GB, %v", pool.GPUMemoryGB, pool.ClaimTimeout)
	}
	// Moved to another class, it takes that class's memory.
	res, err = w.alloc.UpdatePool(w.admin, "metal", allocation.PoolInput{GPUClass: ptr("h100"), ClaimTimeoutSeconds: ptr(0)})
	if err != nil {
		t.Fatal(err)
	}
	if pool = res.Estate.Pool(res.ID); pool.GPUMemoryGB != 80 || pool.ClaimTimeout == nil || *pool.ClaimTimeout != 0 {
		t.Errorf("after the move: %d GB, claim timeout %v; want 80 and off", pool.GPUMemoryGB, pool.ClaimTimeout)
	}
	res, err = w.alloc.UpdatePool(w.admin, "metal", allocation.PoolInput{ClaimTimeoutSeconds: ptr(-1)})
	if err != nil || res.Estate.Pool(res.ID).ClaimTimeout != nil {
		t.Errorf("a negative claim timeout returns it to the default: %v", err)
	}
}

// What is in use cannot be deleted or connected twice; each refusal says
// what to change first.
func TestDeletionsKeepWhatIsInUse(t *testing.T) {
	w := newWorld(t)
	_, err := w.alloc.DeleteGPUClass(w.admin, "h100")
	wantError(t, "a class a pool uses", err, kernel.CodeConflict, "used by pool k8s", "change them first")
	if _, err := w.alloc.DeleteGPUClass(w.admin, "l4"); err != nil {
		t.Errorf("an unused class: %v", err)
	}
	_, err = w.alloc.DeletePool(w.admin, "k8s")
	wantError(t, "a pool profiles link", err, kernel.CodeConflict, "linked from profiles one-gpu, two-gpus")
	_, err = w.alloc.ConnectProfile(w.admin, allocation.ConnectInput{Policy: "ml", Profile: "one-gpu"})
	wantError(t, "a profile connected twice", err, kernel.CodeConflict, "already connected to group ml's policy as compute resource '1 GPU'")
	_, err = w.alloc.ConnectProfile(w.admin, allocation.ConnectInput{Policy: "ml", Profile: "nope"})
	wantError(t, "an unknown profile", err, kernel.CodeInvalid)
	res, err := w.alloc.ConnectProfile(w.admin, allocation.ConnectInput{Policy: "vision", Profile: "two-gpus"})
	if err != nil || res.Estate.ComputeResource(res.ID).Name != "two-gpus" {
		t.Errorf("a compute resource is named for its profile unless named: %+v, %v", res, err)
	}
	_, err = w.alloc.UpdatePolicy(w.admin, "ml", allocation.PolicyInput{ClearTimeBudget: true,
		TimeBudget: &allocation.TimeBudgetInput{Hours: 1, Period: model.PeriodWeek}})
	wantError(t, "a budget given and cleared", err, kernel.CodeInvalid, "give a time budget or clear it, not both")
	res, err = w.alloc.UpdatePolicy(w.admin, "ml", allocation.PolicyInput{ClearTimeBudget: true})
	if err != nil || res.Estate.Policy(res.ID).Budget != nil {
		t.Errorf("clearing the budget: %v", err)
	}
}

// An estate file applies whole or not at all; a dry run and a second apply
// change nothing.
func TestApplyEstateIsWholeAndIdempotent(t *testing.T) {
	w := newWorld(t)
	before := w.audits(t, "pool.created")
	res, err := w.alloc.ApplyEstate(w.admin, []byte(testEstate), false)
	if err != nil || len(res.Changes) != 0 {
		t.Errorf("the same file again: %d changes, %v", len(res.Changes), err)
	}
	more := testEstate + "  - {name: other}\n"
	res, err = w.alloc.ApplyEstate(w.admin, []byte(more), true)
	if err != nil || !res.DryRun || len(res.Changes) != 1 {
		t.Fatalf("a dry run reports the change: %+v, %v", res, err)
	}
	if _, err := w.alloc.Project(w.admin, "other"); kernel.ErrorCode(err) != kernel.CodeNotFound {
		t.Errorf("a dry run wrote the project: %v", err)
	}
	bad := testEstate + "  - {name: bad, group: nosuch}\n"
	_, err = w.alloc.ApplyEstate(w.admin, []byte(bad), false)
	wantError(t, "a file with an unknown group", err, kernel.CodeInvalid, "nosuch")
	if n := w.audits(t, "pool.created"); n != before {
		t.Errorf("refused applies created %d pools", n-before)
	}
}

// The policy view: what a group holds against its reservation, what waits,
// and who sees which group's.
func TestPolicyViews(t *testing.T) {
	w := newWorld(t)
	rita := w.as(t, "rita", model.RoleMember, "", "ml")
	e, err := w.alloc.Estate(w.admin)
	if err != nil {
		t.Fatal(err)
	}
	ml := e.PolicyOfGroup(e.GroupByName("ml").ID)
	crs := e.ComputeResourcesOfPolicy(ml.ID)
	owner, _ := kernel.Caller(rita)
	// ml holds 1 + 2 GPUs (one placed, one running) and has one waiting.
	for i, st := range []model.TaskStatus{model.TaskPlaced, model.TaskRunning, model.TaskQueued} {
		cr := crs[i%2]
		size, _ := model.ParseSize([]string{"1", "2", "1"}[i])
		task := &model.Task{ID: model.NewID(), TenantID: "t1", ProjectID: e.ProjectByName("ml-proj").ID, OwnerID: owner.UserID,
			ComputeResourceID: cr.ID, PolicyID: ml.ID, ProfileID: cr.ProfileID, GroupID: ml.GroupID, Name: "t",
			Spec: model.TaskSpec{Command: []string{"x"}}, Size: size, Status: st, CreatedAt: time.Now(), UpdatedAt: time.Now()}
		if err := w.st.CreateTask(context.Background(), task); err != nil {
			t.Fatal(err)
		}
	}
	views, err := w.alloc.PolicyViews(rita, "")
	if err != nil || len(views) != 1 || views[0].Group.Name != "ml" {
		t.Fatalf("a member sees their group's policy only: %v, %v", views, err)
	}
	v := views[0]
	if v.Held != model.GPUs(3) || v.Borrowed != model.GPUs(1) || v.Holding != 2 || v.Waiting != 1 {
		t.Errorf("held %s, borrowed %s, holding %d, waiting %d; want 3, 1 above the reservation of 2, 2, 1", v.Held, v.Borrowed, v.Holding, v.Waiting)
	}
	if v.Budget == nil || v.Budget.Period != model.PeriodWeek || v.Budget.Total != 100_000_000 {
		t.Errorf("the weekly budget of 100 hours: %+v", v.Budget)
	}
	all, err := w.alloc.PolicyViews(w.admin, "")
	if err != nil || len(all) != 2 || all[0].Group.Name != "ml" || all[1].Group.Name != "vision" || all[1].Held != 0 {
		t.Errorf("an admin sees every group's, by name: %v, %v", all, err)
	}
	if _, err := w.alloc.PolicyViews(rita, "vision"); kernel.ErrorCode(err) != kernel.CodeNotFound {
		t.Errorf("a member asking for another group's policy: %v", err)
	}
	if over, err := w.alloc.OverBudget(rita, crs[0]); err != nil || over {
		t.Errorf("nothing charged yet, yet over budget: %v, %v", over, err)
	}
}

// Pausing the engine is recorded once and says who paused it.
func TestEngineSwitch(t *testing.T) {
	w := newWorld(t)
	st, err := w.alloc.EngineStatus(w.admin)
	if err != nil || !st.Enabled {
		t.Fatalf("a new tenant's engine: %+v, %v", st, err)
	}
	if st, err = w.alloc.SetEngineEnabled(w.admin, false); err != nil || st.Enabled || st.By != "admin" {
		t.Fatalf("disable: %+v, %v", st, err)
	}
	if st, err = w.alloc.SetEngineEnabled(w.admin, false); err != nil || st.Enabled {
		t.Fatalf("disable again: %+v, %v", st, err)
	}
	if n := w.audits(t, "engine.disabled"); n != 1 {
		t.Errorf("%d disable entries for a disable and its repeat; want 1", n)
	}
	if st, err = w.alloc.SetEngineEnabled(w.admin, true); err != nil || !st.Enabled || st.By != "" {
		t.Errorf("enable: %+v, %v", st, err)
	}
	if st, _ = w.alloc.EngineStatus(w.admin); !st.Enabled || st.Since.IsZero() {
		t.Errorf("after enabling: %+v", st)
	}
}
