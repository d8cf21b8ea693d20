package platform_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
)

// headsEstate is seed 003's department: research holds 64 A100 GPUs
// (reserved and its limit) for its three teams, inside company, which
// also holds infra, outside research.
const headsEstate = `apiVersion: klique/v1
kind: Estate
gpuClasses:
  - {name: a100, memoryGb: 80, pricePerGpuHour: 2}
pools:
  - {name: p1, kind: kubernetes, capacity: 128, gpuClass: a100}
profiles:
  - {name: one-gpu, size: 1, pools: [p1]}
departments:
  - name: company
  - name: research
    parent: company
groups:
  - {name: vision, department: research}
  - {name: nlp, department: research}
  - {name: speech, department: research}
  - {name: infra, department: company}
policies:
  - department: company
    reservation: 100
    limit: 128
  - department: research
    reservation: 64
    limit: 64
  - group: vision
    reservation: 0
    limit: 8
    computeResources: [{name: 1 GPU, profile: one-gpu}]
  - group: nlp
    reservation: 0
    limit: 8
    computeResources: [{name: 1 GPU, profile: one-gpu}]
  - group: speech
    reservation: 0
    limit: 8
  - group: infra
    reservation: 0
    limit: 8
    computeResources: [{name: 1 GPU, profile: one-gpu}]
projects:
  - {name: vis-train, group: vision}
  - {name: nlp-train, group: nlp}
  - {name: nlp-eval, group: nlp}
  - {name: infra-jobs, group: infra}
`

// headsCast: hana heads research and is a member of vision only; nia is
// a member of nlp, ivo of infra, vera a viewer who heads research, and
// vlad vision's lead.
type headsCast struct {
	head, nlpMember, infraMember, viewerHead, visionLead context.Context
}

func setupHeads(t *testing.T, b *testBundle) headsCast {
	t.Helper()
	b.Apply(t, []byte(headsEstate))
	return headsCast{
		head:        b.User(t, "hana", model.RoleMember, "lead:research", "vision"),
		nlpMember:   b.User(t, "nia", model.RoleMember, "nlp"),
		infraMember: b.User(t, "ivo", model.RoleMember, "infra"),
		viewerHead:  b.User(t, "vera", model.RoleViewer, "lead:research"),
		visionLead:  b.User(t, "vlad", model.RoleMember, "lead:vision"),
	}
}

// reservations reads the named groups' reservations and limits, as the
// admin.
func reservations(t *testing.T, b *testBundle, groups ...string) map[string][2]int {
	t.Helper()
	e, err := b.Svc.Estate(b.Admin)
	platformtest.Must(t, err)
	out := map[string][2]int{}
	for _, name := range groups {
		pol := e.PolicyOfGroup(e.GroupByName(name).ID)
		out[name] = [2]int{pol.ReservationGPUs, pol.LimitGPUs}
	}
	return out
}

func TestDepartmentHeadSplitsTheDepartment(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, b *testBundle) {
		c := setupHeads(t, b)

		t.Log("the head splits research's 64 GPUs among its three teams, each change audited as the head's")
		for _, split := range []struct {
			group              string
			reservation, limit int
		}{{"vision", 32, 48}, {"nlp", 16, 32}, {"speech", 16, 24}} {
			before := len(b.AuditLog(t))
			res, err := b.Svc.UpdatePolicy(c.head, split.group, platform.PolicyInput{ReservationGPUs: ptr(split.reservation), LimitGPUs: ptr(split.limit),
				Weight: ptr(2), TimeBudget: &platform.TimeBudgetInput{Hours: 100, Period: model.PeriodWeek}})
			platformtest.Must(t, err)
			if res.Estate.GroupByName("infra") != nil || res.Estate.Policy(res.ID) == nil {
				t.Errorf("the head's reply holds infra, or not the policy changed")
			}
			log := b.AuditLog(t)
			if n := len(log) - before; n != 1 {
				t.Fatalf("%d audit entries for %s's policy, want 1", n, split.group)
			}
			a := log[0]
			if a.Action != "resource_policy.updated" || a.ActorName != "hana" || !strings.Contains(a.Detail, "by hana, head of department research") ||
				!strings.Contains(a.Detail, split.group) {
				t.Errorf("audit entry %s by %s: %q", a.Action, a.ActorName, a.Detail)
			}
		}
		got := reservations(t, b, "vision", "nlp", "speech", "research")
		want := map[string][2]int{"vision": {32, 48}, "nlp": {16, 32}, "speech": {16, 24}, "research": {64, 64}}
		for g, w := range want {
			if got[g] != w {
				t.Errorf("%s reserves and limits %v, want %v", g, got[g], w)
			}
		}
		e, err := b.Svc.Estate(b.Admin)
		platformtest.Must(t, err)
		if pol := e.PolicyOfGroup(e.GroupByName("nlp").ID); pol.Weight != 2 || pol.Budget == nil || pol.Budget.MilliHours != 100_000 {
			t.Errorf("nlp's weight %d and budget %+v, want 2 and 100 hours", pol.Weight, pol.Budget)
		}

		t.Log("what is beyond the head's right is refused, and changes nothing")
		other, err := b.Svc.CreateTenant(b.Admin, "acme", "Acme", "root")
		platformtest.Must(t, err)
		acme := b.SignIn(t, other.Secret)
		_, err = b.Svc.ApplyEstate(acme, []byte(headsEstate), false)
		platformtest.Must(t, err)
		acmeEstate, err := b.Svc.Estate(acme)
		platformtest.Must(t, err)
		acmeNLP := acmeEstate.PolicyOfGroup(acmeEstate.GroupByName("nlp").ID).ID
		acmeResearch := acmeEstate.DepartmentByName("research").ID

		before := b.snapshot(t)
		for _, r := range []struct {
			name  string
			as    context.Context
			group string
			in    platform.PolicyInput
			code  platform.Code
			words []string
		}{
			{"over the department's reservation, with the numbers", c.head, "speech", platform.PolicyInput{ReservationGPUs: ptr(17)},
				platform.CodeInvalid, []string{"65 GPUs", "vision 32", "nlp 16", "speech 17", "64 GPUs department research reserves"}},
			{"one team alone over the department's reservation", c.head, "vision", platform.PolicyInput{ReservationGPUs: ptr(65), LimitGPUs: ptr(64)},
				platform.CodeInvalid, []string{"reserves 65 GPUs", "research reserves only 64"}},
			{"a limit above the department's effective limit", c.head, "nlp", platform.PolicyInput{LimitGPUs: ptr(80)},
				platform.CodeInvalid, []string{"80 GPUs", "the 64 GPUs its department research may hold", "at most 64"}},
			{"the department's own policy", c.head, "research", platform.PolicyInput{ReservationGPUs: ptr(80), LimitGPUs: ptr(80)},
				platform.CodeForbidden, []string{"only a tenant admin can change the resource policy of department \"research\""}},
			{"the policy of the department above", c.head, "company", platform.PolicyInput{LimitGPUs: ptr(200)},
				platform.CodeForbidden, []string{"only a tenant admin"}},
			{"a team outside the department", c.head, "infra", platform.PolicyInput{LimitGPUs: ptr(2)},
				platform.CodeNotFound, []string{"no resource policy 'infra'"}},
			{"another tenant's team, by id", c.head, acmeNLP, platform.PolicyInput{LimitGPUs: ptr(2)},
				platform.CodeNotFound, []string{"no resource policy"}},
			{"another tenant's department, by id", c.head, acmeResearch, platform.PolicyInput{LimitGPUs: ptr(2)},
				platform.CodeNotFound, []string{"no resource policy"}},
			{"what stays an admin's", c.head, "nlp", platform.PolicyInput{AlertThresholdPercent: ptr(50)},
				platform.CodeForbidden, []string{"ask a tenant admin"}},
			{"a viewer who heads the department", c.viewerHead, "nlp", platform.PolicyInput{LimitGPUs: ptr(4)},
				platform.CodeForbidden, []string{"only a tenant admin"}},
			{"a team's lead", c.visionLead, "vision", platform.PolicyInput{LimitGPUs: ptr(4)},
				platform.CodeForbidden, []string{"only a tenant admin"}},
			{"a team's member", c.nlpMember, "nlp", platform.PolicyInput{LimitGPUs: ptr(4)},
				platform.CodeForbidden, []string{"only a tenant admin"}},
		} {
			_, err := b.Svc.UpdatePolicy(r.as, r.group, r.in)
			if err == nil {
				t.Fatalf("%s: allowed", r.name)
			}
			if got := platform.ErrorCode(err); got != r.code {
				t.Errorf("%s: code %s (%v), want %s", r.name, got, err, r.code)
			}
			for _, w := range r.words {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: %q does not say %q", r.name, err, w)
				}
			}
			b.unchanged(t, before)
		}
		if got := reservations(t, b, "vision", "nlp", "speech"); got["speech"] != [2]int{16, 24} || got["nlp"] != [2]int{16, 32} {
			t.Errorf("a refusal moved the split: %v", got)
		}
	})
}

func TestDepartmentHeadIsAMembershipOfTheDepartment(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, b *testBundle) {
		setupHeads(t, b)
		b.CreateUser(t, "dora", model.RoleMember)
		dora := b.Key(t, "dora", "")
		_, err := b.Svc.UpdatePolicy(dora, "nlp", platform.PolicyInput{ReservationGPUs: ptr(8)})
		platformtest.WantError(t, err, platform.CodeForbidden, "only a tenant admin can change resource policies")

		t.Log("an admin makes dora research's head through the group's members, audited; she then splits its share")
		before := len(b.AuditLog(t))
		_, err = b.Svc.SetGroupMember(b.Admin, "research", "dora", model.GroupRoleLead)
		platformtest.Must(t, err)
		log := b.AuditLog(t)
		if len(log)-before != 1 || log[0].Action != "group.member_set" || !strings.Contains(log[0].Detail, "dora is lead of research") {
			t.Fatalf("making a head wrote %d entries, the last %s %q", len(log)-before, log[0].Action, log[0].Detail)
		}
		_, err = b.Svc.UpdatePolicy(b.Key(t, "dora", ""), "nlp", platform.PolicyInput{ReservationGPUs: ptr(8)})
		platformtest.Must(t, err)
		if got := reservations(t, b, "nlp")["nlp"]; got[0] != 8 {
			t.Errorf("nlp reserves %d, want 8", got[0])
		}

		t.Log("a team lead cannot make a head; once removed, the head's rights end")
		_, err = b.Svc.SetGroupMember(b.Key(t, "vlad", ""), "research", "nia", model.GroupRoleLead)
		platformtest.WantError(t, err, platform.CodeNotFound, "no group 'research'")
		platformtest.Must(t, b.Svc.RemoveGroupMember(b.Admin, "research", "dora"))
		_, err = b.Svc.UpdatePolicy(b.Key(t, "dora", ""), "nlp", platform.PolicyInput{ReservationGPUs: ptr(4)})
		platformtest.WantError(t, err, platform.CodeForbidden, "only a tenant admin can change resource policies")
	})
}

func TestDepartmentHeadSeesQueuesNotTasks(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, b *testBundle) {
		c := setupHeads(t, b)
		secret := map[string]string{"lr": "0.1"}
		nlpTask := enqueue(t, b, c.nlpMember, "nlp-train", "1 GPU", "nlp", secret)
		visionTask := enqueue(t, b, c.head, "vis-train", "1 GPU", "vision", secret)
		enqueue(t, b, c.infraMember, "infra-jobs", "1 GPU", "infra", nil)

		t.Log("the head sees the subtree's policies and their waiting counts, not infra's")
		views, err := b.Svc.PolicyViews(c.head, "")
		platformtest.Must(t, err)
		var names []string
		waiting := map[string]int{}
		for _, v := range views {
			names = append(names, v.Group.Name)
			waiting[v.Group.Name] = v.Waiting
		}
		for _, want := range []string{"nlp", "research", "speech", "vision"} {
			if !slices.Contains(names, want) {
				t.Errorf("the head's policy views %v lack %s", names, want)
			}
		}
		if slices.Contains(names, "infra") {
			t.Errorf("the head sees infra's policy: %v", names)
		}
		if waiting["nlp"] != 1 || waiting["research"] != 2 {
			t.Errorf("waiting counts %v, want nlp 1 and research 2", waiting)
		}
		_, err = b.Svc.PolicyViews(c.head, "infra")
		platformtest.WantError(t, err, platform.CodeNotFound)
		nlpCR := b.computeResource(t, "nlp", "1 GPU")
		n, err := b.Svc.QueuedTasks(c.head, nlpCR.ID)
		platformtest.Must(t, err)
		if n != 1 {
			t.Errorf("the head counts %d tasks waiting in nlp's compute resource, want 1", n)
		}
		_, err = b.Svc.QueuedTasks(c.head, b.computeResource(t, "infra", "1 GPU").ID)
		platformtest.WantError(t, err, platform.CodeNotFound)

		t.Log("the head lists nlp's tasks as places in line, without their contents; its own team's whole")
		list, err := b.Svc.Tasks(c.head, platform.TaskListFilter{Group: "nlp"}, model.Page{})
		platformtest.Must(t, err)
		if len(list) != 1 || list[0].ID != nlpTask.ID || list[0].Status != model.TaskQueued {
			t.Fatalf("the head's list of nlp: %v", list)
		}
		if len(list[0].Spec.Command) != 0 || len(list[0].Spec.Parameters) != 0 {
			t.Errorf("the head reads the spec of nlp's task: %+v", list[0].Spec)
		}
		_, err = b.Svc.Task(c.head, nlpTask.ID)
		platformtest.WantError(t, err, platform.CodeNotFound)
		_, err = b.Svc.TaskLogs(c.head, list[0], 0, 10, 0)
		platformtest.WantError(t, err, platform.CodeNotFound)
		mine, err := b.Svc.Task(c.head, visionTask.ID)
		platformtest.Must(t, err)
		if mine.Spec.Parameters["lr"] != "0.1" {
			t.Errorf("the head, a member of vision, does not read its task's spec: %+v", mine.Spec)
		}
		_, err = b.Svc.Tasks(c.head, platform.TaskListFilter{Group: "infra"}, model.Page{})
		platformtest.WantError(t, err, platform.CodeNotFound)

		t.Log("the head reads the subtree's usage, not infra's")
		now := time.Now()
		_, err = b.Svc.Usage(c.head, platform.UsageQuery{From: now.Add(-time.Hour), To: now.Add(time.Hour), Group: "nlp"})
		platformtest.Must(t, err)
		_, err = b.Svc.Usage(c.head, platform.UsageQuery{From: now.Add(-time.Hour), To: now.Add(time.Hour), Group: "research"})
		platformtest.Must(t, err)
		_, err = b.Svc.Usage(c.head, platform.UsageQuery{From: now.Add(-time.Hour), To: now.Add(time.Hour), Group: "infra"})
		platformtest.WantError(t, err, platform.CodeNotFound)
	})
}

func TestDepartmentHeadOrdersTeamQueues(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, b *testBundle) {
		c := setupHeads(t, b)
		first := enqueue(t, b, c.nlpMember, "nlp-train", "1 GPU", "nlp", map[string]string{"n": "1"})
		second := enqueue(t, b, c.nlpMember, "nlp-eval", "1 GPU", "nlp", map[string]string{"n": "2"})
		infra := enqueue(t, b, c.infraMember, "infra-jobs", "1 GPU", "infra", nil)

		t.Log("the head moves nlp's second task to the front, without seeing it, audited as the head's")
		moved, err := b.Svc.MoveQueuedTask(c.head, platform.QueueMove{Task: second.ID, ToFront: true})
		platformtest.Must(t, err)
		if moved.From != 2 || moved.To != 1 || len(moved.Task.Spec.Parameters) != 0 {
			t.Errorf("moved from %d to %d with spec %+v", moved.From, moved.To, moved.Task.Spec)
		}
		if pos := queuePosition(t, b, second); pos != 1 {
			t.Errorf("nlp's second task is at %d, want 1", pos)
		}
		a := lastAudit(t, b)
		if a.Action != "task.moved" || a.ActorName != "hana" || !strings.Contains(a.Detail, "head of department research") {
			t.Errorf("audit %s by %s: %q", a.Action, a.ActorName, a.Detail)
		}

		t.Log("the head sets nlp's project priority")
		pp, err := b.Svc.SetProjectPriorities(c.head, "nlp", []string{"nlp-eval", "nlp-train"})
		platformtest.Must(t, err)
		if got := projectNamesOf(pp.Projects); !slices.Equal(got, []string{"nlp-eval", "nlp-train"}) {
			t.Errorf("priority %v", got)
		}
		if a := lastAudit(t, b); a.Action != "group.project_priority_set" || !strings.Contains(a.Detail, "head of department research") {
			t.Errorf("audit %s: %q", a.Action, a.Detail)
		}

		t.Log("outside the department, as a viewer head or a member, nothing moves")
		before := b.snapshot(t)
		_, err = b.Svc.MoveQueuedTask(c.head, platform.QueueMove{Task: infra.ID, ToFront: true})
		platformtest.WantError(t, err, platform.CodeNotFound)
		_, err = b.Svc.SetProjectPriorities(c.head, "infra", []string{"infra-jobs"})
		platformtest.WantError(t, err, platform.CodeNotFound)
		_, err = b.Svc.MoveQueuedTask(c.viewerHead, platform.QueueMove{Task: first.ID, ToFront: true})
		platformtest.WantError(t, err, platform.CodeForbidden)
		_, err = b.Svc.MoveQueuedTask(c.nlpMember, platform.QueueMove{Task: first.ID, ToFront: true})
		platformtest.WantError(t, err, platform.CodeForbidden)
		b.unchanged(t, before)
		if pos := queuePosition(t, b, first); pos != 2 {
			t.Errorf("a refused move moved nlp's first task to %d", pos)
		}
	})
}

// queuePosition is a task's place in its queue, read as the admin.
func queuePosition(t *testing.T, b *testBundle, task *model.Task) int {
	t.Helper()
	cur, err := b.Svc.Task(b.Admin, task.ID)
	platformtest.Must(t, err)
	pos, err := b.Svc.TaskPosition(b.Admin, cur)
	platformtest.Must(t, err)
	return pos
}

// TestDepartmentHeadFollowsATeamQueue: the head's live queue of a team
// lists its waiting tasks' places, not their contents; another
// department's queue is not found.
func TestDepartmentHeadFollowsATeamQueue(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		c := setupHeads(t, b)
		task := enqueue(t, b, c.nlpMember, "nlp-train", "1 GPU", "nlp", map[string]string{"lr": "0.1"})
		infra := enqueue(t, b, c.infraMember, "infra-jobs", "1 GPU", "infra", nil)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		sub, release, err := b.Svc.OpenSubscriptions(ctx, b.CreateKey(t, "hana", ""))
		platformtest.Must(t, err)
		defer release()
		ch, err := b.Svc.SubscribeQueue(sub, task.ComputeResourceID)
		platformtest.Must(t, err)
		u := <-ch
		if len(u.Waiting) != 1 || u.Waiting[0].Position != 1 || u.Waiting[0].Task.ID != task.ID {
			t.Fatalf("the head's snapshot of nlp's queue: %+v", u.Waiting)
		}
		if spec := u.Waiting[0].Task.Spec; len(spec.Command) != 0 || len(spec.Parameters) != 0 {
			t.Errorf("the head's live queue shows the task's spec: %+v", spec)
		}
		_, err = b.Svc.SubscribeQueue(sub, infra.ComputeResourceID)
		platformtest.WantError(t, err, platform.CodeNotFound)
	}, platformtest.WithEvents())
}
