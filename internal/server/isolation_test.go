package server_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/klique-ai/klique/internal/store/pgtest"
)

// actor is who tries an operation in an isolation case.
type actor int

const (
	// otherAdmin is olga, the admin of tenant "other".
	otherAdmin actor = iota
	// otherMember is oscar, a member of a group of tenant "other".
	otherMember
	// thirdAdmin is tess, the admin of tenant "third", who creates objects
	// with the same names as tenant default's.
	thirdAdmin
	// victor is a member of group vision of tenant default.
	victor
	// viewer is a viewer in group ml-research of tenant default.
	viewer
)

func (a actor) String() string {
	return [...]string{"the other tenant's admin", "the other tenant's member", "the third tenant's admin",
		"victor of group vision", "the viewer of ml-research"}[a]
}

// otherTenant reports whether the actor belongs to another tenant than
// default.
func (a actor) otherTenant() bool { return a <= thirdAdmin }

func (a actor) key(f *fixture) string {
	return [...]string{f.olga, f.oscar, f.tess, f.victor, f.viewer}[a]
}

// ref is a variable value that names a fixture object; it is replaced by
// the object's id when the case runs.
type ref string

// isoCase is one operation tried by someone who must not reach tenant
// default's (or group ml-research's) objects through it.
type isoCase struct {
	// field is the schema field the case covers, "Query.x" or "Mutation.y".
	field string
	as    actor
	// name completes the sentence "<actor> ...".
	name  string
	query string
	vars  map[string]any
	// code is the extensions.code the first error must carry; "" means
	// the operation succeeds (within the caller's own reach).
	code string
	// check makes further assertions on the answer.
	check func(r *report, f *fixture, res *gqlResult)
	// knownBug, when set, says which known bug outside this package makes
	// the case fail: a failure is then reported as a skip, and a pass as an
	// error, so that the mark is removed once the bug is fixed.
	knownBug string
}

// report collects the failures of one case.
type report struct{ msgs []string }

func (r *report) errorf(format string, args ...any) {
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

// Checks used by many cases.

// wantList asserts that the values of key in the nodes of a connection are
// exactly want, in any order.
func wantList(conn, key string, want ...string) func(r *report, f *fixture, res *gqlResult) {
	return func(r *report, f *fixture, res *gqlResult) {
		got := nodeValues(res.Data, key, conn)
		sort.Strings(got)
		w := append([]string(nil), want...)
		sort.Strings(w)
		if strings.Join(got, ",") != strings.Join(w, ",") {
			r.errorf("%s lists %q, want %q", conn, got, w)
		}
	}
}

// wantPlainList asserts that a plain list at a dotted path holds objects
// whose field (a path inside each object) has exactly the values want, in
// any order; with no want, that the list is empty.
func wantPlainList(at string, field []string, want ...string) func(r *report, f *fixture, res *gqlResult) {
	return func(r *report, f *fixture, res *gqlResult) {
		var steps []any
		for _, s := range strings.Split(at, ".") {
			steps = append(steps, s)
		}
		list, ok := path(res.Data, steps...).([]any)
		if !ok {
			r.errorf("%s is missing or not a list", at)
			return
		}
		var fs []any
		for _, s := range field {
			fs = append(fs, s)
		}
		got := []string{}
		for _, item := range list {
			got = append(got, str(item, fs...))
		}
		sort.Strings(got)
		w := append([]string{}, want...)
		sort.Strings(w)
		if strings.Join(got, ",") != strings.Join(w, ",") || len(got) != len(w) {
			r.errorf("%s lists %q, want %q", at, got, w)
		}
	}
}

// wantEmpty asserts that a connection has no edges.
func wantEmpty(conn string) func(r *report, f *fixture, res *gqlResult) {
	return func(r *report, f *fixture, res *gqlResult) {
		if path(res.Data, conn) == nil {
			r.errorf("%s is missing from the answer", conn)
			return
		}
		if n := nodes(res.Data, conn); len(n) != 0 {
			r.errorf("%s lists %d objects, want none: %v", conn, len(n), n)
		}
	}
}

// wantNewID asserts that the object at the path exists and is not the
// fixture object with the given key (an object of the same name in another
// tenant is another object).
func wantNewID(key string, steps ...any) func(r *report, f *fixture, res *gqlResult) {
	return func(r *report, f *fixture, res *gqlResult) {
		got := str(res.Data, append(steps, "id")...)
		if got == "" {
			r.errorf("no id at %v", steps)
		} else if got == f.ids[key] {
			r.errorf("%v is %s of tenant default, want a new object", steps, key)
		}
	}
}

func all(checks ...func(r *report, f *fixture, res *gqlResult)) func(r *report, f *fixture, res *gqlResult) {
	return func(r *report, f *fixture, res *gqlResult) {
		for _, c := range checks {
			c(r, f, res)
		}
	}
}

const (
	forbidden  = "FORBIDDEN"
	notFound   = "NOT_FOUND"
	badInput   = "BAD_USER_INPUT"
	taskFields = `{ id name status owner { name } project { name } }`
)

// isolationCases are tried in order: the third tenant's cases build on
// each other (a GPU class, then a pool of that class, and so on).
var isolationCases = []isoCase{
	// ---- Queries ----------------------------------------------------------
	{field: "Query.me", as: otherAdmin, name: "sees their own user and tenant",
		query: `{ me { user { name role groups { group { name } } } tenant { id name } groups { group { name } } project { name } } }`,
		check: func(r *report, f *fixture, res *gqlResult) {
			if got := str(res.Data, "me", "tenant", "name"); got != "other" {
				r.errorf("me.tenant.name = %q, want other", got)
			}
			if got := str(res.Data, "me", "user", "name"); got != "olga" {
				r.errorf("me.user.name = %q, want olga", got)
			}
		}},
	{field: "Query.me", as: victor, name: "sees only group vision among their groups",
		query: `{ me { user { name } groups { role group { name policy { id } members { user { name } } } } } }`,
		check: func(r *report, f *fixture, res *gqlResult) {
			gs, _ := path(res.Data, "me", "groups").([]any)
			if len(gs) != 1 || str(gs[0], "group", "name") != "vision" {
				r.errorf("me.groups = %v, want only vision", gs)
			}
		}},
	{field: "Query.users", as: otherAdmin, name: "lists only the users of their tenant",
		query: `{ users { edges { node { id name groups { group { name } } } } } }`,
		check: wantList("users", "name", "olga", "oscar")},
	{field: "Query.users", as: victor, name: "lists only themselves, not alice",
		query: `{ users { edges { node { id name groups { group { name } } } } } }`,
		check: wantList("users", "name", "victor")},
	{field: "Query.user", as: otherAdmin, name: "cannot find alice by id",
		query: `query($id: ID!) { user(id: $id) { id name } }`, vars: map[string]any{"id": ref("user alice")}, code: notFound},
	{field: "Query.user", as: otherAdmin, name: "cannot find alice by name",
		query: `query($id: ID!) { user(id: $id) { id name } }`, vars: map[string]any{"id": "alice"}, code: notFound},
	{field: "Query.user", as: victor, name: "cannot find alice of another group",
		query: `query($id: ID!) { user(id: $id) { id name } }`, vars: map[string]any{"id": "alice"}, code: notFound},
	{field: "Query.groups", as: otherAdmin, name: "lists only the groups of their tenant",
		query: `{ groups { edges { node { id name members { user { name } } } } } }`,
		check: wantList("groups", "name", "other-team")},
	{field: "Query.groups", as: victor, name: "lists only group vision",
		query: `{ groups { edges { node { id name members { user { name } } policy { id } } } } }`,
		check: wantList("groups", "name", "vision")},
	{field: "Query.group", as: otherAdmin, name: "cannot find ml-research by id",
		query: `query($id: ID!) { group(id: $id) { id name } }`, vars: map[string]any{"id": ref("group ml-research")}, code: notFound},
	{field: "Query.group", as: otherAdmin, name: "cannot find ml-research by name",
		query: `query($id: ID!) { group(id: $id) { id name } }`, vars: map[string]any{"id": "ml-research"}, code: notFound},
	{field: "Query.group", as: victor, name: "cannot find group ml-research",
		query: `query($id: ID!) { group(id: $id) { id name members { user { name } } } }`, vars: map[string]any{"id": "ml-research"}, code: notFound},
	{field: "Query.apiKeys", as: otherAdmin, name: "cannot list alice's keys",
		query: `query($u: ID) { apiKeys(user: $u) { edges { node { id prefix } } } }`, vars: map[string]any{"u": ref("user alice")}, code: notFound},
	{field: "Query.apiKeys", as: otherAdmin, name: "lists only their own keys",
		query: `{ apiKeys { edges { node { id prefix user { name } } } } }`,
		check: func(r *report, f *fixture, res *gqlResult) {
			ns := nodes(res.Data, "apiKeys")
			if len(ns) == 0 {
				r.errorf("olga has no API keys listed, want her bootstrap key")
			}
			for _, n := range ns {
				if u := str(n, "user", "name"); u != "olga" {
					r.errorf("olga's key list holds a key of %q", u)
				}
			}
		}},
	{field: "Query.apiKeys", as: victor, name: "cannot list alice's keys",
		query: `query($u: ID) { apiKeys(user: $u) { edges { node { id prefix } } } }`, vars: map[string]any{"u": "alice"}, code: forbidden},
	{field: "Query.tenants", as: otherAdmin, name: "cannot list tenants",
		query: `{ tenants { edges { node { id name } } } }`, code: forbidden},
	{field: "Query.tenants", as: victor, name: "cannot list tenants",
		query: `{ tenants { edges { node { id name } } } }`, code: forbidden},
	{field: "Query.gpuClasses", as: otherAdmin, name: "lists no GPU class of tenant default",
		query: `{ gpuClasses { edges { node { id name } } } }`, check: wantEmpty("gpuClasses")},
	{field: "Query.gpuClasses", as: victor, name: "lists the tenant's GPU classes, which are open to every user",
		query: `{ gpuClasses { edges { node { id name } } } }`, check: wantList("gpuClasses", "name", "a100-80gb", "h100")},
	{field: "Query.gpuClass", as: otherAdmin, name: "cannot find h100 by id",
		query: `query($id: ID!) { gpuClass(id: $id) { id name } }`, vars: map[string]any{"id": ref("class h100")}, code: notFound},
	{field: "Query.gpuClass", as: otherAdmin, name: "cannot find h100 by name",
		query: `query($id: ID!) { gpuClass(id: $id) { id name } }`, vars: map[string]any{"id": "h100"}, code: notFound},
	{field: "Query.gpuClass", as: victor, name: "finds h100 of their own tenant",
		query: `query($id: ID!) { gpuClass(id: $id) { id name } }`, vars: map[string]any{"id": "h100"},
		check: func(r *report, f *fixture, res *gqlResult) {
			if got := str(res.Data, "gpuClass", "id"); got != f.ids["class h100"] {
				r.errorf("gpuClass h100 has id %q, want %q", got, f.ids["class h100"])
			}
		}},
	{field: "Query.pools", as: otherAdmin, name: "lists no pool of tenant default",
		query: `{ pools { edges { node { id name executionPriority { name } } } } }`, check: wantEmpty("pools")},
	{field: "Query.pools", as: victor, name: "lists every pool but no compute resource of ml-research through them",
		query: `{ pools { edges { node { name executionPriority { name queuingPriority { id name group { name } } } } } } }`,
		check: all(wantList("pools", "name", "bare-metal", "cloud-burst", "onprem-k8s", "slurm-a100"), onlyVision)},
	{field: "Query.pool", as: otherAdmin, name: "cannot find onprem-k8s by id",
		query: `query($id: ID!) { pool(id: $id) { id name } }`, vars: map[string]any{"id": ref("pool onprem-k8s")}, code: notFound},
	{field: "Query.pool", as: otherAdmin, name: "cannot find onprem-k8s by name",
		query: `query($id: ID!) { pool(id: $id) { id name } }`, vars: map[string]any{"id": "onprem-k8s"}, code: notFound},
	{field: "Query.pool", as: victor, name: "sees no compute resource of ml-research through a pool",
		query: `query($id: ID!) { pool(id: $id) { name executionPriority { queuingPriority { id name group { name } } } } }`,
		vars:  map[string]any{"id": "onprem-k8s"}, check: onlyVision},
	{field: "Query.profiles", as: otherAdmin, name: "lists no profile of tenant default",
		query: `{ profiles { edges { node { id name pools { name } } } } }`, check: wantEmpty("profiles")},
	{field: "Query.profiles", as: victor, name: "sees only vision's compute resources in queuing priorities",
		query: `{ profiles { edges { node { name queuingPriority { id name group { name } policy { id } } } } } }`,
		check: onlyVision},
	{field: "Query.profile", as: otherAdmin, name: "cannot find one-gpu by id",
		query: `query($id: ID!) { profile(id: $id) { id name } }`, vars: map[string]any{"id": ref("profile one-gpu")}, code: notFound},
	{field: "Query.profile", as: otherAdmin, name: "cannot find one-gpu by name",
		query: `query($id: ID!) { profile(id: $id) { id name } }`, vars: map[string]any{"id": "one-gpu"}, code: notFound},
	{field: "Query.profile", as: victor, name: "sees only vision's compute resource on one-gpu",
		query: `query($id: ID!) { profile(id: $id) { name queuingPriority { id name group { name } } } }`,
		vars:  map[string]any{"id": "one-gpu"}, check: onlyVision},
	{field: "Query.resourcePolicies", as: otherAdmin, name: "lists no policy of tenant default",
		query: `{ resourcePolicies { edges { node { id group { name } } } } }`, check: wantEmpty("resourcePolicies")},
	{field: "Query.resourcePolicies", as: victor, name: "lists only vision's policy",
		query: `{ resourcePolicies { edges { node { id group { name } computeResources { id name } } } } }`,
		check: func(r *report, f *fixture, res *gqlResult) {
			ns := nodes(res.Data, "resourcePolicies")
			if len(ns) != 1 || str(ns[0], "id") != f.ids["policy vision"] {
				r.errorf("resourcePolicies = %v, want only vision's", ns)
			}
		}},
	{field: "Query.resourcePolicy", as: otherAdmin, name: "cannot find ml-research's policy by id",
		query: `query($id: ID!) { resourcePolicy(id: $id) { id } }`, vars: map[string]any{"id": ref("policy ml-research")}, code: notFound},
	{field: "Query.resourcePolicy", as: otherAdmin, name: "cannot find ml-research's policy by group name",
		query: `query($id: ID!) { resourcePolicy(id: $id) { id } }`, vars: map[string]any{"id": "ml-research"}, code: notFound},
	{field: "Query.resourcePolicy", as: victor, name: "cannot find ml-research's policy by group name",
		query: `query($id: ID!) { resourcePolicy(id: $id) { id limitGpus } }`, vars: map[string]any{"id": "ml-research"}, code: notFound},
	{field: "Query.resourcePolicy", as: victor, name: "cannot find ml-research's policy by id",
		query: `query($id: ID!) { resourcePolicy(id: $id) { id limitGpus } }`, vars: map[string]any{"id": ref("policy ml-research")}, code: notFound},
	{field: "Query.computeResources", as: otherAdmin, name: "lists no compute resource of tenant default",
		query: `{ computeResources { edges { node { id name } } } }`, check: wantEmpty("computeResources")},
	{field: "Query.computeResources", as: victor, name: "lists only vision's compute resources",
		query: `{ computeResources { edges { node { id name group { name } queuedTasks } } } }`,
		check: func(r *report, f *fixture, res *gqlResult) {
			ns := nodes(res.Data, "computeResources")
			if len(ns) != 3 {
				r.errorf("victor sees %d compute resources, want vision's 3", len(ns))
			}
			for _, n := range ns {
				if g := str(n, "group", "name"); g != "vision" {
					r.errorf("victor sees compute resource %q of group %q", str(n, "name"), g)
				}
			}
		}},
	{field: "Query.computeResource", as: otherAdmin, name: "cannot find ml-research's 1 GPU",
		query: `query($id: ID!) { computeResource(id: $id) { id name } }`, vars: map[string]any{"id": ref("cr ml-research/1 GPU")}, code: notFound},
	{field: "Query.computeResource", as: victor, name: "cannot find ml-research's 1 GPU",
		query: `query($id: ID!) { computeResource(id: $id) { id name queuedTasks } }`, vars: map[string]any{"id": ref("cr ml-research/1 GPU")}, code: notFound},
	{field: "Query.estateWarnings", as: otherAdmin, name: "reads only their own tenant's warnings",
		query: `{ estateWarnings { code object message } }`},
	{field: "Query.estateWarnings", as: victor, name: "may not read estate warnings",
		query: `{ estateWarnings { code object message } }`, code: forbidden},
	{field: "Query.exportEstate", as: otherAdmin, name: "exports only their own tenant",
		query: `{ exportEstate }`,
		check: func(r *report, f *fixture, res *gqlResult) {
			if !strings.Contains(str(res.Data, "exportEstate"), "other-team") {
				r.errorf("olga's export lacks her group other-team:\n%s", str(res.Data, "exportEstate"))
			}
		}},
	{field: "Query.exportEstate", as: victor, name: "may not export the estate",
		query: `{ exportEstate }`, code: forbidden},
	{field: "Query.projects", as: otherAdmin, name: "lists only their own projects",
		query: `{ projects { edges { node { id name group { name } } } } }`, check: wantList("projects", "name", "other-project")},
	{field: "Query.projects", as: victor, name: "lists vision's and open projects, not fraud-models",
		query: `{ projects { edges { node { id name group { name } } } } }`, check: wantList("projects", "name", "shared-eval", "vision-detect")},
	{field: "Query.project", as: otherAdmin, name: "cannot find fraud-models by id",
		query: `query($id: ID!) { project(id: $id) { id name } }`, vars: map[string]any{"id": ref("project fraud-models")}, code: notFound},
	{field: "Query.project", as: otherAdmin, name: "cannot find fraud-models by name",
		query: `query($id: ID!) { project(id: $id) { id name } }`, vars: map[string]any{"id": "fraud-models"}, code: notFound},
	{field: "Query.project", as: victor, name: "cannot find fraud-models of ml-research",
		query: `query($id: ID!) { project(id: $id) { id name outputDestination } }`, vars: map[string]any{"id": "fraud-models"}, code: notFound},
	{field: "Query.tasks", as: otherAdmin, name: "lists no task of tenant default",
		query: `{ tasks { edges { node ` + taskFields + ` } } }`, check: wantEmpty("tasks")},
	{field: "Query.tasks", as: otherAdmin, name: "cannot filter tasks by fraud-models",
		query: `{ tasks(filter: {project: "fraud-models"}) { edges { node { id } } } }`, code: notFound},
	{field: "Query.tasks", as: otherAdmin, name: "cannot filter tasks by ml-research's compute resource",
		query: `query($cr: ID) { tasks(filter: {computeResource: $cr}) { edges { node { id } } } }`,
		vars:  map[string]any{"cr": ref("cr ml-research/1 GPU")}, code: notFound},
	{field: "Query.tasks", as: otherMember, name: "lists no task of tenant default",
		query: `{ tasks { edges { node ` + taskFields + ` } } }`, check: wantEmpty("tasks")},
	{field: "Query.tasks", as: victor, name: "does not list alice's task",
		query: `{ tasks { edges { node ` + taskFields + ` } } }`, check: wantEmpty("tasks")},
	{field: "Query.tasks", as: victor, name: "cannot filter tasks by group ml-research",
		query: `{ tasks(filter: {group: "ml-research"}) { edges { node { id } } } }`, code: notFound},
	{field: "Query.tasks", as: victor, name: "cannot filter tasks by project fraud-models",
		query: `{ tasks(filter: {project: "fraud-models"}) { edges { node { id } } } }`, code: notFound},
	{field: "Query.tasks", as: victor, name: "cannot filter tasks by ml-research's compute resource",
		query: `query($cr: ID) { tasks(filter: {computeResource: $cr}) { edges { node { id } } } }`,
		vars:  map[string]any{"cr": ref("cr ml-research/1 GPU")}, code: notFound},
	{field: "Query.task", as: otherAdmin, name: "cannot read alice's task",
		query: `query($id: ID!) { task(id: $id) ` + taskFields + ` }`, vars: map[string]any{"id": ref("task")}, code: notFound},
	{field: "Query.task", as: otherMember, name: "cannot read alice's task",
		query: `query($id: ID!) { task(id: $id) ` + taskFields + ` }`, vars: map[string]any{"id": ref("task")}, code: notFound},
	{field: "Query.task", as: victor, name: "cannot read alice's task",
		query: `query($id: ID!) { task(id: $id) ` + taskFields + ` }`, vars: map[string]any{"id": ref("task")}, code: notFound},
	// ---- The engine, the policy view and the usage ledger ------------------
	{field: "Query.engine", as: otherAdmin, name: "reads their own tenant's engine",
		query: `{ engine { enabled since by } }`},
	{field: "Query.engine", as: victor, name: "reads the tenant's engine status",
		query: `{ engine { enabled } }`},
	{field: "Mutation.setEngineEnabled", as: otherAdmin, name: "changes only their own tenant's engine",
		query: `mutation { setEngineEnabled(enabled: true) { enabled } }`},
	{field: "Mutation.setEngineEnabled", as: victor, name: "may not disable the engine",
		query: `mutation { setEngineEnabled(enabled: false) { enabled } }`, code: forbidden},
	{field: "Query.policyView", as: otherAdmin, name: "sees no policy of tenant default",
		query: `{ policyView { group { name } heldGpus } }`, check: wantPlainList("policyView", []string{"group", "name"})},
	{field: "Query.policyView", as: otherAdmin, name: "cannot ask for ml-research's policy",
		query: `{ policyView(group: "ml-research") { heldGpus } }`, code: notFound},
	{field: "Query.policyView", as: victor, name: "sees vision's policy and not ml-research's",
		query: `{ policyView { group { name } heldGpus borrowedGpus waitingTasks } }`, check: wantPlainList("policyView", []string{"group", "name"}, "vision")},
	{field: "Query.policyView", as: victor, name: "cannot ask for ml-research's policy",
		query: `{ policyView(group: "ml-research") { heldGpus } }`, code: notFound},
	{field: "Query.usage", as: otherAdmin, name: "sees no usage of tenant default",
		query: `{ usage(input: {from: "2000-01-01T00:00:00Z", to: "2100-01-01T00:00:00Z", groupBy: [GROUP, USER, POOL, PROJECT]}) { rows { keys { name } gpuHours } } }`,
		check: wantPlainList("usage.rows", nil)},
	{field: "Query.usage", as: victor, name: "sees none of ml-research's usage",
		query: `{ usage(input: {from: "2000-01-01T00:00:00Z", to: "2100-01-01T00:00:00Z", groupBy: [GROUP, USER]}) { rows { keys { name } gpuHours } } }`,
		check: wantPlainList("usage.rows", nil)},
	{field: "Query.usage", as: victor, name: "cannot filter by ml-research",
		query: `{ usage(input: {from: "2000-01-01T00:00:00Z", to: "2100-01-01T00:00:00Z", group: "ml-research"}) { rows { gpuHours } } }`, code: notFound},

	// ---- Workers and the vault -------------------------------------------
	{field: "Query.workers", as: otherAdmin, name: "lists none of tenant default's workers",
		query: `{ workers { id hostname pool { name } } }`, check: wantPlainList("workers", []string{"hostname"})},
	{field: "Query.workers", as: victor, name: "lists the tenant's workers without ml-research's tasks",
		query: `{ workers { hostname tasks { id name } } }`, check: wantPlainList("workers", []string{"hostname"}, "gpu-host-7")},
	{field: "Query.autoscalers", as: otherAdmin, name: "lists none of tenant default's autoscalers",
		query: `{ autoscalers { id name } }`, check: wantPlainList("autoscalers", []string{"name"})},
	{field: "Query.autoscalers", as: victor, name: "may not list autoscalers",
		query: `{ autoscalers { id name } }`, code: forbidden},
	{field: "Mutation.createAutoscaler", as: otherAdmin, name: "cannot make an autoscaler for cloud-burst",
		query: `mutation($p: ID!) { createAutoscaler(input: {name: "mine", pool: $p, provider: LOCAL, instanceTypes: [{name: "x", gpus: 8}], maxInstances: 4}) { id } }`,
		vars:  map[string]any{"p": ref("pool cloud-burst")}, code: notFound},
	{field: "Mutation.createAutoscaler", as: victor, name: "may not make autoscalers",
		query: `mutation { createAutoscaler(input: {name: "mine", pool: "cloud-burst", provider: LOCAL, instanceTypes: [{name: "x", gpus: 8}], maxInstances: 4}) { id } }`,
		code:  forbidden},
	{field: "Mutation.updateAutoscaler", as: otherAdmin, name: "cannot change the burst autoscaler",
		query: `mutation($id: ID!, $p: ID!) { updateAutoscaler(id: $id, input: {name: "burst", pool: $p, provider: LOCAL, instanceTypes: [{name: "x", gpus: 8}], maxInstances: 8}) { id } }`,
		vars:  map[string]any{"id": ref("autoscaler burst"), "p": ref("pool cloud-burst")}, code: notFound},
	{field: "Mutation.updateAutoscaler", as: victor, name: "may not change autoscalers",
		query: `mutation($id: ID!) { updateAutoscaler(id: $id, input: {name: "burst", pool: "cloud-burst", provider: LOCAL, instanceTypes: [{name: "x", gpus: 8}], maxInstances: 8}) { id } }`,
		vars:  map[string]any{"id": ref("autoscaler burst")}, code: forbidden},
	{field: "Mutation.deleteAutoscaler", as: otherAdmin, name: "cannot delete the burst autoscaler",
		query: `mutation($id: ID!) { deleteAutoscaler(id: $id) }`, vars: map[string]any{"id": ref("autoscaler burst")}, code: notFound},
	{field: "Mutation.deleteAutoscaler", as: victor, name: "may not delete autoscalers",
		query: `mutation($id: ID!) { deleteAutoscaler(id: $id) }`, vars: map[string]any{"id": ref("autoscaler burst")}, code: forbidden},
	{field: "Query.workerCredentials", as: otherAdmin, name: "lists none of tenant default's worker credentials",
		query: `{ workerCredentials { id name } }`, check: wantPlainList("workerCredentials", []string{"name"})},
	{field: "Query.workerCredentials", as: victor, name: "may not list worker credentials",
		query: `{ workerCredentials { id name } }`, code: forbidden},
	{field: "Mutation.createWorkerCredential", as: otherAdmin, name: "cannot make a credential for onprem-k8s",
		query: `mutation($p: ID!) { createWorkerCredential(pool: $p) { secret } }`, vars: map[string]any{"p": ref("pool onprem-k8s")}, code: notFound},
	{field: "Mutation.createWorkerCredential", as: victor, name: "may not make worker credentials",
		query: `mutation { createWorkerCredential(pool: "onprem-k8s") { secret } }`, code: forbidden},
	{field: "Mutation.revokeWorkerCredential", as: otherAdmin, name: "cannot revoke rack-7's credential",
		query: `mutation($id: ID!) { revokeWorkerCredential(id: $id) { id } }`, vars: map[string]any{"id": ref("wcred rack-7")}, code: notFound},
	{field: "Mutation.revokeWorkerCredential", as: victor, name: "may not revoke worker credentials",
		query: `mutation($id: ID!) { revokeWorkerCredential(id: $id) { id } }`, vars: map[string]any{"id": ref("wcred rack-7")}, code: forbidden},
	{field: "Query.secrets", as: otherAdmin, name: "cannot list fraud-models' secrets",
		query: `{ secrets(scope: PROJECT, owner: "fraud-models") { name } }`, code: notFound},
	{field: "Query.secrets", as: victor, name: "cannot list fraud-models' secrets",
		query: `{ secrets(scope: PROJECT, owner: "fraud-models") { name } }`, code: notFound},
	{field: "Query.secrets", as: victor, name: "cannot list ml-research's secrets",
		query: `{ secrets(scope: GROUP, owner: "ml-research") { name } }`, code: notFound},
	{field: "Mutation.setSecret", as: otherAdmin, name: "cannot set a secret of fraud-models",
		query: `mutation { setSecret(scope: PROJECT, owner: "fraud-models", name: "HF_TOKEN", value: "overwritten") { name } }`, code: notFound},
	{field: "Mutation.setSecret", as: victor, name: "cannot set a secret of fraud-models",
		query: `mutation { setSecret(scope: PROJECT, owner: "fraud-models", name: "HF_TOKEN", value: "overwritten") { name } }`, code: notFound},
	{field: "Mutation.deleteSecret", as: otherAdmin, name: "cannot delete a secret of fraud-models",
		query: `mutation { deleteSecret(scope: PROJECT, owner: "fraud-models", name: "HF_TOKEN") }`, code: notFound},
	{field: "Mutation.deleteSecret", as: victor, name: "cannot delete a secret of fraud-models",
		query: `mutation { deleteSecret(scope: PROJECT, owner: "fraud-models", name: "HF_TOKEN") }`, code: notFound},

	{field: "Query.auditLog", as: otherAdmin, name: "reads only their own tenant's audit trail",
		query: `{ auditLog(first: 500) { edges { node { id actor action objectKind objectId objectName detail } } } }`,
		check: func(r *report, f *fixture, res *gqlResult) {
			if len(nodes(res.Data, "auditLog")) == 0 {
				r.errorf("olga's audit trail is empty, want her own changes")
			}
		}},
	{field: "Query.auditLog", as: otherAdmin, name: "finds nothing about alice's task",
		query: `query($id: String) { auditLog(filter: {objectId: $id}) { edges { node { id detail } } } }`,
		vars:  map[string]any{"id": ref("task")}, check: wantEmpty("auditLog")},
	{field: "Query.auditLog", as: otherAdmin, name: "cannot filter by alice as actor",
		query: `{ auditLog(filter: {actor: "alice"}) { edges { node { id } } } }`, code: notFound},
	{field: "Query.auditLog", as: victor, name: "may not read the audit trail",
		query: `{ auditLog { edges { node { id } } } }`, code: forbidden},

	// ---- GPU classes, pools, profiles -------------------------------------
	{field: "Mutation.createGPUClass", as: thirdAdmin, name: "creates their own GPU class named h100",
		query: `mutation { createGPUClass(input: {name: "h100", memoryGb: 80, pricePerGpuHour: 9.99}) { gpuClass { id name pricePerGpuHour } } }`,
		check: wantNewID("class h100", "createGPUClass", "gpuClass")},
	{field: "Mutation.createGPUClass", as: victor, name: "may not create GPU classes",
		query: `mutation { createGPUClass(input: {name: "v100", memoryGb: 16}) { gpuClass { id } } }`, code: forbidden},
	{field: "Mutation.updateGPUClass", as: otherAdmin, name: "cannot change h100 by id",
		query: `mutation($id: ID!) { updateGPUClass(id: $id, input: {pricePerGpuHour: 0.01}) { gpuClass { id } } }`,
		vars:  map[string]any{"id": ref("class h100")}, code: notFound},
	{field: "Mutation.updateGPUClass", as: otherAdmin, name: "cannot change h100 by name",
		query: `mutation { updateGPUClass(id: "h100", input: {pricePerGpuHour: 0.01}) { gpuClass { id } } }`, code: notFound},
	{field: "Mutation.updateGPUClass", as: victor, name: "may not change h100",
		query: `mutation { updateGPUClass(id: "h100", input: {pricePerGpuHour: 0.01}) { gpuClass { id } } }`, code: forbidden},
	{field: "Mutation.deleteGPUClass", as: otherAdmin, name: "cannot delete a100-80gb",
		query: `mutation($id: ID!) { deleteGPUClass(id: $id) { id } }`, vars: map[string]any{"id": ref("class a100-80gb")}, code: notFound},
	{field: "Mutation.deleteGPUClass", as: victor, name: "may not delete GPU classes",
		query: `mutation($id: ID!) { deleteGPUClass(id: $id) { id } }`, vars: map[string]any{"id": ref("class a100-80gb")}, code: forbidden},
	{field: "Mutation.createPool", as: otherAdmin, name: "cannot create a pool of tenant default's GPU class",
		query: `mutation($c: ID) { createPool(input: {name: "stolen", kind: KUBERNETES, capacityGpus: 4, gpuClass: $c}) { pool { id } } }`,
		vars:  map[string]any{"c": ref("class h100")}, code: badInput},
	{field: "Mutation.createPool", as: thirdAdmin, name: "creates their own pool onprem-k8s of their own h100",
		query: `mutation { createPool(input: {name: "onprem-k8s", kind: KUBERNETES, capacityGpus: 4, gpuClass: "h100"}) { pool { id name gpuClass { id } } } }`,
		check: all(wantNewID("pool onprem-k8s", "createPool", "pool"), wantNewID("class h100", "createPool", "pool", "gpuClass"))},
	{field: "Mutation.createPool", as: victor, name: "may not create pools",
		query: `mutation { createPool(input: {name: "mine", kind: KUBERNETES, capacityGpus: 4, gpuClass: "h100"}) { pool { id } } }`, code: forbidden},
	{field: "Mutation.updatePool", as: otherAdmin, name: "cannot change onprem-k8s by id",
		query: `mutation($id: ID!) { updatePool(id: $id, input: {capacityGpus: 1}) { pool { id } } }`,
		vars:  map[string]any{"id": ref("pool onprem-k8s")}, code: notFound},
	{field: "Mutation.updatePool", as: otherAdmin, name: "cannot change slurm-a100 by name",
		query: `mutation { updatePool(id: "slurm-a100", input: {capacityGpus: 1}) { pool { id } } }`, code: notFound},
	{field: "Mutation.updatePool", as: victor, name: "may not change pools",
		query: `mutation { updatePool(id: "onprem-k8s", input: {capacityGpus: 1}) { pool { id } } }`, code: forbidden},
	{field: "Mutation.deletePool", as: otherAdmin, name: "cannot delete cloud-burst",
		query: `mutation($id: ID!) { deletePool(id: $id) { id } }`, vars: map[string]any{"id": ref("pool cloud-burst")}, code: notFound},
	{field: "Mutation.deletePool", as: victor, name: "may not delete pools",
		query: `mutation { deletePool(id: "cloud-burst") { id } }`, code: forbidden},
	{field: "Mutation.createProfile", as: otherAdmin, name: "cannot create a profile on tenant default's pool",
		query: `mutation($p: ID!) { createProfile(input: {name: "stolen", size: "1", pools: [$p]}) { profile { id } } }`,
		vars:  map[string]any{"p": ref("pool onprem-k8s")}, code: badInput},
	{field: "Mutation.createProfile", as: thirdAdmin, name: "creates their own profile one-gpu on their own onprem-k8s",
		query: `mutation { createProfile(input: {name: "one-gpu", size: "1", pools: ["onprem-k8s"]}) { profile { id pools { id } } } }`,
		check: all(wantNewID("profile one-gpu", "createProfile", "profile"), wantNewID("pool onprem-k8s", "createProfile", "profile", "pools", 0))},
	{field: "Mutation.createProfile", as: victor, name: "may not create profiles",
		query: `mutation { createProfile(input: {name: "mine", size: "1", pools: ["onprem-k8s"]}) { profile { id } } }`, code: forbidden},
	{field: "Mutation.updateProfile", as: otherAdmin, name: "cannot change one-gpu by id",
		query: `mutation($id: ID!) { updateProfile(id: $id, input: {timeWeight: 0}) { profile { id } } }`,
		vars:  map[string]any{"id": ref("profile one-gpu")}, code: notFound},
	{field: "Mutation.updateProfile", as: otherAdmin, name: "cannot change eight-gpus by name",
		query: `mutation { updateProfile(id: "eight-gpus", input: {timeWeight: 0}) { profile { id } } }`, code: notFound},
	{field: "Mutation.updateProfile", as: victor, name: "may not change profiles",
		query: `mutation { updateProfile(id: "one-gpu", input: {timeWeight: 0}) { profile { id } } }`, code: forbidden},
	{field: "Mutation.deleteProfile", as: otherAdmin, name: "cannot delete multi-node-2x8",
		query: `mutation($id: ID!) { deleteProfile(id: $id) { id } }`, vars: map[string]any{"id": ref("profile multi-node-2x8")}, code: notFound},
	{field: "Mutation.deleteProfile", as: victor, name: "may not delete profiles",
		query: `mutation { deleteProfile(id: "multi-node-2x8") { id } }`, code: forbidden},

	// ---- Groups, policies, compute resources -----------------------------
	{field: "Mutation.createGroup", as: thirdAdmin, name: "creates their own group named ml-research",
		query: `mutation { createGroup(input: {name: "ml-research"}) { group { id name } } }`,
		check: wantNewID("group ml-research", "createGroup", "group")},
	{field: "Mutation.createGroup", as: victor, name: "may not create groups",
		query: `mutation { createGroup(input: {name: "vision-2"}) { group { id } } }`, code: forbidden},
	{field: "Mutation.updateGroup", as: otherAdmin, name: "cannot rename ml-research by id",
		query: `mutation($id: ID!) { updateGroup(id: $id, input: {name: "pwned"}) { group { id } } }`,
		vars:  map[string]any{"id": ref("group ml-research")}, code: notFound},
	{field: "Mutation.updateGroup", as: otherAdmin, name: "cannot rename ml-research by name",
		query: `mutation { updateGroup(id: "ml-research", input: {name: "pwned"}) { group { id } } }`, code: notFound},
	{field: "Mutation.updateGroup", as: victor, name: "may not rename ml-research",
		query: `mutation { updateGroup(id: "ml-research", input: {name: "pwned"}) { group { id } } }`, code: forbidden},
	{field: "Mutation.deleteGroup", as: otherAdmin, name: "cannot delete nlp",
		query: `mutation($id: ID!) { deleteGroup(id: $id) { id } }`, vars: map[string]any{"id": ref("group nlp")}, code: notFound},
	{field: "Mutation.deleteGroup", as: victor, name: "may not delete ml-research",
		query: `mutation { deleteGroup(id: "ml-research") { id } }`, code: forbidden},
	{field: "Mutation.createResourcePolicy", as: otherAdmin, name: "cannot give ml-research a policy in their tenant",
		query: `mutation($g: ID) { createResourcePolicy(input: {group: $g, limitGpus: 4}) { resourcePolicy { id } } }`,
		vars:  map[string]any{"g": ref("group ml-research")}, code: badInput},
	{field: "Mutation.createResourcePolicy", as: thirdAdmin, name: "gives their own ml-research a policy",
		query: `mutation { createResourcePolicy(input: {group: "ml-research", limitGpus: 4}) { resourcePolicy { id group { id } } } }`,
		check: all(wantNewID("policy ml-research", "createResourcePolicy", "resourcePolicy"),
			wantNewID("group ml-research", "createResourcePolicy", "resourcePolicy", "group"))},
	{field: "Mutation.createResourcePolicy", as: victor, name: "may not create policies",
		query: `mutation { createResourcePolicy(input: {group: "ml-research", limitGpus: 4}) { resourcePolicy { id } } }`, code: forbidden},
	{field: "Mutation.updateResourcePolicy", as: otherAdmin, name: "cannot change ml-research's policy by id",
		query: `mutation($id: ID!) { updateResourcePolicy(id: $id, input: {limitGpus: 999}) { resourcePolicy { id } } }`,
		vars:  map[string]any{"id": ref("policy ml-research")}, code: notFound},
	{field: "Mutation.updateResourcePolicy", as: otherAdmin, name: "cannot change ml-research's policy by group name",
		query: `mutation { updateResourcePolicy(id: "ml-research", input: {limitGpus: 999}) { resourcePolicy { id } } }`, code: notFound},
	{field: "Mutation.updateResourcePolicy", as: victor, name: "may not raise ml-research's limit",
		query: `mutation { updateResourcePolicy(id: "ml-research", input: {limitGpus: 999}) { resourcePolicy { id } } }`, code: forbidden},
	{field: "Mutation.deleteResourcePolicy", as: otherAdmin, name: "cannot delete nlp's policy",
		query: `mutation($id: ID!) { deleteResourcePolicy(id: $id) { id } }`, vars: map[string]any{"id": ref("policy nlp")}, code: notFound},
	{field: "Mutation.deleteResourcePolicy", as: victor, name: "may not delete ml-research's policy",
		query: `mutation { deleteResourcePolicy(id: "ml-research") { id } }`, code: forbidden},
	{field: "Mutation.connectProfile", as: otherAdmin, name: "cannot connect one-gpu to ml-research by name",
		query: `mutation { connectProfile(input: {policy: "ml-research", profile: "one-gpu"}) { computeResource { id } } }`, code: badInput},
	{field: "Mutation.connectProfile", as: otherAdmin, name: "cannot connect tenant default's profile to its policy by id",
		query: `mutation($pol: ID!, $pr: ID!) { connectProfile(input: {policy: $pol, profile: $pr}) { computeResource { id } } }`,
		vars:  map[string]any{"pol": ref("policy nlp"), "pr": ref("profile half-gpu")}, code: badInput},
	{field: "Mutation.connectProfile", as: thirdAdmin, name: "connects their own one-gpu to their own ml-research as 1 GPU",
		query: `mutation { connectProfile(input: {policy: "ml-research", profile: "one-gpu", name: "1 GPU"}) { computeResource { id name group { id } profile { id } } } }`,
		check: all(wantNewID("cr ml-research/1 GPU", "connectProfile", "computeResource"),
			wantNewID("group ml-research", "connectProfile", "computeResource", "group"),
			wantNewID("profile one-gpu", "connectProfile", "computeResource", "profile"))},
	{field: "Mutation.connectProfile", as: victor, name: "may not connect a profile to vision's policy",
		query: `mutation { connectProfile(input: {policy: "vision", profile: "multi-node-2x8"}) { computeResource { id } } }`, code: forbidden},
	{field: "Mutation.updateComputeResource", as: otherAdmin, name: "cannot rename ml-research's 1 GPU",
		query: `mutation($id: ID!) { updateComputeResource(id: $id, input: {name: "pwned"}) { computeResource { id } } }`,
		vars:  map[string]any{"id": ref("cr ml-research/1 GPU")}, code: notFound},
	{field: "Mutation.updateComputeResource", as: victor, name: "may not rename ml-research's 1 GPU",
		query: `mutation($id: ID!) { updateComputeResource(id: $id, input: {name: "pwned"}) { computeResource { id } } }`,
		vars:  map[string]any{"id": ref("cr ml-research/1 GPU")}, code: forbidden},
	{field: "Mutation.disconnectProfile", as: otherAdmin, name: "cannot disconnect ml-research's GPU eighth",
		query: `mutation($id: ID!) { disconnectProfile(computeResource: $id) { id } }`,
		vars:  map[string]any{"id": ref("cr ml-research/GPU eighth")}, code: notFound},
	{field: "Mutation.disconnectProfile", as: victor, name: "may not disconnect ml-research's GPU eighth",
		query: `mutation($id: ID!) { disconnectProfile(computeResource: $id) { id } }`,
		vars:  map[string]any{"id": ref("cr ml-research/GPU eighth")}, code: forbidden},
	{field: "Mutation.applyEstate", as: otherAdmin, name: "sees only creations in a dry run of tenant default's estate file",
		query: `mutation($doc: String!) { applyEstate(document: $doc, dryRun: true) { dryRun summary changes { action kind name } } }`,
		vars:  map[string]any{"doc": ref("estate file")},
		check: func(r *report, f *fixture, res *gqlResult) {
			cs, _ := path(res.Data, "applyEstate", "changes").([]any)
			if len(cs) < 20 {
				r.errorf("the dry run lists %d changes, want every object of the example as a creation", len(cs))
			}
			for _, c := range cs {
				if a := str(c, "action"); a != "CREATE" {
					r.errorf("the dry run would %s %s %s, which exists only in tenant default", a, str(c, "kind"), str(c, "name"))
				}
			}
		}},
	{field: "Mutation.applyEstate", as: otherAdmin, name: "cannot change ml-research's policy with an estate file",
		query: `mutation($doc: String!) { applyEstate(document: $doc) { summary } }`,
		vars:  map[string]any{"doc": "apiVersion: klique/v1\nkind: Estate\npolicies:\n  - group: ml-research\n    reservation: 0\n    limit: 1\n"},
		code:  badInput},
	{field: "Mutation.applyEstate", as: victor, name: "may not apply an estate file",
		query: `mutation($doc: String!) { applyEstate(document: $doc, dryRun: true) { summary } }`,
		vars:  map[string]any{"doc": "apiVersion: klique/v1\nkind: Estate\ngroups:\n  - name: ml-research\n    description: pwned\n"},
		code:  forbidden},

	// ---- Users, memberships, keys, tenants --------------------------------
	{field: "Mutation.createUser", as: otherAdmin, name: "cannot create a user in ml-research",
		query: `mutation($g: ID!) { createUser(input: {name: "mallory", groups: [{group: $g}]}) { id } }`,
		vars:  map[string]any{"g": ref("group ml-research")}, code: notFound},
	{field: "Mutation.createUser", as: thirdAdmin, name: "creates their own user named alice",
		query: `mutation { createUser(input: {name: "alice", groups: [{group: "ml-research"}]}) { id name groups { group { id } } } }`,
		check: all(wantNewID("user alice", "createUser"), wantNewID("group ml-research", "createUser", "groups", 0, "group"))},
	{field: "Mutation.createUser", as: victor, name: "may not create users",
		query: `mutation { createUser(input: {name: "mallory", groups: [{group: "ml-research"}]}) { id } }`, code: forbidden},
	{field: "Mutation.updateUser", as: otherAdmin, name: "cannot disable alice by id",
		query: `mutation($id: ID!) { updateUser(id: $id, input: {disabled: true}) { id } }`,
		vars:  map[string]any{"id": ref("user alice")}, code: notFound},
	{field: "Mutation.updateUser", as: otherAdmin, name: "cannot disable alice by name",
		query: `mutation { updateUser(id: "alice", input: {disabled: true}) { id } }`, code: notFound},
	{field: "Mutation.updateUser", as: victor, name: "may not make themselves an admin",
		query: `mutation { updateUser(id: "victor", input: {role: TENANT_ADMIN}) { id } }`, code: forbidden},
	{field: "Mutation.setGroupMember", as: otherAdmin, name: "cannot put their user in ml-research",
		query: `mutation($g: ID!) { setGroupMember(group: $g, user: "oscar", role: LEAD) { role } }`,
		vars:  map[string]any{"g": ref("group ml-research")}, code: notFound},
	{field: "Mutation.setGroupMember", as: otherAdmin, name: "cannot put alice in their group",
		query: `mutation($u: ID!) { setGroupMember(group: "other-team", user: $u) { role user { name } } }`,
		vars:  map[string]any{"u": ref("user alice")}, code: notFound},
	{field: "Mutation.setGroupMember", as: victor, name: "cannot join ml-research",
		query: `mutation { setGroupMember(group: "ml-research", user: "victor") { role } }`, code: notFound},
	{field: "Mutation.setGroupMember", as: victor, name: "may not add alice to vision",
		query: `mutation { setGroupMember(group: "vision", user: "alice") { role } }`, code: forbidden},
	{field: "Mutation.removeGroupMember", as: otherAdmin, name: "cannot take alice out of ml-research",
		query: `mutation($g: ID!, $u: ID!) { removeGroupMember(group: $g, user: $u) }`,
		vars:  map[string]any{"g": ref("group ml-research"), "u": ref("user alice")}, code: notFound},
	{field: "Mutation.removeGroupMember", as: victor, name: "cannot take alice out of ml-research",
		query: `mutation { removeGroupMember(group: "ml-research", user: "alice") }`, code: notFound},
	{field: "Mutation.createAPIKey", as: otherAdmin, name: "cannot create a key for alice",
		query: `mutation($u: ID) { createAPIKey(input: {user: $u}) { secret apiKey { id } } }`,
		vars:  map[string]any{"u": ref("user alice")}, code: notFound},
	{field: "Mutation.createAPIKey", as: otherAdmin, name: "cannot create a key scoped to fraud-models",
		query: `mutation($p: ID) { createAPIKey(input: {project: $p}) { secret apiKey { id } } }`,
		vars:  map[string]any{"p": ref("project fraud-models")}, code: notFound},
	{field: "Mutation.createAPIKey", as: victor, name: "may not create a key for alice",
		query: `mutation { createAPIKey(input: {user: "alice"}) { secret apiKey { id } } }`, code: forbidden},
	{field: "Mutation.createAPIKey", as: victor, name: "cannot create a key scoped to fraud-models of ml-research",
		query: `mutation { createAPIKey(input: {name: "probe", project: "fraud-models"}) { apiKey { id } } }`, code: notFound},
	{field: "Mutation.revokeAPIKey", as: otherAdmin, name: "cannot revoke alice's key",
		query: `mutation($id: ID!) { revokeAPIKey(id: $id) { id revokedAt } }`, vars: map[string]any{"id": ref("key alice")}, code: notFound},
	{field: "Mutation.revokeAPIKey", as: victor, name: "cannot revoke alice's key",
		query: `mutation($id: ID!) { revokeAPIKey(id: $id) { id revokedAt } }`, vars: map[string]any{"id": ref("key alice")}, code: notFound},
	{field: "Mutation.createTenant", as: otherAdmin, name: "may not create tenants",
		query: `mutation { createTenant(input: {name: "fourth"}) { secret tenant { id } } }`, code: forbidden},
	{field: "Mutation.createTenant", as: victor, name: "may not create tenants",
		query: `mutation { createTenant(input: {name: "fourth"}) { secret tenant { id } } }`, code: forbidden},

	// ---- Projects ---------------------------------------------------------
	{field: "Mutation.createProject", as: otherAdmin, name: "cannot create a project of ml-research",
		query: `mutation($g: ID) { createProject(input: {name: "stolen", group: $g}) { project { id } } }`,
		vars:  map[string]any{"g": ref("group ml-research")}, code: badInput},
	{field: "Mutation.createProject", as: thirdAdmin, name: "creates their own project fraud-models",
		query: `mutation { createProject(input: {name: "fraud-models", group: "ml-research"}) { project { id group { id } } } }`,
		check: all(wantNewID("project fraud-models", "createProject", "project"), wantNewID("group ml-research", "createProject", "project", "group"))},
	{field: "Mutation.createProject", as: victor, name: "may not create projects",
		query: `mutation { createProject(input: {name: "mine"}) { project { id } } }`, code: forbidden},
	{field: "Mutation.updateProject", as: otherAdmin, name: "cannot change fraud-models by id",
		query: `mutation($id: ID!) { updateProject(id: $id, input: {outputDestination: "s3://evil"}) { project { id } } }`,
		vars:  map[string]any{"id": ref("project fraud-models")}, code: notFound},
	{field: "Mutation.updateProject", as: otherAdmin, name: "cannot change fraud-models by name",
		query: `mutation { updateProject(id: "fraud-models", input: {outputDestination: "s3://evil"}) { project { id } } }`, code: notFound},
	{field: "Mutation.updateProject", as: victor, name: "may not change fraud-models",
		query: `mutation { updateProject(id: "fraud-models", input: {outputDestination: "s3://evil"}) { project { id } } }`, code: forbidden},
	{field: "Mutation.deleteProject", as: otherAdmin, name: "cannot delete shared-eval",
		query: `mutation($id: ID!) { deleteProject(id: $id) { id } }`, vars: map[string]any{"id": ref("project shared-eval")}, code: notFound},
	{field: "Mutation.deleteProject", as: victor, name: "may not delete shared-eval",
		query: `mutation { deleteProject(id: "shared-eval") { id } }`, code: forbidden},

	// ---- Tasks ------------------------------------------------------------
	{field: "Mutation.enqueueTask", as: otherAdmin, name: "cannot enqueue on ml-research's 1 GPU in fraud-models",
		query: `mutation($cr: ID!, $p: ID) { enqueueTask(input: {name: "x", computeResource: $cr, project: $p, command: ["true"]}) { id } }`,
		vars:  map[string]any{"cr": ref("cr ml-research/1 GPU"), "p": ref("project fraud-models")}, code: notFound},
	{field: "Mutation.enqueueTask", as: otherAdmin, name: "cannot enqueue on ml-research's 1 GPU in their own project",
		query: `mutation($cr: ID!) { enqueueTask(input: {name: "x", computeResource: $cr, project: "other-project", command: ["true"]}) { id } }`,
		vars:  map[string]any{"cr": ref("cr ml-research/1 GPU")}, code: notFound},
	{field: "Mutation.enqueueTask", as: otherMember, name: "cannot enqueue on 1 GPU in fraud-models by name",
		query: `mutation { enqueueTask(input: {name: "x", computeResource: "1 GPU", project: "fraud-models", command: ["true"]}) { id } }`, code: notFound},
	{field: "Mutation.enqueueTask", as: victor, name: "may not enqueue on ml-research's 1 GPU by id",
		query: `mutation($cr: ID!) { enqueueTask(input: {name: "x", computeResource: $cr, project: "shared-eval", command: ["true"]}) { id } }`,
		vars:  map[string]any{"cr": ref("cr ml-research/1 GPU")}, code: forbidden},
	{field: "Mutation.enqueueTask", as: victor, name: "may not enqueue on 1 GPU of group ml-research",
		query: `mutation { enqueueTask(input: {name: "x", computeResource: "1 GPU", group: "ml-research", project: "shared-eval", command: ["true"]}) { id } }`, code: forbidden},
	{field: "Mutation.enqueueTask", as: victor, name: "may not put work in fraud-models",
		query: `mutation { enqueueTask(input: {name: "x", computeResource: "1 GPU", project: "fraud-models", command: ["true"]}) { id } }`, code: forbidden},
	{field: "Mutation.enqueueTask", as: viewer, name: "may not enqueue tasks",
		query: `mutation { enqueueTask(input: {name: "x", computeResource: "1 GPU", project: "fraud-models", command: ["true"]}) { id } }`, code: forbidden},
	{field: "Mutation.abortTask", as: otherAdmin, name: "cannot abort alice's task",
		query: `mutation($id: ID!) { abortTask(id: $id, reason: "pwned") { id status } }`, vars: map[string]any{"id": ref("task")}, code: notFound},
	{field: "Mutation.abortTask", as: otherMember, name: "cannot abort alice's task",
		query: `mutation($id: ID!) { abortTask(id: $id) { id status } }`, vars: map[string]any{"id": ref("task")}, code: notFound},
	{field: "Mutation.abortTask", as: victor, name: "cannot abort alice's task",
		query: `mutation($id: ID!) { abortTask(id: $id) { id status } }`, vars: map[string]any{"id": ref("task")}, code: notFound},
	{field: "Mutation.abortTask", as: viewer, name: "may see but not abort alice's task",
		query: `mutation($id: ID!) { abortTask(id: $id) { id status } }`, vars: map[string]any{"id": ref("task")}, code: forbidden},
	{field: "Mutation.cloneTask", as: otherAdmin, name: "cannot clone alice's task",
		query: `mutation($id: ID!) { cloneTask(id: $id, project: "other-project") ` + taskFields + ` }`, vars: map[string]any{"id": ref("task")}, code: notFound},
	{field: "Mutation.cloneTask", as: victor, name: "cannot clone alice's task onto their own compute resource",
		query: `mutation($id: ID!) { cloneTask(id: $id, computeResource: "1 GPU", project: "shared-eval") ` + taskFields + ` }`,
		vars:  map[string]any{"id": ref("task")}, code: notFound},
	{field: "Mutation.cloneTask", as: viewer, name: "may see but not clone alice's task",
		query: `mutation($id: ID!) { cloneTask(id: $id) ` + taskFields + ` }`, vars: map[string]any{"id": ref("task")}, code: forbidden},

	// ---- The LLM gateway's configuration ----------------------------------
	{field: "Query.gateway", as: otherAdmin, name: "sees only their own, empty, gateway configuration",
		query: `{ gateway { providers { name keySecret } routes { name endpoints } models { name } aliases { name } budgets { project } rateLimits { name } entitlements { name } guardrails { deny } } }`,
		check: all(wantPlainList("gateway.providers", []string{"name"}), wantPlainList("gateway.routes", []string{"name"}),
			wantPlainList("gateway.models", []string{"name"}), wantPlainList("gateway.aliases", []string{"name"}),
			wantPlainList("gateway.budgets", []string{"project"}), wantPlainList("gateway.entitlements", []string{"name"}),
			noneOf("gateway", "OPENAI_API_KEY", "10.0.3.17", "(?i)"))},
	{field: "Query.gateway", as: victor, name: "may not read the gateway configuration",
		query: `{ gateway { providers { name keySecret } } }`, code: forbidden},
	{field: "Query.gateway", as: viewer, name: "may not read the gateway configuration",
		query: `{ gateway { routes { endpoints } } }`, code: forbidden},
	{field: "Query.llmAliases", as: otherAdmin, name: "sees none of tenant default's aliases",
		query: `{ llmAliases { name description rules { groups targets { model } } } }`, check: wantPlainList("llmAliases", []string{"name"})},
	{field: "Query.llmAliases", as: victor, name: "sees the names of chat and embed, not their rules",
		query: `{ llmAliases { name description rules { groups entitlements targets { model } fallbacks } guardrails { deny guardAlias } } }`,
		check: all(wantPlainList("llmAliases", []string{"name"}, "chat", "embed"), noneOf("llmAliases", "gpt-4o", "llama-3.1-70b", "(?i)"))},
	{field: "Mutation.putLLMProvider", as: thirdAdmin, name: "creates their own provider named openai",
		query: `mutation { putLLMProvider(input: {name: "openai", baseUrl: "https://api.openai.com/v1", keySecret: "THIRD_KEY"}) { gateway { providers { name keySecret } } changes { action } } }`,
		check: all(wantPlainList("putLLMProvider.gateway.providers", []string{"keySecret"}, "THIRD_KEY"), noneOf("putLLMProvider", "OPENAI_API_KEY"))},
	{field: "Mutation.putLLMProvider", as: victor, name: "may not point openai elsewhere",
		query: `mutation { putLLMProvider(input: {name: "openai", baseUrl: "https://evil.example/v1"}) { changes { action } } }`, code: forbidden},
	{field: "Mutation.deleteLLMProvider", as: otherAdmin, name: "cannot delete tenant default's openai",
		query: `mutation { deleteLLMProvider(name: "openai") { id } }`, code: notFound},
	{field: "Mutation.deleteLLMProvider", as: victor, name: "may not delete openai",
		query: `mutation { deleteLLMProvider(name: "openai") { id } }`, code: forbidden},
	{field: "Mutation.putLLMRoute", as: thirdAdmin, name: "creates their own route named llama-70b",
		query: `mutation { putLLMRoute(input: {name: "llama-70b", endpoints: ["http://192.168.9.9:8000/v1"], timeoutSeconds: 30}) { gateway { routes { name endpoints timeoutSeconds } } } }`,
		check: all(wantPlainList("putLLMRoute.gateway.routes", []string{"name"}, "llama-70b"), noneOf("putLLMRoute", "10.0.3.17"))},
	{field: "Mutation.putLLMRoute", as: viewer, name: "may not change llama-70b",
		query: `mutation { putLLMRoute(input: {name: "llama-70b", endpoints: ["http://evil.example/v1"]}) { changes { action } } }`, code: forbidden},
	{field: "Mutation.deleteLLMRoute", as: otherAdmin, name: "cannot delete tenant default's llama-70b",
		query: `mutation { deleteLLMRoute(name: "llama-70b") { id } }`, code: notFound},
	{field: "Mutation.deleteLLMRoute", as: victor, name: "may not delete llama-70b",
		query: `mutation { deleteLLMRoute(name: "llama-70b") { id } }`, code: forbidden},
	{field: "Mutation.putLLMModel", as: otherAdmin, name: "cannot put a model on tenant default's route llama-70b",
		query: `mutation { putLLMModel(input: {name: "stolen", route: "llama-70b"}) { changes { action } } }`, code: badInput},
	{field: "Mutation.putLLMModel", as: thirdAdmin, name: "creates their own gpt-4o on their own openai",
		query: `mutation { putLLMModel(input: {name: "gpt-4o", provider: "openai", inputPrice: 1, outputPrice: 2}) { gateway { models { name provider inputPrice } } } }`,
		check: wantPlainList("putLLMModel.gateway.models", []string{"name"}, "gpt-4o")},
	{field: "Mutation.putLLMModel", as: victor, name: "may not make gpt-4o free",
		query: `mutation { putLLMModel(input: {name: "gpt-4o", provider: "openai", inputPrice: 0, outputPrice: 0}) { changes { action } } }`, code: forbidden},
	{field: "Mutation.deleteLLMModel", as: otherAdmin, name: "cannot delete tenant default's gpt-4o",
		query: `mutation { deleteLLMModel(name: "gpt-4o") { id } }`, code: notFound},
	{field: "Mutation.deleteLLMModel", as: victor, name: "may not delete gpt-4o",
		query: `mutation { deleteLLMModel(name: "gpt-4o") { id } }`, code: forbidden},
	{field: "Mutation.putLLMAlias", as: otherAdmin, name: "cannot open an alias to group ml-research",
		query: `mutation($g: String!) { putLLMAlias(input: {name: "probe", rules: [{groups: [$g], targets: [{model: "x"}]}]}) { changes { action } } }`,
		vars:  map[string]any{"g": ref("group ml-research")}, code: badInput},
	{field: "Mutation.putLLMAlias", as: thirdAdmin, name: "creates their own chat on their own gpt-4o",
		query: `mutation { putLLMAlias(input: {name: "chat", rules: [{targets: [{model: "gpt-4o", weight: 2}]}]}) { gateway { aliases { name rules { targets { model weight } } } } } }`,
		check: all(wantPlainList("putLLMAlias.gateway.aliases", []string{"name"}, "chat"), noneOf("putLLMAlias", "frontier", "llama-3.1-70b"))},
	{field: "Mutation.putLLMAlias", as: victor, name: "may not send chat to another model",
		query: `mutation { putLLMAlias(input: {name: "chat", rules: [{targets: [{model: "gpt-4o"}]}]}) { changes { action } } }`, code: forbidden},
	{field: "Mutation.deleteLLMAlias", as: otherAdmin, name: "cannot delete tenant default's embed",
		query: `mutation { deleteLLMAlias(name: "embed") { id } }`, code: notFound},
	{field: "Mutation.deleteLLMAlias", as: victor, name: "may not delete embed",
		query: `mutation { deleteLLMAlias(name: "embed") { id } }`, code: forbidden},
	{field: "Mutation.putTokenBudget", as: otherAdmin, name: "cannot budget fraud-models",
		query: `mutation($p: ID!) { putTokenBudget(input: {project: $p, period: MONTH, tokens: 1}) { changes { action } } }`,
		vars:  map[string]any{"p": ref("project fraud-models")}, code: badInput},
	{field: "Mutation.putTokenBudget", as: victor, name: "may not raise fraud-models' budget",
		query: `mutation { putTokenBudget(input: {project: "fraud-models", period: MONTH, tokens: 1000000000}) { changes { action } } }`, code: forbidden},
	{field: "Mutation.deleteTokenBudget", as: otherAdmin, name: "cannot delete fraud-models' budget",
		query: `mutation($p: ID!) { deleteTokenBudget(project: $p, period: MONTH) { id } }`,
		vars:  map[string]any{"p": ref("project fraud-models")}, code: notFound},
	{field: "Mutation.deleteTokenBudget", as: victor, name: "may not delete fraud-models' budget",
		query: `mutation { deleteTokenBudget(project: "fraud-models", period: MONTH) { id } }`, code: forbidden},
	{field: "Mutation.putRateLimit", as: thirdAdmin, name: "limits their own users",
		query: `mutation { putRateLimit(input: {scope: USER, requestsPerMinute: 5}) { gateway { rateLimits { scope name requestsPerMinute tokensPerMinute } } } }`,
		check: wantPlainList("putRateLimit.gateway.rateLimits", []string{"scope"}, "USER")},
	{field: "Mutation.putRateLimit", as: victor, name: "may not lift the user rate limit",
		query: `mutation { putRateLimit(input: {scope: USER, requestsPerMinute: 1000000}) { changes { action } } }`, code: forbidden},
	{field: "Mutation.deleteRateLimit", as: otherAdmin, name: "cannot delete tenant default's user rate limit",
		query: `mutation { deleteRateLimit(scope: USER) { id } }`, code: notFound},
	{field: "Mutation.deleteRateLimit", as: viewer, name: "may not delete the user rate limit",
		query: `mutation { deleteRateLimit(scope: USER) { id } }`, code: forbidden},
	{field: "Mutation.putEntitlement", as: otherAdmin, name: "cannot entitle group ml-research",
		query: `mutation($g: String!) { putEntitlement(input: {name: "frontier", groups: [$g]}) { changes { action } } }`,
		vars:  map[string]any{"g": ref("group ml-research")}, code: badInput},
	{field: "Mutation.putEntitlement", as: victor, name: "may not entitle themselves to the frontier model",
		query: `mutation { putEntitlement(input: {name: "frontier", groups: ["ml-research"], users: ["victor"]}) { changes { action } } }`, code: forbidden},
	{field: "Mutation.deleteEntitlement", as: otherAdmin, name: "cannot delete tenant default's frontier",
		query: `mutation { deleteEntitlement(name: "frontier") { id } }`, code: notFound},
	{field: "Mutation.deleteEntitlement", as: victor, name: "may not delete frontier",
		query: `mutation { deleteEntitlement(name: "frontier") { id } }`, code: forbidden},
	{field: "Mutation.setGuardrails", as: thirdAdmin, name: "sets their own guardrails",
		query: `mutation { setGuardrails(input: {deny: ["third-tenant-word"]}) { gateway { guardrails { deny } } changes { action kind } } }`,
		check: all(wantPlainList("setGuardrails.changes", []string{"action"}, "CREATE"), noneOf("setGuardrails", "(?i)"))},
	{field: "Mutation.setGuardrails", as: victor, name: "may not clear the global guardrails",
		query: `mutation { setGuardrails(input: {}) { changes { action } } }`, code: forbidden},
}

// noneOf asserts that the answer under a field holds none of the words:
// tenant default's configuration that another caller must not see.
func noneOf(field string, words ...string) func(r *report, f *fixture, res *gqlResult) {
	return func(r *report, f *fixture, res *gqlResult) {
		b, _ := json.Marshal(path(res.Data, field))
		for _, w := range words {
			if strings.Contains(string(b), w) {
				r.errorf("%s reveals %q: %s", field, w, b)
			}
		}
	}
}

// onlyVision asserts that every compute resource in the answer (any object
// with a group and a "queuingPriority" parent) belongs to group vision.
func onlyVision(r *report, f *fixture, res *gqlResult) {
	var walk func(v any, inQueue bool)
	seen := 0
	walk = func(v any, inQueue bool) {
		switch x := v.(type) {
		case map[string]any:
			if inQueue {
				seen++
				if g := str(x, "group", "name"); g != "vision" {
					r.errorf("victor sees compute resource %q (%s) of group %q", str(x, "name"), str(x, "id"), g)
				}
			}
			for k, c := range x {
				walk(c, k == "queuingPriority")
			}
		case []any:
			for _, c := range x {
				walk(c, inQueue)
			}
		}
	}
	walk(res.Data, false)
	if seen == 0 {
		r.errorf("the answer lists no compute resource at all; victor should see vision's")
	}
}

// resolveVars replaces refs by fixture ids.
func resolveVars(t *testing.T, f *fixture, v any) any {
	t.Helper()
	switch x := v.(type) {
	case ref:
		if x == "estate file" {
			return readExample(t, "estate.yaml")
		}
		return f.id(t, string(x))
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, c := range x {
			out[k] = resolveVars(t, f, c)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, c := range x {
			out[i] = resolveVars(t, f, c)
		}
		return out
	}
	return v
}

// leaks lists the secrets that appear in an answer as whole words without
// having been sent in the request.
func leaks(secrets []string, request, answer string) []string {
	var out []string
	for _, s := range secrets {
		if s == "" || strings.Contains(request, s) {
			continue
		}
		re := regexp.MustCompile(`(^|[^A-Za-z0-9_-])` + regexp.QuoteMeta(s) + `($|[^A-Za-z0-9_-])`)
		if re.MatchString(answer) {
			out = append(out, s)
		}
	}
	return out
}

// runIsolation tries every case against a fresh fixture and checks the
// answer, what it reveals, and that tenant default did not change.
func runIsolation(t *testing.T, ts *testServer) {
	f := newFixture(t, ts)
	before := f.snapshot(t)
	for _, c := range isolationCases {
		t.Run(c.as.String()+" "+c.name, func(t *testing.T) {
			vars, _ := resolveVars(t, f, c.vars).(map[string]any)
			req := gqlRequest{Credential: c.as.key(f), Query: c.query, Vars: vars}
			res := ts.gql(t, req)
			r := &report{}

			if res.Status != 200 {
				r.errorf("HTTP status %d, want 200", res.Status)
			}
			switch {
			case c.code == "" && len(res.Errors) > 0:
				r.errorf("want success, got errors %v: %s", res.codes(), res.message())
			case c.code != "" && res.code() != c.code:
				r.errorf("want error %s, got %v (%s)", c.code, res.codes(), res.message())
			}
			for _, e := range res.Errors {
				if e.Extensions["code"] == nil {
					r.errorf("error %q has no extensions.code", e.Message)
				}
			}
			if c.check != nil && len(res.Errors) == 0 {
				c.check(r, f, res)
			}

			request := string(req.body(t))
			secrets := f.groupSecrets
			if c.as.otherTenant() {
				secrets = f.tenantSecrets
			}
			if c.as != viewer {
				if l := leaks(secrets, request, res.Raw); len(l) > 0 {
					r.errorf("the answer reveals %q:\n%s", l, res.Raw)
				}
			}

			after := f.snapshot(t)
			if after != before {
				r.errorf("tenant default changed:\n%s", diffLines(before, after))
				before = after // report each change once
			}

			switch {
			case len(r.msgs) > 0 && c.knownBug != "":
				t.Skipf("KNOWN BUG (%s):\n%s", c.knownBug, strings.Join(r.msgs, "\n"))
			case len(r.msgs) > 0:
				t.Errorf("%s\nquery: %s\nanswer: %s", strings.Join(r.msgs, "\n"), c.query, res.Raw)
			case c.knownBug != "":
				t.Errorf("the case passes although it is marked as known bug %q: remove the mark", c.knownBug)
			}
		})
	}

	t.Run("alice's task is still placed and alice still reaches it", func(t *testing.T) {
		d := ts.mustGQL(t, f.alice, `query($id: ID!) { task(id: $id) { status reason } }`, map[string]any{"id": f.ids["task"]})
		if s := str(d, "task", "status"); s != "PLACED" {
			t.Errorf("alice's task is %s (%s), want PLACED", s, str(d, "task", "reason"))
		}
	})
}

func TestTenantAndGroupIsolation(t *testing.T) {
	t.Parallel()
	t.Run("on SQLite", func(t *testing.T) {
		t.Parallel()
		runIsolation(t, startServer(t))
	})
	t.Run("on PostgreSQL", func(t *testing.T) {
		t.Parallel()
		runIsolation(t, startServer(t, withDatabaseURL(pgtest.RequirePostgresURL(t))))
	})
}

// loadSchema parses the GraphQL schema files of the repository.
func loadSchema(t *testing.T) *ast.Schema {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "schema", "*.graphqls"))
	if err != nil || len(files) == 0 {
		t.Fatalf("find schema files: %v (found %d)", err, len(files))
	}
	var sources []*ast.Source
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
		sources = append(sources, &ast.Source{Name: name, Input: string(b)})
	}
	schema, err := gqlparser.LoadSchema(sources...)
	if err != nil {
		t.Fatalf("parse schema: %v", err)
	}
	return schema
}

// TestEveryOperationHasAnIsolationCase keeps the isolation table complete:
// a new query or mutation cannot be added without saying what another
// tenant and a member of another group get from it.
func TestEveryOperationHasAnIsolationCase(t *testing.T) {
	t.Parallel()
	schema := loadSchema(t)
	fields := map[string]bool{}
	for _, root := range []*ast.Definition{schema.Query, schema.Mutation} {
		if root == nil {
			t.Fatalf("the schema lacks a Query or Mutation type")
		}
		for _, fd := range root.Fields {
			if strings.HasPrefix(fd.Name, "__") {
				continue
			}
			fields[root.Name+"."+fd.Name] = true
		}
	}
	if len(fields) < 50 {
		t.Fatalf("found only %d operations in the schema; is the schema folder right?", len(fields))
	}
	byOther, byGroup := map[string]int{}, map[string]int{}
	for _, c := range isolationCases {
		if !fields[c.field] {
			t.Errorf("isolation case %q names %s, which is not in the schema", c.name, c.field)
		}
		if c.as.otherTenant() {
			byOther[c.field]++
		} else {
			byGroup[c.field]++
		}
	}
	var names []string
	for f := range fields {
		names = append(names, f)
	}
	sort.Strings(names)
	for _, f := range names {
		if byOther[f] == 0 {
			t.Errorf("%s has no isolation case for another tenant: add one to isolationCases", f)
		}
		if byGroup[f] == 0 {
			t.Errorf("%s has no isolation case for a member of another group: add one to isolationCases", f)
		}
	}
	t.Logf("%d operations, %d isolation cases", len(fields), len(isolationCases))
}

// TestProjectScopedCredential checks the third boundary: a key scoped to one
// project acts only on that project's tasks and cannot change identities.
func TestProjectScopedCredential(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	applyEstate(t, ts, smallEstate+"  - name: proj2\n")
	ts.mustGQL(t, adminKey, `mutation { createUser(input: {name: "amy", groups: [{group: "team"}]}) { id } }`, nil)
	amy, amyKeyID := newKey(t, ts, "amy")
	enqueue := func(cred, name, project string) *gqlResult {
		return ts.gql(t, gqlRequest{Credential: cred, Query: `mutation($n: String!, $p: ID) { enqueueTask(input: {name: $n, computeResource: "1 GPU", project: $p, command: ["true"]}) { id project { name } } }`,
			Vars: map[string]any{"n": name, "p": project}})
	}
	res := enqueue(amy, "in-proj", "proj")
	if len(res.Errors) > 0 {
		t.Fatalf("enqueue in proj: %s", res.Raw)
	}
	inProj := str(res.Data, "enqueueTask", "id")
	d := ts.mustGQL(t, amy, `mutation { createAPIKey(input: {name: "ci", project: "proj2"}) { secret apiKey { project { name } } } }`, nil)
	if got := str(d, "createAPIKey", "apiKey", "project", "name"); got != "proj2" {
		t.Fatalf("the scoped key's project is %q, want proj2", got)
	}
	scoped := str(d, "createAPIKey", "secret")

	t.Run("it enqueues in its project without naming it", func(t *testing.T) {
		res := enqueue(scoped, "in-proj2", "")
		if len(res.Errors) > 0 || str(res.Data, "enqueueTask", "project", "name") != "proj2" {
			t.Errorf("enqueue with the scoped key = %s, want a task in proj2", res.Raw)
		}
	})
	t.Run("it may not enqueue in another project", func(t *testing.T) {
		if res := enqueue(scoped, "x", "proj"); res.code() != "FORBIDDEN" {
			t.Errorf("code = %v, want FORBIDDEN: %s", res.codes(), res.Raw)
		}
	})
	t.Run("it sees only its project and its tasks", func(t *testing.T) {
		d := ts.mustGQL(t, scoped, `{ me { project { name } } projects { edges { node { name } } } tasks { edges { node { name } } } }`, nil)
		if got := nodeValues(d, "name", "projects"); strings.Join(got, ",") != "proj2" {
			t.Errorf("projects = %v, want proj2", got)
		}
		if got := nodeValues(d, "name", "tasks"); strings.Join(got, ",") != "in-proj2" {
			t.Errorf("tasks = %v, want in-proj2", got)
		}
		if got := str(d, "me", "project", "name"); got != "proj2" {
			t.Errorf("me.project = %q, want proj2", got)
		}
	})
	t.Run("it cannot read or abort a task of another project", func(t *testing.T) {
		for _, q := range []string{`query($id: ID!) { task(id: $id) { id } }`, `mutation($id: ID!) { abortTask(id: $id) { id } }`} {
			res := ts.gql(t, gqlRequest{Credential: scoped, Query: q, Vars: map[string]any{"id": inProj}})
			if res.code() != "NOT_FOUND" {
				t.Errorf("%s: code = %v, want NOT_FOUND: %s", q, res.codes(), res.Raw)
			}
		}
	})
	t.Run("it may not create API keys", func(t *testing.T) {
		res := ts.gql(t, gqlRequest{Credential: scoped, Query: `mutation { createAPIKey(input: {name: "more"}) { secret } }`})
		if res.code() != "FORBIDDEN" {
			t.Errorf("code = %v, want FORBIDDEN: %s", res.codes(), res.Raw)
		}
	})
	t.Run("it may not revoke its owner's unscoped key", func(t *testing.T) {
		res := ts.gql(t, gqlRequest{Credential: scoped, Query: `mutation($id: ID!) { revokeAPIKey(id: $id) { revokedAt } }`,
			Vars: map[string]any{"id": amyKeyID}})
		var failures []string
		if c := res.code(); c != "FORBIDDEN" && c != "NOT_FOUND" {
			failures = append(failures, fmt.Sprintf("code = %v, want FORBIDDEN: %s", res.codes(), res.Raw))
		}
		if r := ts.gql(t, gqlRequest{Credential: amy, Query: meQuery}); r.Status != 200 || len(r.Errors) > 0 {
			failures = append(failures, fmt.Sprintf("amy's unscoped key no longer works: %s", r.Raw))
		}
		for _, f := range failures {
			t.Error(f)
		}
	})
}

func TestLeakCheck(t *testing.T) {
	t.Parallel()
	secrets := []string{"ml-research", "vision", "0190-abc"}
	for _, c := range []struct {
		name, request, answer string
		want                  []string
	}{
		{"a secret in the answer is found", `{}`, `{"message":"no group 'ml-research'"}`, []string{"ml-research"}},
		{"a secret the caller sent is not a leak", `{"id":"ml-research"}`, `{"message":"no group 'ml-research'"}`, nil},
		{"a secret inside a longer word is not found", `{}`, `{"action":"user.provisioned","x":"vision-2"}`, nil},
		{"an id as a JSON value is found", `{}`, `{"id":"0190-abc"}`, []string{"0190-abc"}},
		{"several are all found", `{}`, `vision 0190-abc`, []string{"vision", "0190-abc"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := leaks(secrets, c.request, c.answer)
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("leaks = %q, want %q", got, c.want)
			}
		})
	}
}
