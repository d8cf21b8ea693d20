package apps_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/apps"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/platform/kernel/kerneltest"
	"github.com/klique-ai/klique/internal/store"
)

// world is the apps domain alone, on a kernel over a fresh SQLite store,
// with a stand-in for the tasks domain: its enqueue resolves the compute
// resource by name, runs the launch's prepare in its transaction and
// writes the task; its stops and expiries are recorded.
type world struct {
	k       *kernel.Kernel
	st      store.Store
	apps    *apps.Apps
	e       *estate.Estate
	admin   context.Context
	now     time.Time
	stopped []string
	expired []string
}

const testEstate = `apiVersion: klique/v1
kind: Estate
gpuClasses:
  - {name: h100, memoryGb: 80}
pools:
  - {name: k8s, kind: kubernetes, capacity: 8, gpuClass: h100}
profiles:
  - {name: one-gpu, size: 1, pools: [k8s]}
groups:
  - {name: ml}
policies:
  - group: ml
    limit: 8
    computeResources:
      - {name: 1 GPU, profile: one-gpu}
projects:
  - {name: ml-proj, group: ml}
`

var start = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func newWorld(t *testing.T) *world {
	t.Helper()
	st := kerneltest.Store(t)
	w := &world{st: st, now: start}
	w.k = kernel.New(kernel.Options{Store: st, Now: func() time.Time { return w.now }})
	w.apps = apps.New(w.k, apps.Deps{Enqueue: w.enqueue, Stop: func(ctx context.Context, id string) (*model.Task, error) {
		w.stopped = append(w.stopped, id)
		return w.st.GetTask(ctx, "t1", id)
	}, Expire: func(ctx context.Context, tenantID, id string, attempt int, actor, reason string) (*model.Task, error) {
		w.expired = append(w.expired, strings.Join([]string{tenantID, id, actor, reason}, "|"))
		return w.st.GetTask(ctx, tenantID, id)
	}})
	w.admin = w.as(t, "admin", model.RoleTenantAdmin)
	res, err := kerneltest.ApplyEstate(w.admin, w.k, testEstate, false)
	if err != nil {
		t.Fatalf("apply the test estate: %v", err)
	}
	w.e = res.Estate
	return w
}

// enqueue stands in for the tasks domain's EnqueueApplication.
func (w *world) enqueue(ctx context.Context, name, project, cr, group, id string, prepare apps.Prepare, _ any) (*model.Task, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	var task *model.Task
	err = w.k.Write(ctx, p, func(tx *kernel.Txn) error {
		// The estate as it is now: the launch rules may have changed.
		e, err := w.k.CurrentEstate(ctx, tx.Q, "t1")
		if err != nil {
			return err
		}
		var c *model.ComputeResource
		for _, x := range e.ComputeResources {
			if x.Name == cr {
				c = x
			}
		}
		pol, pr := e.Policy(c.PolicyID), e.Profile(c.ProfileID)
		spec, err := prepare(tx, e, c, pr.Size)
		if err != nil {
			return err
		}
		task = &model.Task{ID: id, TenantID: "t1", ProjectID: e.ProjectByName(project).ID, OwnerID: p.UserID,
			ComputeResourceID: c.ID, PolicyID: pol.ID, ProfileID: pr.ID, GroupID: pol.GroupID, Name: name, Spec: spec,
			Size: pr.Size, Status: model.TaskQueued, CreatedAt: tx.Now, UpdatedAt: tx.Now}
		if err := tx.Q.CreateTask(ctx, task); err != nil {
			return err
		}
		tx.Record("task.enqueued", "task", id, name, pol.GroupID, "launched")
		return nil
	})
	return task, err
}

func (w *world) as(t *testing.T, name string, role model.Role, groups ...identity.GroupGrant) context.Context {
	t.Helper()
	u := &model.User{ID: model.NewID(), TenantID: "t1", Name: name, Role: role}
	if err := w.st.CreateUser(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	return identity.WithPrincipal(context.Background(), &identity.Principal{TenantID: "t1", UserID: u.ID, UserName: name, Role: role, Groups: groups})
}

func (w *world) grant(role model.GroupRole) identity.GroupGrant {
	return identity.GroupGrant{GroupID: w.e.GroupByName("ml").ID, GroupName: "ml", Role: role}
}

func (w *world) launch(ctx context.Context, in apps.LaunchInput) (*model.AppInstance, error) {
	in.ComputeResource, in.Project = "1 GPU", "ml-proj"
	return w.apps.LaunchApp(ctx, in)
}

func wantError(t *testing.T, what string, err error, code kernel.Code, words ...string) {
	t.Helper()
	if kernel.ErrorCode(err) != code {
		t.Errorf("%s: %v (code %s), want %s", what, err, kernel.ErrorCode(err), code)
		return
	}
	for _, wd := range words {
		if !strings.Contains(err.Error(), wd) {
			t.Errorf("%s: %q does not say %q", what, err, wd)
		}
	}
}

// The rules a launch is checked against before it becomes a task.
func TestLaunchRules(t *testing.T) {
	w := newWorld(t)
	rita := w.as(t, "rita", model.RoleMember, w.grant(model.GroupRoleMember))
	viewer := w.as(t, "val", model.RoleViewer, w.grant(model.GroupRoleMember))
	_, err := w.launch(viewer, apps.LaunchInput{App: "jupyterlab"})
	wantError(t, "a viewer", err, kernel.CodeForbidden, "a viewer cannot launch apps")
	_, err = w.launch(rita, apps.LaunchInput{App: "nope"})
	wantError(t, "an unknown app", err, kernel.CodeNotFound, "no app 'nope' in the catalogue")
	_, err = w.launch(rita, apps.LaunchInput{App: "vllm"})
	wantError(t, "a form without its required value", err, kernel.CodeInvalid, "launch form of app 'vllm'", "model")
	_, err = w.launch(rita, apps.LaunchInput{App: "jupyterlab", IdleMinutes: ptr(90)})
	wantError(t, "a longer idle limit", err, kernel.CodeInvalid, "allows at most 60")
	_, err = w.launch(rita, apps.LaunchInput{App: "jupyterlab", Route: "chat"})
	wantError(t, "a route for a session app", err, kernel.CodeInvalid, "only a serving app's instances can serve route 'chat'")
	_, err = w.launch(rita, apps.LaunchInput{App: "vllm", Route: "chat", Values: map[string]any{"model": "m"}})
	wantError(t, "an unknown route", err, kernel.CodeInvalid, "no static route 'chat'")

	if _, err := w.apps.SetAppLocked(w.admin, "jupyterlab", true); err != nil {
		t.Fatal(err)
	}
	_, err = w.launch(rita, apps.LaunchInput{App: "jupyterlab"})
	wantError(t, "a locked app", err, kernel.CodeForbidden, "app 'jupyterlab' is locked by an admin")
	if _, err := w.apps.SetAppLocked(w.admin, "jupyterlab", false); err != nil {
		t.Fatal(err)
	}
	if _, err := w.apps.SetAppLaunches(w.admin, false); err != nil {
		t.Fatal(err)
	}
	_, err = w.launch(rita, apps.LaunchInput{App: "jupyterlab"})
	wantError(t, "launches switched off", err, kernel.CodeForbidden, "switched off for the whole company")
	if _, err := w.apps.SetAppLaunches(w.admin, true); err != nil {
		t.Fatal(err)
	}
	if len(w.stopped)+len(w.expired) != 0 {
		t.Fatal("a refused launch stopped something")
	}

	in, err := w.launch(rita, apps.LaunchInput{App: "jupyterlab", IdleMinutes: ptr(30)})
	if err != nil {
		t.Fatal(err)
	}
	if in.Task.Name != "jupyterlab-rita-1" || in.State != "waiting" || in.Task.Spec.App.IdleMinutes != 30 || in.Task.Spec.App.MaxLifetimeMinutes != 720 {
		t.Errorf("the instance: name %q, state %q, app %+v", in.Task.Name, in.State, in.Task.Spec.App)
	}
	if in, err := w.launch(rita, apps.LaunchInput{App: "jupyterlab"}); err != nil || in.Task.Name != "jupyterlab-rita-2" {
		t.Errorf("the second instance's name: %v, %v", in, err)
	}
}

// The running-apps quota counts the instances that have not ended.
func TestRunningAppsQuota(t *testing.T) {
	w := newWorld(t)
	rita := w.as(t, "rita", model.RoleMember, w.grant(model.GroupRoleMember))
	if _, err := w.apps.SetAppQuota(w.admin, "", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := w.apps.SetAppQuota(w.admin, "nosuch", 1); kernel.ErrorCode(err) != kernel.CodeNotFound {
		t.Errorf("a quota of an unknown group: %v", err)
	}
	first, err := w.launch(rita, apps.LaunchInput{App: "jupyterlab"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.launch(rita, apps.LaunchInput{App: "jupyterlab"})
	wantError(t, "past the quota", err, kernel.CodeConflict, "quota of 1 running apps is reached; stop one of yours: jupyterlab-rita-1")
	first.Task.Status = model.TaskAborted
	if err := w.st.UpdateTask(context.Background(), first.Task); err != nil {
		t.Fatal(err)
	}
	if _, err := w.launch(rita, apps.LaunchInput{App: "jupyterlab"}); err != nil {
		t.Errorf("a stopped instance still counts against the quota: %v", err)
	}
	st, err := w.apps.AppSettings(w.admin)
	if err != nil || st.Running != 1 {
		t.Errorf("settings %+v, %v", st, err)
	}
	if _, err := w.apps.AppSettings(rita); kernel.ErrorCode(err) != kernel.CodeForbidden {
		t.Errorf("a member reads the launch rules: %v", err)
	}
}

// A built-in cannot be deleted, only locked.
func TestCatalogueRules(t *testing.T) {
	w := newWorld(t)
	_, err := w.apps.DeleteApp(w.admin, "jupyterlab")
	wantError(t, "deleting a built-in", err, kernel.CodeInvalid, "built in and cannot be deleted; lock it instead")
	_, err = w.apps.DeleteApp(w.admin, "nope")
	wantError(t, "deleting an unknown app", err, kernel.CodeNotFound)
	_, err = w.apps.SetAppLocked(w.admin, "nope", true)
	wantError(t, "locking an unknown app", err, kernel.CodeNotFound)
	if _, err := w.apps.SetAppLocked(w.admin, "ssh", true); err != nil {
		t.Fatal(err)
	}
	a, err := w.apps.App(w.admin, "ssh")
	if err != nil || !a.Locked {
		t.Errorf("a locked built-in: %+v, %v", a, err)
	}
	if _, err := w.apps.DeleteApp(w.admin, "ssh"); err != nil {
		t.Fatalf("deleting the override: %v", err)
	}
	if a, _ := w.apps.App(w.admin, "ssh"); a == nil || a.Locked {
		t.Errorf("deleting the override brings the built-in back: %+v", a)
	}
}

// Who sees and stops an instance, and its state as it runs.
func TestInstanceVisibilityAndState(t *testing.T) {
	w := newWorld(t)
	rita := w.as(t, "rita", model.RoleMember, w.grant(model.GroupRoleMember))
	mo := w.as(t, "mo", model.RoleMember, w.grant(model.GroupRoleMember))
	lena := w.as(t, "lena", model.RoleMember, w.grant(model.GroupRoleLead))
	in, err := w.launch(rita, apps.LaunchInput{App: "jupyterlab"})
	if err != nil {
		t.Fatal(err)
	}
	if list, err := w.apps.AppInstances(mo, apps.InstanceFilter{}); err != nil || len(list) != 0 {
		t.Errorf("another member lists an unshared instance: %v, %v", list, err)
	}
	_, err = w.apps.StopApp(mo, in.Task.ID)
	wantError(t, "another member stops it", err, kernel.CodeNotFound, "no app instance")
	_, err = w.apps.StopApp(lena, in.Task.ID)
	wantError(t, "the lead, who cannot see it", err, kernel.CodeNotFound)
	task := in.Task
	task.Status, task.Run = model.TaskRunning, model.TaskRun{Attempt: 1, StartedAt: &start}
	if err := w.st.UpdateTask(context.Background(), task); err != nil {
		t.Fatal(err)
	}
	w.now = start.Add(10 * time.Minute)
	got, err := w.apps.AppInstance(rita, task.ID)
	if err != nil || got.State != "running" || got.Runtime.Uptime != 10*time.Minute || got.Idle.StopsAt == nil || !got.Idle.StopsAt.Equal(start.Add(time.Hour)) {
		t.Errorf("a running instance: %+v, %v", got, err)
	}
	if _, err := w.apps.StopApp(rita, task.ID); err != nil || len(w.stopped) != 1 || w.stopped[0] != task.ID {
		t.Errorf("the owner stops it through the tasks domain: %v, %v", err, w.stopped)
	}
}

// The sweep warns once before the idle limit, clears the warning after a
// use, and stops the instance once its limit has passed.
func TestSweepIdle(t *testing.T) {
	w := newWorld(t)
	rita := w.as(t, "rita", model.RoleMember, w.grant(model.GroupRoleMember))
	in, err := w.launch(rita, apps.LaunchInput{App: "jupyterlab"})
	if err != nil {
		t.Fatal(err)
	}
	task := in.Task
	task.Status, task.Run = model.TaskRunning, model.TaskRun{Attempt: 1, StartedAt: &start}
	if err := w.st.UpdateTask(context.Background(), task); err != nil {
		t.Fatal(err)
	}
	sweep := func(at time.Duration, want apps.SweepResult) {
		t.Helper()
		w.now = start.Add(at)
		got, err := w.apps.SweepIdle(context.Background())
		if err != nil || got != want {
			t.Errorf("sweep at +%s: %+v, %v; want %+v", at, got, err, want)
		}
	}
	sweep(45*time.Minute, apps.SweepResult{})
	sweep(55*time.Minute, apps.SweepResult{Warned: 1})
	sweep(56*time.Minute, apps.SweepResult{})
	if err := w.apps.NoteAppActivity(context.Background(), task.ID, start.Add(56*time.Minute)); err != nil {
		t.Fatal(err)
	}
	sweep(57*time.Minute, apps.SweepResult{Cleared: 1})
	if len(w.expired) != 0 {
		t.Fatalf("stopped before its limit: %v", w.expired)
	}
	sweep(117*time.Minute, apps.SweepResult{Stopped: 1})
	if len(w.expired) != 1 || !strings.HasPrefix(w.expired[0], "t1|"+task.ID+"|idle limits|stopped: idle for 1 hour") {
		t.Errorf("the stop: %v", w.expired)
	}
}

func ptr[T any](v T) *T { return &v }
