package apps

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/estate/appconf"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
)

// The pure rules of the apps domain: a launch's idle limits, the
// running-apps quotas, an instance's default name, its rendered spec,
// who sees and stops it, and when its limits stop it.

func TestLaunchLimit(t *testing.T) {
	app := &model.App{Name: "jupyterlab"}
	n := func(v int) *int { return &v }
	cases := []struct {
		name     string
		appLimit int
		asked    *int
		want     int
		err      string
	}{
		{"the app's when not asked", 60, nil, 60, ""},
		{"none when neither sets one", 0, nil, 0, ""},
		{"shorter than the app's", 60, n(30), 30, ""},
		{"equal to the app's", 60, n(60), 60, ""},
		{"where the app sets none", 0, n(600), 600, ""},
		{"longer than the app's", 60, n(61), 0, "allows at most 60 (1 hour), set by an admin; a launch may shorten it, not lengthen it"},
		{"zero", 60, n(0), 0, "give a number of minutes from 1 to"},
		{"past the bound", 0, n(appconf.MaxLimitMinutes + 1), 0, "give a number of minutes from 1 to"},
	}
	for _, c := range cases {
		got, err := launchLimit(app, "idleMinutes", c.appLimit, c.asked)
		if c.err != "" {
			if kernel.ErrorCode(err) != kernel.CodeInvalid || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v; want a refusal saying %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: %d, %v; want %d", c.name, got, err, c.want)
		}
	}
}

func TestCheckQuotas(t *testing.T) {
	active := []*model.Task{
		{Name: "mine-1", OwnerID: "u1", GroupID: "ml"},
		{Name: "theirs", OwnerID: "u2", GroupID: "ml"},
		{Name: "mine-2", OwnerID: "u1", GroupID: "vision"},
	}
	quota := func(running int, groups ...*model.AppGroupQuota) *model.AppSettings {
		return &model.AppSettings{Running: running, Groups: groups}
	}
	cases := []struct {
		name   string
		user   string
		st     *model.AppSettings
		group  string
		active []*model.Task
		err    string
	}{
		{"no quota", "u1", quota(0), "ml", active, ""},
		{"under the company's", "u1", quota(4), "ml", active, ""},
		{"at the company's", "u1", quota(3), "ml", active, "the company's quota of 3 running apps is reached; stop one of yours: mine-1, mine-2"},
		{"at the company's, none of them yours", "u3", quota(3), "ml", active, "none of them is yours"},
		{"at the group's", "u1", quota(0, &model.AppGroupQuota{Group: "ml", Running: 2}), "ml", active, "group ml's quota of 2 running apps is reached; stop one of yours: mine-1"},
		{"another group's quota", "u1", quota(0, &model.AppGroupQuota{Group: "ml", Running: 2}), "vision", active, ""},
		{"under the group's", "u1", quota(0, &model.AppGroupQuota{Group: "ml", Running: 3}), "ml", active, ""},
	}
	for _, c := range cases {
		err := checkQuotas(c.user, c.st, c.group, c.group, c.active)
		if c.err == "" {
			if err != nil {
				t.Errorf("%s: refused: %v", c.name, err)
			}
			continue
		}
		if kernel.ErrorCode(err) != kernel.CodeConflict || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v; want a CONFLICT saying %q", c.name, err, c.err)
		}
	}
}

func TestDefaultName(t *testing.T) {
	jl := func(owner string) *model.Task {
		return &model.Task{OwnerID: owner, Spec: model.TaskSpec{App: &model.AppLaunch{App: "jupyterlab"}}}
	}
	other := &model.Task{OwnerID: "u1", Spec: model.TaskSpec{App: &model.AppLaunch{App: "vllm"}}}
	for _, c := range []struct {
		user   string
		active []*model.Task
		want   string
	}{
		{"rita@example.com", nil, "jupyterlab-rita-1"},
		{"rita", []*model.Task{jl("u1"), jl("u2"), other}, "jupyterlab-rita-2"},
		{"@example.com", nil, "jupyterlab-user-1"},
	} {
		if got := defaultName("jupyterlab", c.user, "u1", c.active); got != c.want {
			t.Errorf("defaultName for %s = %q, want %q", c.user, got, c.want)
		}
	}
}

// An instance's spec: its GPU count from the size (a fraction is one
// device), the host's port left for the worker, each launch value one
// argument, its secrets named by the form.
func TestRenderAnInstance(t *testing.T) {
	app := appconf.BuiltIn("vllm")
	if app == nil {
		t.Fatal("no built-in vllm")
	}
	size, err := model.ParseSize("4")
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]any{"model": "org/my model", "hf_token_secret": "HF_TOKEN"}
	form, err := appconf.CompileForm(app.Form)
	if err != nil {
		t.Fatal(err)
	}
	values, problems := form.Check(values)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	in := LaunchInput{Route: " chat ", ShareWithGroup: true}
	spec := render(app, values, "inst1", size, in, []string{"u2"})
	if spec.Kind != model.TaskKindApplication || spec.App == nil || spec.App.App != "vllm" || spec.App.Route != "chat" {
		t.Fatalf("spec %+v", spec)
	}
	argv := strings.Join(spec.Command, "|")
	if !strings.Contains(argv, "|org/my model|") || !strings.Contains(argv, "--tensor-parallel-size|4") || !strings.Contains(argv, "--port|"+model.AppPortPlaceholder) {
		t.Errorf("the process line: %q", spec.Command)
	}
	if !slices.Equal(spec.Secrets, []string{"HF_TOKEN"}) {
		t.Errorf("secrets %v, want the one the form names", spec.Secrets)
	}
	if spec.Env["KLIQUE_APP_INSTANCE"] != "inst1" || spec.Env["KLIQUE_APP_PORT"] != model.AppPortPlaceholder {
		t.Errorf("env %v", spec.Env)
	}
	if !spec.App.ShareGroup || !slices.Equal(spec.App.ShareUsers, []string{"u2"}) {
		t.Errorf("sharing %+v", spec.App)
	}
	eighth, _ := model.ParseSize("0.125")
	if spec := render(app, values, "inst1", eighth, in, nil); !strings.Contains(strings.Join(spec.Command, " "), "--tensor-parallel-size 1") {
		t.Errorf("a fraction of a GPU is one device: %q", spec.Command)
	}
}

func TestWhoSeesAndStopsAnInstance(t *testing.T) {
	inst := &model.Task{TenantID: "t1", OwnerID: "owner", GroupID: "ml", ProjectID: "p1",
		Spec: model.TaskSpec{Kind: model.TaskKindApplication, App: &model.AppLaunch{App: "jupyterlab", ShareUsers: []string{"friend"}}}}
	shared := *inst
	shared.Spec.App = &model.AppLaunch{App: "jupyterlab", ShareGroup: true}
	p := func(user string, role model.Role, project string, groups ...identity.GroupGrant) *identity.Principal {
		return &identity.Principal{TenantID: "t1", UserID: user, Role: role, ProjectID: project, Groups: groups}
	}
	member := identity.GroupGrant{GroupID: "ml", Role: model.GroupRoleMember}
	lead := identity.GroupGrant{GroupID: "ml", Role: model.GroupRoleLead}
	cases := []struct {
		name                    string
		p                       *identity.Principal
		sees, seesShared, stops bool
	}{
		{"owner", p("owner", model.RoleMember, ""), true, true, true},
		{"a named user", p("friend", model.RoleMember, ""), true, false, false},
		{"a member of the group", p("m", model.RoleMember, "", member), false, true, false},
		{"the group's lead", p("l", model.RoleMember, "", lead), false, true, true},
		{"admin", p("a", model.RoleTenantAdmin, ""), true, true, true},
		{"admin scoped to another project", p("a", model.RoleTenantAdmin, "p2"), false, false, true},
		{"another tenant's admin", &identity.Principal{TenantID: "t2", UserID: "a", Role: model.RoleTenantAdmin}, false, false, true},
		{"a viewing owner", p("owner", model.RoleViewer, ""), true, true, false},
	}
	for _, c := range cases {
		if got := SeesInstance(c.p, inst); got != c.sees {
			t.Errorf("%s: sees %v", c.name, got)
		}
		if got := SeesInstance(c.p, &shared); got != c.seesShared {
			t.Errorf("%s: sees the group-shared instance %v", c.name, got)
		}
		if got := mayStop(c.p, inst); got != c.stops {
			t.Errorf("%s: may stop %v", c.name, got)
		}
	}
	batch := &model.Task{TenantID: "t1", OwnerID: "owner"}
	if SeesInstance(p("owner", model.RoleMember, ""), batch) {
		t.Error("a task that is not an app instance is seen as one")
	}
}

// The idle limits: the earlier of the idle limit (from the last use) and
// the maximum lifetime (from the start) stops an instance.
func TestIdleState(t *testing.T) {
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(min int) *time.Time { v := start.Add(time.Duration(min) * time.Minute); return &v }
	task := func(idle, life int, active *time.Time, status model.TaskStatus) *model.Task {
		return &model.Task{Status: status, Run: model.TaskRun{StartedAt: &start, AppActiveAt: active},
			Spec: model.TaskSpec{App: &model.AppLaunch{IdleMinutes: idle, MaxLifetimeMinutes: life}}}
	}
	cases := []struct {
		name   string
		t      *model.Task
		now    *time.Time
		stops  *time.Time
		reason string
	}{
		{"no limits", task(0, 0, nil, model.TaskRunning), at(5), nil, ""},
		{"not running", task(60, 720, nil, model.TaskQueued), at(5), nil, ""},
		{"idle since the start", task(60, 720, nil, model.TaskRunning), at(5), at(60), "stopped: idle for 1 hour"},
		{"idle since its last use", task(60, 720, at(30), model.TaskRunning), at(45), at(90), "stopped: idle for 1 hour"},
		{"a use noted in the future counts as now", task(60, 720, at(500), model.TaskRunning), at(45), at(105), "stopped: idle for 1 hour"},
		{"the lifetime comes first", task(60, 90, at(50), model.TaskRunning), at(55), at(90), "stopped: reached its maximum lifetime of 1 hour 30 minutes"},
		{"a lifetime alone", task(0, 1500, nil, model.TaskRunning), at(5), at(1500), "stopped: reached its maximum lifetime of 1 day 1 hour"},
	}
	for _, c := range cases {
		st := IdleState(c.t, *c.now)
		switch {
		case c.stops == nil && st.StopsAt != nil:
			t.Errorf("%s: stops at %v; want never", c.name, st.StopsAt)
		case c.stops != nil && (st.StopsAt == nil || !st.StopsAt.Equal(*c.stops)):
			t.Errorf("%s: stops at %v; want %v", c.name, st.StopsAt, c.stops)
		case c.stops != nil && !strings.HasPrefix(st.StopReason, c.reason):
			t.Errorf("%s: reason %q; want %q", c.name, st.StopReason, c.reason)
		}
	}
	if st := IdleState(&model.Task{}, start); st.StopsAt != nil || st.IdleMinutes != 0 {
		t.Errorf("a task with no app: %+v", st)
	}
}

func TestMinutes(t *testing.T) {
	for n, want := range map[int]string{0: "0 minutes", 1: "1 minute", 30: "30 minutes", 60: "1 hour", 90: "1 hour 30 minutes",
		480: "8 hours", 1440: "1 day", 1561: "1 day 2 hours 1 minute", 2880: "2 days"} {
		if got := Minutes(n); got != want {
			t.Errorf("Minutes(%d) = %q, want %q", n, got, want)
		}
	}
}
