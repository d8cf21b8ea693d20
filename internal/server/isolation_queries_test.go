package server_test

import (
	"encoding/json"
	"strings"
)

// queryIsolationCases are the isolation cases of the queries, each tried by
// callers of other tenants and groups.
var queryIsolationCases = []isoCase{
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
	{field: "Query.departments", as: otherAdmin, name: "lists no department of tenant default",
		query: `{ departments { id name groups { name } policy { id } } }`, check: wantPlainList("departments", []string{"name"})},
	{field: "Query.departments", as: victor, name: "does not see fraud-lab, which holds only ml-research",
		query: `{ departments { id name groups { name } policy { id } } }`, check: wantPlainList("departments", []string{"name"})},
	{field: "Query.departments", as: viewer, name: "sees fraud-lab above ml-research, holding ml-research",
		query: `{ departments { name groups { name } } }`, check: all(wantPlainList("departments", []string{"name"}, "fraud-lab"),
			func(r *report, f *fixture, res *gqlResult) {
				if g := str(res.Data, "departments", 0, "groups", 0, "name"); g != "ml-research" {
					r.errorf("fraud-lab holds %q, want ml-research", g)
				}
			})},
	{field: "Query.policyTree", as: otherAdmin, name: "shows only its own other-team, none of tenant default's tree",
		query: `{ policyTree { id name heldGpus } }`, check: wantPlainList("policyTree", []string{"name"}, "other-team")},
	{field: "Query.policyTree", as: thirdAdmin, name: "cannot start the tree at fraud-lab",
		query: `{ policyTree(department: "fraud-lab") { id name } }`, code: notFound},
	{field: "Query.policyTree", as: victor, name: "sees only vision, not fraud-lab or ml-research",
		query: `{ policyTree { id name heldGpus } }`, check: wantPlainList("policyTree", []string{"name"}, "vision")},
	{field: "Query.policyTree", as: victor, name: "cannot start the tree at fraud-lab",
		query: `{ policyTree(department: "fraud-lab") { id name } }`, code: notFound},
	{field: "Query.department", as: otherAdmin, name: "cannot find fraud-lab by id",
		query: `query($id: ID!) { department(id: $id) { id name } }`, vars: map[string]any{"id": ref("department fraud-lab")}, code: notFound},
	{field: "Query.department", as: thirdAdmin, name: "cannot find fraud-lab by name",
		query: `query($id: ID!) { department(id: $id) { id name } }`, vars: map[string]any{"id": "fraud-lab"}, code: notFound},
	{field: "Query.department", as: victor, name: "cannot find fraud-lab",
		query: `query($id: ID!) { department(id: $id) { id name policy { id } } }`, vars: map[string]any{"id": "fraud-lab"}, code: notFound},
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
	{field: "Query.utilizationHistory", as: otherAdmin, name: "shows none of tenant default's GPU classes or their use",
		query: `{ utilizationHistory { gpuClasses { gpuClass { id name } declaredGpus points { usedGpus } } } }`,
		check: func(r *report, f *fixture, res *gqlResult) {
			noneOf("utilizationHistory", f.ids["class h100"])(r, f, res)
		}},
	{field: "Query.utilizationHistory", as: victor, name: "shows the tenant's use by GPU class, which names no group or task",
		query: `{ utilizationHistory { gpuClasses { gpuClass { id name } declaredGpus points { at usedGpus } } } }`,
		check: func(r *report, f *fixture, res *gqlResult) {
			b, _ := json.Marshal(path(res.Data, "utilizationHistory"))
			if !strings.Contains(string(b), f.ids["class h100"]) {
				r.errorf("victor's utilization history lacks the tenant's h100 class: %s", b)
			}
		}},
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
	{field: "Query.compareTasks", as: otherAdmin, name: "cannot compare alice's task",
		query: compareQuery, vars: map[string]any{"ids": []any{ref("task"), "01930000-0000-7000-8000-000000000000"}}, code: notFound},
	{field: "Query.compareTasks", as: otherMember, name: "cannot compare alice's task",
		query: compareQuery, vars: map[string]any{"ids": []any{"01930000-0000-7000-8000-000000000000", ref("task")}}, code: notFound},
	{field: "Query.compareTasks", as: victor, name: "cannot compare alice's task",
		query: compareQuery, vars: map[string]any{"ids": []any{ref("task"), "01930000-0000-7000-8000-000000000000"}}, code: notFound},
}

const compareQuery = `query($ids: [ID!]!) { compareTasks(ids: $ids) { tasks { id name } parameters { name values } metrics { name final { value } } } }`
