package apps

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/estate/appconf"
	"github.com/klique-ai/klique/internal/estate/llmconf"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// Prepare writes an instance's spec inside the enqueue's transaction, once
// its compute resource is resolved (tasks.PrepareFunc).
type Prepare func(t *kernel.Txn, e *estate.Estate, cr *model.ComputeResource, size model.Size) (model.TaskSpec, error)

// LaunchInput is a launch: an app, where it runs, and its form's values.
type LaunchInput struct {
	App string `json:"app"`
	// ComputeResource is an id or name; Group says whose when a name is
	// shared between the caller's groups.
	ComputeResource string `json:"computeResource"`
	Group           string `json:"group,omitempty"`
	Project         string `json:"project,omitempty"`
	// Values are the launch form's values, checked against its schema.
	Values map[string]any `json:"values,omitempty"`
	// Name names the instance; "<app>-<user>-<n>" when empty.
	Name string `json:"name,omitempty"`
	// Route is the static route the instance will serve (a later slice
	// adds it to the route when it is ready).
	Route string `json:"route,omitempty"`
	// ShareWithGroup lets the members of the compute resource's group see
	// and open the instance; ShareWithUsers names users who may.
	ShareWithGroup bool     `json:"shareWithGroup,omitempty"`
	ShareWithUsers []string `json:"shareWithUsers,omitempty"`
	// IdleMinutes and MaxLifetimeMinutes shorten the app's idle limits for
	// this instance (nil: the app's). A launch may shorten a limit an
	// admin set, never lengthen or remove it; where the app sets none it
	// may set one.
	IdleMinutes        *int `json:"idleMinutes,omitempty"`
	MaxLifetimeMinutes *int `json:"maxLifetimeMinutes,omitempty"`
}

// launchLimit is the limit a launch runs under: the app's, or the
// launch's own when it is shorter (or the app has none).
func launchLimit(app *model.App, field string, appLimit int, asked *int) (int, error) {
	if asked == nil {
		return appLimit, nil
	}
	v := *asked
	switch {
	case v < 1 || v > appconf.MaxLimitMinutes:
		return 0, kernel.Invalid("%s %d: give a number of minutes from 1 to %d, or leave it out for the app's", field, v, appconf.MaxLimitMinutes)
	case appLimit > 0 && v > appLimit:
		return 0, kernel.Invalid("%s %d: app %s allows at most %d (%s), set by an admin; a launch may shorten it, not lengthen it",
			field, v, kernel.Quote(app.Name), appLimit, Minutes(appLimit))
	}
	return v, nil
}

// LaunchApp launches an app instance: the launch is checked against the
// app's rules (the tenant-wide switch, the app's lock, its form), then
// enqueued as a task of type application on the compute resource through
// the tasks domain, whose checks apply as to any task; inside that
// transaction the running-apps quotas are counted and the app's templates
// rendered for the compute resource's profile (its GPU count is {gpus}).
//
// The instance never completes on its own: it holds its GPUs until it is
// stopped (StopApp), preempted or reclaimed; a worker that sees its process
// exit reports it failed with the exit code.
func (s *Apps) LaunchApp(ctx context.Context, in LaunchInput) (*model.AppInstance, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := kernel.RequireWrite(p, "launch apps"); err != nil {
		return nil, err
	}
	e, err := s.k.TenantEstate(ctx, p)
	if err != nil {
		return nil, err
	}
	app := appconf.Lookup(&e.Apps, strings.TrimSpace(in.App))
	if app == nil {
		return nil, noApp(in.App)
	}
	if e.Apps.Settings.LaunchesDisabled {
		return nil, kernel.Forbidden("app launches are switched off for the whole company by an admin (the tenant-wide launches switch); ask an admin to switch them on")
	}
	if app.Locked {
		return nil, kernel.Forbidden("app %s is locked by an admin (the app's lock); ask an admin to unlock it, or launch another app from 'klique app ls'", kernel.Quote(app.Name))
	}
	if err := checkRoute(e, app, strings.TrimSpace(in.Route)); err != nil {
		return nil, err
	}
	form, err := appconf.CompileForm(app.Form)
	if err != nil {
		return nil, kernel.Unavailable("app %s has a broken launch form (%v); ask an admin to fix it", kernel.Quote(app.Name), err)
	}
	// An entry put before launch values were kept out of shell scripts
	// is held to the rule here, before any value reaches one.
	if ps := appconf.ShellProblems(app); len(ps) > 0 {
		return nil, kernel.Unavailable("app %s would run a launch value as shell: %s; ask an admin to fix the entry", kernel.Quote(app.Name), strings.Join(ps, "; "))
	}
	idle, err := launchLimit(app, "idleMinutes", app.IdleMinutes, in.IdleMinutes)
	if err != nil {
		return nil, err
	}
	lifetime, err := launchLimit(app, "maxLifetimeMinutes", app.MaxLifetimeMinutes, in.MaxLifetimeMinutes)
	if err != nil {
		return nil, err
	}
	values, problems := form.Check(in.Values)
	if len(problems) > 0 {
		return nil, &kernel.Error{Code: kernel.CodeInvalid, Problems: problems,
			Message: fmt.Sprintf("launch form of app %s: %s; change the value and launch again", kernel.Quote(app.Name), strings.Join(problems, "; "))}
	}
	if err := s.enqueueReady(); err != nil {
		return nil, err
	}
	share, err := s.shareUsers(ctx, p.TenantID, in.ShareWithUsers)
	if err != nil {
		return nil, err
	}
	id := model.NewID()
	name := strings.TrimSpace(in.Name)
	if name == "" {
		active, err := activeApps(ctx, s.k.Store, p.TenantID)
		if err != nil {
			return nil, s.k.Internal(ctx, err)
		}
		name = defaultName(app.Name, p.UserName, p.UserID, active)
	}
	prepare := func(t *kernel.Txn, e *estate.Estate, cr *model.ComputeResource, size model.Size) (model.TaskSpec, error) {
		active, err := activeApps(t.Ctx, t.Q, p.TenantID)
		if err != nil {
			return model.TaskSpec{}, err
		}
		pol := e.Policy(cr.PolicyID)
		if err := checkQuotas(p.UserID, &e.Apps.Settings, e.GroupName(pol.GroupID), pol.GroupID, active); err != nil {
			return model.TaskSpec{}, err
		}
		spec := render(app, values, id, size, in, share)
		spec.App.IdleMinutes, spec.App.MaxLifetimeMinutes = idle, lifetime
		return spec, nil
	}
	task, err := s.enqueue(ctx, name, in.Project, in.ComputeResource, in.Group, id, prepare, in)
	if err != nil {
		return nil, err
	}
	return s.decorate(ctx, s.instance(task))
}

// checkRoute refuses a launch with a route that is not one of the
// tenant's static routes, or of an app that serves no model: the route's
// calls would go to it. A route is made by an admin, with or without
// endpoints of its own.
func checkRoute(e *estate.Estate, app *model.App, route string) error {
	if route == "" {
		return nil
	}
	if app.Kind != model.AppServing {
		return kernel.Invalid("app %s is a %s app: only a serving app's instances can serve route %s; launch it without a route, or launch a serving app such as vllm",
			kernel.Quote(app.Name), app.Kind, kernel.Quote(route))
	}
	if llmconf.Route(&e.Gateway, route) == nil {
		return kernel.Invalid("no static route %s: an admin creates it in the estate file's gateway section (routes: [{name: %s, app: %s}]) and runs 'klique apply', or with the putLLMRoute mutation; then launch again",
			kernel.Quote(route), route, app.Name)
	}
	return nil
}

// activeApps lists the tenant's instances that have not ended: what the
// running-apps quotas count.
func activeApps(ctx context.Context, q store.Queries, tenantID string) ([]*model.Task, error) {
	var out []*model.Task
	page := store.Page{Limit: 1000}
	for {
		tasks, err := q.ListTasks(ctx, tenantID, store.TaskFilter{Statuses: []model.TaskStatus{model.TaskQueued, model.TaskPlaced, model.TaskRunning}}, page, false)
		if err != nil {
			return nil, fmt.Errorf("count running apps: %w", err)
		}
		for _, t := range tasks {
			if t.Spec.Kind == model.TaskKindApplication {
				out = append(out, t)
			}
		}
		if len(tasks) < page.Limit {
			return out, nil
		}
		page.After = strconv.FormatInt(tasks[len(tasks)-1].QueueSeq, 10)
	}
}

func (s *Apps) enqueueReady() error {
	if s.enqueue == nil || s.abort == nil {
		return kernel.Unavailable("app launches are not wired to the tasks domain")
	}
	return nil
}

// shareUsers resolves the users a launch shares with to their ids.
func (s *Apps) shareUsers(ctx context.Context, tenantID string, refs []string) ([]string, error) {
	var out []string
	for _, r := range refs {
		u, err := kernel.FindUser(ctx, s.k.Store, tenantID, strings.TrimSpace(r))
		if err != nil {
			return nil, err
		}
		out = append(out, u.ID)
	}
	return out, nil
}

// checkQuotas refuses a launch past the company's or the group's
// running-apps quota, naming the caller's own instances to stop.
func checkQuotas(userID string, st *model.AppSettings, groupName, groupID string, active []*model.Task) error {
	mine := func(in func(*model.Task) bool) string {
		var names []string
		for _, t := range active {
			if t.OwnerID == userID && in(t) {
				names = append(names, t.Name)
			}
		}
		if len(names) == 0 {
			return "none of them is yours: ask an admin to raise the quota, or wait for one to stop"
		}
		return "stop one of yours: " + strings.Join(names, ", ")
	}
	if st.Running > 0 && len(active) >= st.Running {
		return kernel.Conflict("the company's quota of %d running apps is reached; %s", st.Running, mine(func(*model.Task) bool { return true }))
	}
	if q := appconf.GroupQuota(st, groupName); q > 0 {
		n := 0
		for _, t := range active {
			if t.GroupID == groupID {
				n++
			}
		}
		if n >= q {
			return kernel.Conflict("group %s's quota of %d running apps is reached; %s", groupName, q, mine(func(t *model.Task) bool { return t.GroupID == groupID }))
		}
	}
	return nil
}

// defaultName is "<app>-<user>-<n>", n one more than the caller's running
// instances of the app.
func defaultName(app, userName, userID string, active []*model.Task) string {
	n := 1
	for _, t := range active {
		if t.OwnerID == userID && t.Spec.App != nil && t.Spec.App.App == app {
			n++
		}
	}
	user, _, _ := strings.Cut(userName, "@")
	if user == "" {
		user = "user"
	}
	return fmt.Sprintf("%s-%s-%d", app, user, n)
}

// render writes an instance's task spec: the app's templates rendered with
// the form's values and the values every launch has. A process-mode worker
// runs Command (the process line, else the batch line, else the container
// args); the other modes read the rendered Run from spec.App.
func render(app *model.App, values map[string]any, id string, size model.Size, in LaunchInput, share []string) model.TaskSpec {
	gpus := int(size.PerNode / 1000)
	if gpus < 1 {
		gpus = 1 // a fraction of a GPU is one device to the server
	}
	vals := map[string]string{}
	for k, v := range values {
		vals[k] = appconf.String(v)
	}
	vals["gpus"], vals["port"], vals["instance"], vals["app"] = strconv.Itoa(gpus), strconv.Itoa(app.Port), id, app.Name
	run := appconf.RenderRun(app, vals)
	// The process and batch lines run on the host, where the worker owns
	// the ports: {port} is left for it to fill with a free one. A
	// container (image, args, pod) has its own network and listens on the
	// app's port.
	hostVals := maps.Clone(vals)
	hostVals["port"] = model.AppPortPlaceholder
	hostRun := appconf.RenderRun(app, hostVals)
	run.Process, run.Batch = hostRun.Process, hostRun.Batch
	spec := model.TaskSpec{Kind: model.TaskKindApplication, Image: run.Image,
		Env: map[string]string{"KLIQUE_APP": app.Name, "KLIQUE_APP_PORT": model.AppPortPlaceholder, "KLIQUE_APP_INSTANCE": id}}
	// Each launch value is one argument (a value with spaces is not
	// split into several); the batch line is a shell script, as an HPC
	// job runs it, with its values quoted (appconf.ShellProblems).
	switch {
	case app.Run.Process != "":
		spec.Command = appconf.ProcessArgv(app, hostVals)
	case run.Batch != "":
		spec.Command = []string{"/bin/sh", "-c", run.Batch}
	default:
		spec.Command = slices.Clone(run.Args)
	}
	for _, f := range app.Secrets {
		if v := vals[f]; v != "" {
			spec.Secrets = append(spec.Secrets, v)
		}
	}
	spec.App = &model.AppLaunch{App: app.Name, Kind: app.Kind, Values: values, Run: run, Port: app.Port,
		Health: appconf.Render(app.HealthPath, vals), Route: strings.TrimSpace(in.Route),
		ShareGroup: in.ShareWithGroup, ShareUsers: share,
		MaxLifetimeMinutes: app.MaxLifetimeMinutes, IdleMinutes: app.IdleMinutes}
	return spec
}

// instance is a task as an instance, with the URL it is served at.
func (s *Apps) instance(t *model.Task) *model.AppInstance {
	in := model.AppInstanceOf(t)
	in.URL = s.hosts.URL(t.ID)
	return in
}
