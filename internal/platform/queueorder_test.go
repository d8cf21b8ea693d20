package platform_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/klique-ai/klique/engine/loop"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
)

// queueEstate is one GPU shared by team's two compute resources, so that
// one running task fills the pool and the rest wait.
const queueEstate = `apiVersion: klique/v1
kind: Estate
gpuClasses:
  - {name: h100, memoryGb: 80, pricePerGpuHour: 2}
pools:
  - {name: p1, kind: kubernetes, capacity: 1, gpuClass: h100}
profiles:
  - {name: one-gpu, size: 1, pools: [p1]}
  - {name: half-gpu, size: 0.5, pools: [p1]}
groups:
  - {name: team}
  - {name: rival}
policies:
  - group: team
    reservation: 0
    limit: 1
    computeResources: [{name: 1 GPU, profile: one-gpu}, {name: half GPU, profile: half-gpu}]
  - group: rival
    reservation: 0
    limit: 1
    computeResources: [{name: 1 GPU, profile: one-gpu}]
projects:
  - {name: alpha, group: team}
  - {name: beta, group: team}
  - {name: open}
  - {name: theirs, group: rival}
`

// queueCast is who acts on team's queue.
type queueCast struct {
	lead, member, viewerLead, rivalLead context.Context
}

func setupQueue(t *testing.T, b *testBundle) queueCast {
	t.Helper()
	b.Apply(t, []byte(queueEstate))
	return queueCast{
		lead:       b.User(t, "lena", model.RoleMember, "lead:team"),
		member:     b.User(t, "mo", model.RoleMember, "team"),
		viewerLead: b.User(t, "val", model.RoleViewer, "lead:team"),
		rivalLead:  b.User(t, "rex", model.RoleMember, "lead:rival"),
	}
}

// submit enqueues a task named name of project on team's compute resource cr.
func submit(t *testing.T, b *testBundle, as context.Context, name, project, cr string) *model.Task {
	t.Helper()
	task, err := b.Svc.EnqueueTask(as, platform.EnqueueInput{Name: name, Project: project, ComputeResource: cr, Group: "team",
		Spec: model.TaskSpec{Command: []string{"python", "train.py"}}})
	if err != nil {
		t.Fatalf("enqueue %s: %v", name, err)
	}
	return task
}

// queueOf is the names of the tasks waiting in a compute resource, in the
// order their positions (the GraphQL Task.position) give.
func queueOf(t *testing.T, b *testBundle, tasks ...*model.Task) []string {
	t.Helper()
	out := make([]string, len(tasks))
	for _, task := range tasks {
		cur, err := b.Svc.Task(b.Admin, task.ID)
		platformtest.Must(t, err)
		pos, err := b.Svc.TaskPosition(b.Admin, cur)
		platformtest.Must(t, err)
		if pos < 1 || pos > len(tasks) {
			t.Fatalf("task %s is at position %d of %d", task.Name, pos, len(tasks))
		}
		if out[pos-1] != "" {
			t.Fatalf("tasks %s and %s share position %d", out[pos-1], task.Name, pos)
		}
		out[pos-1] = task.Name
	}
	return out
}

func wantQueue(t *testing.T, b *testBundle, want []string, tasks ...*model.Task) {
	t.Helper()
	if got := queueOf(t, b, tasks...); !slices.Equal(got, want) {
		t.Fatalf("queue %v, want %v", got, want)
	}
}

func lastAudit(t *testing.T, b *testBundle) *model.AuditEntry {
	t.Helper()
	log := b.AuditLog(t)
	if len(log) == 0 {
		t.Fatal("no audit entries")
	}
	return log[0]
}

func TestProjectPriority(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		c := setupQueue(t, b)
		a1 := submit(t, b, c.member, "a1", "alpha", "1 GPU")
		o1 := submit(t, b, c.member, "o1", "open", "1 GPU")
		b1 := submit(t, b, c.member, "b1", "beta", "1 GPU")
		wantQueue(t, b, []string{"a1", "o1", "b1"}, a1, o1, b1)

		t.Log("the lead puts beta first, then alpha: the open project's task, not listed, waits behind both")
		got, err := b.Svc.SetProjectPriorities(c.lead, "team", []string{"beta", "alpha"})
		platformtest.Must(t, err)
		if names := projectNamesOf(got.Projects); !slices.Equal(names, []string{"beta", "alpha"}) {
			t.Fatalf("priority %v", names)
		}
		wantQueue(t, b, []string{"b1", "a1", "o1"}, a1, o1, b1)
		e := lastAudit(t, b)
		if e.Action != "group.project_priority_set" || e.ObjectName != "team" || e.ActorName != "lena" ||
			e.Detail != "project priority of group team: beta, alpha (was: none)" {
			t.Fatalf("audit entry %+v", e)
		}

		t.Log("a task enqueued later goes behind its own project's tasks and ahead of lower projects'")
		b2 := submit(t, b, c.member, "b2", "beta", "1 GPU")
		wantQueue(t, b, []string{"b1", "b2", "a1", "o1"}, a1, o1, b1, b2)

		t.Log("members read the priority; an admin may set it too, and an empty list clears it")
		read, err := b.Svc.ProjectPriorities(c.member, "team")
		platformtest.Must(t, err)
		if names := projectNamesOf(read.Projects); !slices.Equal(names, []string{"beta", "alpha"}) {
			t.Fatalf("read priority %v", names)
		}
		_, err = b.Svc.SetProjectPriorities(b.Admin, "team", []string{"open"})
		platformtest.Must(t, err)
		wantQueue(t, b, []string{"o1", "a1", "b1", "b2"}, a1, o1, b1, b2)
		_, err = b.Svc.SetProjectPriorities(c.lead, "team", nil)
		platformtest.Must(t, err)
		wantQueue(t, b, []string{"a1", "o1", "b1", "b2"}, a1, o1, b1, b2)
		if e := lastAudit(t, b); e.Detail != "project priority of group team: none (was: open)" {
			t.Fatalf("audit detail %q", e.Detail)
		}
	})
}

func projectNamesOf(ps []*model.Project) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

func TestProjectPriorityRefusals(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		c := setupQueue(t, b)
		a1 := submit(t, b, c.member, "a1", "alpha", "1 GPU")
		b1 := submit(t, b, c.member, "b1", "beta", "1 GPU")
		_, err := b.Svc.SetProjectPriorities(c.lead, "team", []string{"alpha", "beta"})
		platformtest.Must(t, err)
		nt, err := b.Svc.CreateTenant(b.Admin, "acme", "Acme", "root")
		platformtest.Must(t, err)
		acme := b.SignIn(t, nt.Secret)

		for _, c := range []struct {
			name    string
			as      context.Context
			group   string
			list    []string
			code    platform.Code
			message string
		}{
			{"a member", c.member, "team", []string{"beta"}, platform.CodeForbidden, "only a lead of group team or an admin can set its project priority"},
			{"a viewer who leads", c.viewerLead, "team", []string{"beta"}, platform.CodeForbidden, "a viewer cannot set project priorities"},
			{"another group's lead", c.rivalLead, "team", []string{"beta"}, platform.CodeNotFound, "no group 'team'"},
			{"another tenant's admin", acme, "team", []string{"beta"}, platform.CodeNotFound, "no group 'team'"},
			{"another group's project", c.lead, "team", []string{"beta", "theirs"}, platform.CodeNotFound, "no project 'theirs'"},
			{"another group's project, to an admin", b.Admin, "team", []string{"theirs"}, platform.CodeInvalid, "project theirs belongs to group rival"},
			{"a project listed twice", c.lead, "team", []string{"beta", "alpha", "beta"}, platform.CodeInvalid, "project beta is listed twice"},
			{"an unknown project", c.lead, "team", []string{"nope"}, platform.CodeNotFound, "no project 'nope'"},
		} {
			before := b.snapshot(t)
			_, err := b.Svc.SetProjectPriorities(c.as, c.group, c.list)
			platformtest.WantError(t, err, c.code, c.message)
			b.unchanged(t, before)
			wantQueue(t, b, []string{"a1", "b1"}, a1, b1)
			read, err := b.Svc.ProjectPriorities(b.Admin, "team")
			platformtest.Must(t, err)
			if names := projectNamesOf(read.Projects); !slices.Equal(names, []string{"alpha", "beta"}) {
				t.Fatalf("%s: the refusal changed the priority to %v", c.name, names)
			}
		}
	})
}

func TestMoveQueuedTask(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		c := setupQueue(t, b)
		var tasks []*model.Task
		for _, n := range []string{"t1", "t2", "t3", "t4", "t5"} {
			tasks = append(tasks, submit(t, b, c.member, n, "alpha", "1 GPU"))
		}
		move := func(as context.Context, m platform.QueueMove) *platform.MovedTask {
			t.Helper()
			got, err := b.Svc.MoveQueuedTask(as, m)
			if err != nil {
				t.Fatalf("move %+v: %v", m, err)
			}
			return got
		}

		got := move(c.lead, platform.QueueMove{Task: tasks[3].ID, Before: tasks[1].ID})
		wantQueue(t, b, []string{"t1", "t4", "t2", "t3", "t5"}, tasks...)
		if got.From != 4 || got.To != 2 || got.Task.ID != tasks[3].ID {
			t.Fatalf("moved from %d to %d", got.From, got.To)
		}
		e := lastAudit(t, b)
		if e.Action != "task.moved" || e.ObjectID != tasks[3].ID || e.ActorName != "lena" ||
			e.Detail != "moved ahead of task t2 in compute resource 1 GPU: from position 4 to 2" {
			t.Fatalf("audit entry %+v", e)
		}

		move(b.Admin, platform.QueueMove{Task: tasks[0].ID, ToBack: true})
		wantQueue(t, b, []string{"t4", "t2", "t3", "t5", "t1"}, tasks...)
		move(c.lead, platform.QueueMove{Task: tasks[4].ID, ToFront: true})
		wantQueue(t, b, []string{"t5", "t4", "t2", "t3", "t1"}, tasks...)
		move(c.lead, platform.QueueMove{Task: tasks[1].ID, After: tasks[0].ID})
		wantQueue(t, b, []string{"t5", "t4", "t3", "t1", "t2"}, tasks...)

		t.Log("moving back and forth between neighbours uses up the room between them, and the queue makes more")
		for i := 0; i < 70; i++ {
			move(c.lead, platform.QueueMove{Task: tasks[2].ID, Before: tasks[3].ID})
			move(c.lead, platform.QueueMove{Task: tasks[3].ID, Before: tasks[2].ID})
		}
		wantQueue(t, b, []string{"t5", "t4", "t3", "t1", "t2"}, tasks...)
		for i := 0; i < 70; i++ {
			move(c.lead, platform.QueueMove{Task: tasks[0].ID, After: tasks[1].ID})
			move(c.lead, platform.QueueMove{Task: tasks[1].ID, After: tasks[0].ID})
		}
		wantQueue(t, b, []string{"t5", "t4", "t3", "t1", "t2"}, tasks...)

		t.Log("a move across projects puts the task among the higher project's tasks")
		_, err := b.Svc.SetProjectPriorities(c.lead, "team", []string{"beta", "alpha"})
		platformtest.Must(t, err)
		b1 := submit(t, b, c.member, "b1", "beta", "1 GPU")
		all := append(slices.Clone(tasks), b1)
		wantQueue(t, b, []string{"b1", "t5", "t4", "t3", "t1", "t2"}, all...)
		move(c.lead, platform.QueueMove{Task: tasks[1].ID, Before: b1.ID})
		wantQueue(t, b, []string{"t2", "b1", "t5", "t4", "t3", "t1"}, all...)
	})
}

func TestMoveQueuedTaskRefusals(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		c := setupQueue(t, b)
		running := submit(t, b, c.member, "run", "alpha", "1 GPU")
		eng := &loop.Loop{State: platform.EngineState{Store: b.Store}, Planner: b.Svc, Holder: "test"}
		if _, err := eng.PassAll(context.Background()); err != nil {
			t.Fatal(err)
		}
		if cur, err := b.Svc.Task(b.Admin, running.ID); err != nil || cur.Status != model.TaskPlaced {
			t.Fatalf("the first task is not placed: %+v %v", cur, err)
		}
		t1 := submit(t, b, c.member, "t1", "alpha", "1 GPU")
		t2 := submit(t, b, c.member, "t2", "alpha", "1 GPU")
		half := submit(t, b, c.member, "h1", "alpha", "half GPU")
		rival, err := b.Svc.EnqueueTask(c.rivalLead, platform.EnqueueInput{Name: "r1", Project: "theirs", ComputeResource: "1 GPU", Group: "rival",
			Spec: model.TaskSpec{Command: []string{"python", "train.py"}}})
		platformtest.Must(t, err)
		nt, err := b.Svc.CreateTenant(b.Admin, "acme", "Acme", "root")
		platformtest.Must(t, err)
		acme := b.SignIn(t, nt.Secret)
		bea := b.User(t, "bea", model.RoleMember, "lead:team", "rival") // sees rival's queue, leads team's

		for _, c := range []struct {
			name    string
			as      context.Context
			move    platform.QueueMove
			code    platform.Code
			message string
		}{
			{"a member", c.member, platform.QueueMove{Task: t2.ID, Before: t1.ID}, platform.CodeForbidden, "only a lead of the task's group or an admin can reorder its queue"},
			{"a viewer who leads", c.viewerLead, platform.QueueMove{Task: t2.ID, Before: t1.ID}, platform.CodeForbidden, "a viewer cannot reorder queues"},
			{"another group's lead", c.rivalLead, platform.QueueMove{Task: t2.ID, Before: t1.ID}, platform.CodeNotFound, "no task"},
			{"another tenant's admin", acme, platform.QueueMove{Task: t2.ID, ToFront: true}, platform.CodeNotFound, "no task"},
			{"a task that is not waiting", c.lead, platform.QueueMove{Task: running.ID, After: t2.ID}, platform.CodeInvalid, "task 'run' is placed, not waiting"},
			{"next to a task that is not waiting", c.lead, platform.QueueMove{Task: t2.ID, Before: running.ID}, platform.CodeInvalid, "move it next to a waiting task"},
			{"next to a task of another compute resource", c.lead, platform.QueueMove{Task: t2.ID, Before: half.ID}, platform.CodeInvalid, "a task moves only within its own queue"},
			{"next to another team's task", c.lead, platform.QueueMove{Task: t2.ID, Before: rival.ID}, platform.CodeNotFound, "no task"},
			{"next to another team's task, seen by the lead", bea, platform.QueueMove{Task: t2.ID, After: rival.ID}, platform.CodeInvalid, "a task moves only within its own queue"},
			{"another team's task, seen by the lead", bea, platform.QueueMove{Task: rival.ID, ToFront: true}, platform.CodeForbidden, "only a lead of the task's group or an admin"},
			{"next to another team's task, as an admin", b.Admin, platform.QueueMove{Task: t2.ID, Before: rival.ID}, platform.CodeInvalid, "a task moves only within its own queue"},
			{"next to itself", c.lead, platform.QueueMove{Task: t2.ID, Before: t2.ID}, platform.CodeInvalid, "cannot move next to itself"},
			{"nowhere", c.lead, platform.QueueMove{Task: t2.ID}, platform.CodeInvalid, "say where the task goes"},
			{"two places", c.lead, platform.QueueMove{Task: t2.ID, Before: t1.ID, ToBack: true}, platform.CodeInvalid, "exactly one of them"},
		} {
			before := b.snapshot(t)
			_, err := b.Svc.MoveQueuedTask(c.as, c.move)
			platformtest.WantError(t, err, c.code, c.message)
			b.unchanged(t, before)
			wantQueue(t, b, []string{"t1", "t2"}, t1, t2)
		}
	})
}

// TestLeadRaisesProjectPriority is seed 003's story: "a lead raises a
// project's priority, and its tasks move ahead". The pool is full; the
// team's tasks wait in enqueue order, alpha's first. The lead puts beta
// first. When the running task ends, the next pass places beta's task, not
// alpha's, though alpha's was enqueued first.
func TestLeadRaisesProjectPriority(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		c := setupQueue(t, b)
		eng := &loop.Loop{State: platform.EngineState{Store: b.Store}, Planner: b.Svc, Holder: "test"}
		pass := func() {
			t.Helper()
			if _, err := eng.PassAll(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		first := submit(t, b, c.member, "first", "alpha", "1 GPU")
		pass()
		a1 := submit(t, b, c.member, "a1", "alpha", "1 GPU")
		a2 := submit(t, b, c.member, "a2", "alpha", "1 GPU")
		b1 := submit(t, b, c.member, "b1", "beta", "1 GPU")
		pass()
		status := func(task *model.Task) model.TaskStatus {
			t.Helper()
			cur, err := b.Svc.Task(b.Admin, task.ID)
			platformtest.Must(t, err)
			return cur.Status
		}
		if status(first) != model.TaskPlaced || status(a1) != model.TaskQueued || status(b1) != model.TaskQueued {
			t.Fatalf("with the pool full: first %s, a1 %s, b1 %s", status(first), status(a1), status(b1))
		}
		wantQueue(t, b, []string{"a1", "a2", "b1"}, a1, a2, b1)

		_, err := b.Svc.SetProjectPriorities(c.lead, "team", []string{"beta", "alpha"})
		platformtest.Must(t, err)
		wantQueue(t, b, []string{"b1", "a1", "a2"}, a1, a2, b1)
		pass()
		if status(b1) != model.TaskQueued {
			t.Fatalf("b1 is %s while the pool is full", status(b1))
		}

		_, err = b.Svc.AbortTask(c.member, first.ID, "done with it")
		platformtest.Must(t, err)
		pass()
		if status(b1) != model.TaskPlaced || status(a1) != model.TaskQueued || status(a2) != model.TaskQueued {
			t.Fatalf("after the GPU was freed: b1 %s, a1 %s, a2 %s; want beta's task placed first", status(b1), status(a1), status(a2))
		}
		wantQueue(t, b, []string{"a1", "a2"}, a1, a2)
	})
}

// TestTheLiveQueueFollowsAMove: a queue subscription lists the waiting
// tasks in the order a move made, at the move.
func TestTheLiveQueueFollowsAMove(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		c := setupQueue(t, b)
		t1 := submit(t, b, c.member, "t1", "alpha", "1 GPU")
		t2 := submit(t, b, c.member, "t2", "alpha", "1 GPU")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		sub, release, err := b.Svc.OpenSubscriptions(ctx, b.AdminSecret)
		platformtest.Must(t, err)
		defer release()
		ch, err := b.Svc.SubscribeQueue(sub, t1.ComputeResourceID)
		platformtest.Must(t, err)
		waiting := func(u *platform.QueueUpdate) []string {
			var out []string
			for _, w := range u.Waiting {
				out = append(out, w.Task.Name)
			}
			return out
		}
		if got := waiting(<-ch); !slices.Equal(got, []string{"t1", "t2"}) {
			t.Fatalf("snapshot %v", got)
		}
		_, err = b.Svc.MoveQueuedTask(c.lead, platform.QueueMove{Task: t2.ID, ToFront: true})
		platformtest.Must(t, err)
		timeout := time.After(10 * time.Second) // a guard, not a timing
		for {
			select {
			case u := <-ch:
				if got := waiting(u); slices.Equal(got, []string{"t2", "t1"}) {
					return
				}
			case <-timeout:
				t.Fatal("no queue update after the move")
			}
		}
	}, platformtest.WithEvents())
}
