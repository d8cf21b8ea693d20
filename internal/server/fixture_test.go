package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/klique-ai/klique/engine/loop"
	"github.com/klique-ai/klique/internal/platform"
)

// fixture is tenant "default" with the example estate applied and users
// in two of its groups, plus two more tenants that must never see any of
// it:
//
//	default  admin (platform admin), alice (member of ml-research),
//	         victor (member of vision), viewer (viewer in ml-research);
//	         alice's task "train-fraud", placed by one engine pass from
//	         ml-research's "1 GPU", in project fraud-models
//	other    olga (tenant admin), oscar (member of other-team);
//	         project other-project
//	third    tess (tenant admin), otherwise empty
type fixture struct {
	*testServer

	// API keys.
	admin, alice, victor, viewer string
	olga, oscar, tess            string
	// workerSecret is the credential of onprem-k8s's workers.
	workerSecret string

	// ids maps "kind name" to the id of the object, such as
	// "pool onprem-k8s", "cr ml-research/1 GPU", "task" or "key alice".
	ids map[string]string
	// tenantSecrets are strings of tenant default that must never appear
	// in an answer to another tenant unless the caller sent them.
	tenantSecrets []string
	// groupSecrets are strings of group ml-research that must never appear
	// in an answer to a member of vision unless the caller sent them.
	groupSecrets []string
}

// id returns the id of a fixture object, failing t when it is unknown.
func (f *fixture) id(t *testing.T, key string) string {
	t.Helper()
	id, ok := f.ids[key]
	if !ok || id == "" {
		t.Fatalf("fixture has no id for %q", key)
	}
	return id
}

// newFixture builds the fixture on a running server.
func newFixture(t *testing.T, ts *testServer) *fixture {
	t.Helper()
	f := &fixture{testServer: ts, admin: adminKey, ids: map[string]string{}}

	res := ts.mustGQL(t, f.admin, `mutation($doc: String!) { applyEstate(document: $doc) { summary dryRun changes { action } } }`,
		map[string]any{"doc": readExample(t, "estate.yaml")})
	if str(res, "applyEstate", "summary") == "no changes" {
		t.Fatalf("applying the example estate to an empty tenant changed nothing")
	}
	// A department above ml-research, with a policy: what the departments'
	// readers must keep from vision's members and from other tenants.
	ts.mustGQL(t, f.admin, `mutation($doc: String!) { applyEstate(document: $doc) { summary } }`, map[string]any{"doc": `apiVersion: klique/v1
kind: Estate
departments:
  - name: fraud-lab
groups:
  - name: ml-research
    description: Machine-learning research
    department: fraud-lab
policies:
  - department: fraud-lab
    reservation: 16
    limit: 48
`})

	createUser := func(cred, name, role, group string) {
		t.Helper()
		in := map[string]any{"name": name, "role": role}
		if group != "" {
			in["groups"] = []any{map[string]any{"group": group}}
		}
		ts.mustGQL(t, cred, `mutation($in: CreateUserInput!) { createUser(input: $in) { id } }`, map[string]any{"in": in})
	}
	createKey := func(cred, user string) (secret, id, prefix string) {
		t.Helper()
		d := ts.mustGQL(t, cred, `mutation($in: CreateAPIKeyInput!) { createAPIKey(input: $in) { secret apiKey { id prefix } } }`,
			map[string]any{"in": map[string]any{"name": user + " key", "user": user}})
		return str(d, "createAPIKey", "secret"), str(d, "createAPIKey", "apiKey", "id"), str(d, "createAPIKey", "apiKey", "prefix")
	}

	createUser(f.admin, "alice", "MEMBER", "ml-research")
	createUser(f.admin, "victor", "MEMBER", "vision")
	createUser(f.admin, "viewer", "VIEWER", "ml-research")
	var aliceID, alicePrefix, victorKeyID, viewerKeyID string
	f.alice, aliceID, alicePrefix = createKey(f.admin, "alice")
	f.victor, victorKeyID, _ = createKey(f.admin, "victor")
	f.viewer, viewerKeyID, _ = createKey(f.admin, "viewer")
	f.ids["key alice"] = aliceID
	f.ids["key victor"] = victorKeyID
	f.ids["key viewer"] = viewerKeyID

	task := ts.mustGQL(t, f.alice, `mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { id status group { name } project { name } } }`,
		map[string]any{"in": map[string]any{
			"name": "train-fraud", "project": "fraud-models", "computeResource": "1 GPU",
			"command": []any{"python", "train.py"}, "parameters": map[string]any{"lr": "0.1"},
		}})
	f.ids["task"] = str(task, "enqueueTask", "id")
	// A pipeline run of alice's (the fixture runs no controller: it stays
	// pending, and enqueues nothing).
	run := ts.mustGQL(t, f.alice, `mutation($in: RunPipelineInput!) { runPipeline(input: $in) { id } }`, map[string]any{"in": map[string]any{
		"definition": "name: fraud-pipeline\nproject: fraud-models\nsteps:\n  - {name: train, computeResource: 1 GPU, command: [python, train.py]}\n"}})
	f.ids["pipeline run"] = str(run, "runPipeline", "id")
	if g := str(task, "enqueueTask", "group", "name"); g != "ml-research" {
		t.Fatalf("alice's task went to group %q, want ml-research", g)
	}
	if s := str(task, "enqueueTask", "status"); s != "QUEUED" {
		t.Fatalf("alice's task is %s, want QUEUED", s)
	}
	// Alice's schedule of her task (once a year, so it never fires while
	// the cases run): what others must not see or change.
	sched := ts.mustGQL(t, f.alice, `mutation($t: ID!) { createSchedule(input: {name: "nightly-fraud", task: $t, cron: "0 3 1 1 *"}) { id } }`,
		map[string]any{"t": f.ids["task"]})
	f.ids["schedule"] = str(sched, "createSchedule", "id")
	// A worker credential of onprem-k8s with a registered worker, and a
	// secret in fraud-models' vault: objects of the worker protocol and
	// the vault that others must not reach.
	wc := ts.mustGQL(t, f.admin, `mutation { createWorkerCredential(pool: "onprem-k8s", name: "rack-7") { secret credential { id } } }`, nil)
	f.ids["wcred rack-7"] = str(wc, "createWorkerCredential", "credential", "id")
	f.workerSecret = str(wc, "createWorkerCredential", "secret")
	body, _ := json.Marshal(map[string]any{"hostname": "gpu-host-7", "gpus": []any{map[string]any{"index": 0}}, "version": "test", "mode": "process",
		"labels": map[string]any{"rack": "r7", "site": "dc1"}})
	req, _ := http.NewRequest(http.MethodPost, ts.url+"/api/agent/v1/register", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+f.workerSecret)
	resp, reg := ts.send(t, req)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("register a worker: %d %s", resp.StatusCode, reg)
	}
	var regd struct{ WorkerID string }
	_ = json.Unmarshal([]byte(reg), &regd)
	f.ids["worker gpu-host-7"] = regd.WorkerID
	ts.mustGQL(t, f.admin, `mutation { setSecret(scope: PROJECT, owner: "fraud-models", name: "HF_TOKEN", value: "hf_fixture_secret_value") { name } }`, nil)
	// An autoscaler of the cloud pool: admins of other tenants must not
	// read, change or delete it.
	as := ts.mustGQL(t, f.admin, `mutation { createAutoscaler(input: {name: "burst", pool: "cloud-burst", provider: LOCAL,
		instanceTypes: [{name: "local-8", gpus: 8}], maxInstances: 4}) { id } }`, nil)
	f.ids["autoscaler burst"] = str(as, "createAutoscaler", "id")

	// One engine pass places it, so that it holds capacity and the usage
	// ledger has an interval of ml-research's to keep from others. (The
	// test server runs without the engine loop, so nothing else moves.)
	if ts.app.Engine == nil {
		eng := &loop.Loop{State: platform.EngineState{Store: ts.app.Store}, Planner: ts.app.Service, Holder: "fixture"}
		if reps, err := eng.PassAll(context.Background()); err != nil || len(reps) == 0 || reps[0].Placed != 1 {
			t.Fatalf("engine pass: %+v, %v", reps, err)
		}
	} else {
		waitStatus(t, ts, f.alice, f.ids["task"], "PLACED")
	}

	newTenant := func(name, adminName string) string {
		t.Helper()
		d := ts.mustGQL(t, f.admin, `mutation($in: CreateTenantInput!) { createTenant(input: $in) { secret tenant { id name } admin { name role } } }`,
			map[string]any{"in": map[string]any{"name": name, "adminName": adminName}})
		if r := str(d, "createTenant", "admin", "role"); r != "TENANT_ADMIN" {
			t.Fatalf("the first admin of tenant %s has role %s, want TENANT_ADMIN", name, r)
		}
		f.ids["tenant "+name] = str(d, "createTenant", "tenant", "id")
		return str(d, "createTenant", "secret")
	}
	f.olga = newTenant("other", "olga")
	f.tess = newTenant("third", "tess")

	ts.mustGQL(t, f.olga, `mutation { createGroup(input: {name: "other-team"}) { group { id } } }`, nil)
	createUser(f.olga, "oscar", "MEMBER", "other-team")
	f.oscar, _, _ = createKey(f.olga, "oscar")
	ts.mustGQL(t, f.olga, `mutation { createProject(input: {name: "other-project"}) { project { id } } }`, nil)
	od := ts.mustGQL(t, f.olga, `{ groups { edges { node { id name } } } projects { edges { node { id name } } } users { edges { node { id name } } } }`, nil)
	collect(f.ids, od, "group", "groups", "name")
	collect(f.ids, od, "project", "projects", "name")
	collect(f.ids, od, "user", "users", "name")

	// Everything of tenant default, by id and by name.
	d := ts.mustGQL(t, f.admin, `{
		me { tenant { id } }
		gpuClasses { edges { node { id name } } }
		pools { edges { node { id name } } }
		profiles { edges { node { id name } } }
		groups { edges { node { id name } } }
		resourcePolicies { edges { node { id group { name } } } }
		computeResources { edges { node { id name group { name } } } }
		projects { edges { node { id name outputDestination } } }
		users { edges { node { id name } } }
		departments { id name }
	}`, nil)
	f.ids["tenant default"] = str(d, "me", "tenant", "id")
	for _, n := range path(d, "departments").([]any) {
		f.ids["department "+str(n, "name")] = str(n, "id")
	}
	collect(f.ids, d, "class", "gpuClasses", "name")
	collect(f.ids, d, "pool", "pools", "name")
	collect(f.ids, d, "profile", "profiles", "name")
	collect(f.ids, d, "group", "groups", "name")
	collect(f.ids, d, "project", "projects", "name")
	collect(f.ids, d, "user", "users", "name")
	for _, n := range nodes(d, "resourcePolicies") {
		f.ids["policy "+str(n, "group", "name")] = str(n, "id")
	}
	for _, n := range nodes(d, "computeResources") {
		f.ids["cr "+str(n, "group", "name")+"/"+str(n, "name")] = str(n, "id")
	}
	for _, k := range []string{"class h100", "pool onprem-k8s", "profile one-gpu", "group ml-research", "group vision",
		"policy ml-research", "policy vision", "cr ml-research/1 GPU", "cr vision/1 GPU", "project fraud-models",
		"project shared-eval", "user alice", "user victor", "user oscar", "group other-team", "project other-project",
		"department fraud-lab", "policy fraud-lab"} {
		f.id(t, k)
	}

	addFixtureStudy(t, ts, f)

	// What another tenant must never see: every id of tenant default and
	// the names that are its own (not words any tenant might use).
	for k, id := range f.ids {
		if strings.HasPrefix(k, "tenant ") && k != "tenant default" {
			continue
		}
		if k == "user oscar" || k == "user olga" || k == "group other-team" || k == "project other-project" {
			continue
		}
		f.tenantSecrets = append(f.tenantSecrets, id)
	}
	f.tenantSecrets = append(f.tenantSecrets,
		"h100", "a100-80gb", "onprem-k8s", "bare-metal", "slurm-a100", "cloud-burst",
		"gpu-eighth", "half-gpu", "one-gpu", "eight-gpus", "multi-node-2x8", "multi-node training",
		"ml-research", "vision", "fraud-models", "shared-eval", "s3://ml-research-artifacts",
		"alice", "victor", "train-fraud", "nightly-fraud", "train.py", alicePrefix, f.alice, f.victor, f.viewer, adminKey,
		"rack-7", "gpu-host-7", "HF_TOKEN", "hf_fixture_secret_value", f.workerSecret, "lr-sweep-fraud", "fraud-lab",
	)
	// What a member of vision must never see of ml-research's work.
	f.groupSecrets = []string{
		f.ids["task"], "train-fraud", "train.py", f.ids["schedule"], "nightly-fraud", f.ids["key alice"], alicePrefix, f.alice, f.viewer,
		f.ids["policy ml-research"], f.ids["project fraud-models"], "s3://ml-research-artifacts",
		"HF_TOKEN", "hf_fixture_secret_value", f.workerSecret, f.ids["study"], "lr-sweep-fraud",
		"fraud-lab", f.ids["department fraud-lab"], f.ids["policy fraud-lab"],
	}
	for k, id := range f.ids {
		if strings.HasPrefix(k, "cr ml-research/") {
			f.groupSecrets = append(f.groupSecrets, id)
		}
	}
	return f
}

// collect records the id of every node of a connection under "kind name".
func collect(ids map[string]string, data any, kind, conn, nameKey string) {
	for _, n := range nodes(data, conn) {
		ids[kind+" "+str(n, nameKey)] = str(n, "id")
	}
}

// snapshotQuery reads, as the platform admin, everything of tenant default
// that an operation of another tenant or group could change: the estate
// file holds every setting of the allocation model, the lists hold the ids
// (a deleted and recreated object has a new one), and the audit trail's
// newest entry changes with every write. Last-used times of keys are left
// out: reading them is what authentication updates.
const snapshotQuery = `{
	engine { enabled }
	workers { id hostname lastHeartbeatAt }
	workerCredentials { id name revokedAt }
	autoscalers { id name maxInstances updatedAt }
	secrets(scope: PROJECT, owner: "fraud-models") { name updatedAt }
	exportEstate
	gpuClasses(first: 500) { edges { node { id name } } }
	pools(first: 500) { edges { node { id name } } }
	profiles(first: 500) { edges { node { id name } } }
	groups(first: 500) { edges { node { id name description } } }
	resourcePolicies(first: 500) { edges { node { id } } }
	computeResources(first: 500) { edges { node { id name description } } }
	projects(first: 500) { edges { node { id name description outputDestination } } }
	users(first: 500) { edges { node { id name role disabled displayName email service groups { role group { id } } } } }
	tasks(first: 500) { edges { node { id name status reason updatedAt spec { parameters } } } }
	schedules { id name cron paused pausedReason nextRunAt lastRunAt parameters updatedAt }
	tenants(first: 500) { edges { node { id name displayName } } }
	auditLog(first: 1) { edges { node { id action objectName } } }
	adminKeys: apiKeys(first: 500) { edges { node { id name revokedAt expiresAt } } }
	aliceKeys: apiKeys(user: "alice", first: 500) { edges { node { id name revokedAt expiresAt } } }
	victorKeys: apiKeys(user: "victor", first: 500) { edges { node { id name revokedAt expiresAt } } }
	viewerKeys: apiKeys(user: "viewer", first: 500) { edges { node { id name revokedAt expiresAt } } }
}`

// snapshot returns the state of tenant default as canonical JSON.
func (f *fixture) snapshot(t *testing.T) string {
	t.Helper()
	d := f.mustGQL(t, f.admin, snapshotQuery, nil)
	b, err := json.MarshalIndent(d, "", " ")
	if err != nil {
		t.Fatalf("encode snapshot: %v", err)
	}
	// A placed task's reason is worked out when it is read: whether a
	// worker of its pool is online, and since when, changes with the clock
	// (the fixture's worker stops heartbeating once registered), not with
	// what a case did; keep only the pool it names.
	return placedReason.ReplaceAllString(string(b), `"reason": "placed on pool $1"`)
}

// placedReason matches a placed task's reason in a snapshot.
var placedReason = regexp.MustCompile(`"reason": "placed on pool ([^;"]+);[^"]*"`)

// diffLines lists the lines of b that are not in a and the other way
// round, enough to see what changed between two snapshots.
func diffLines(a, b string) string {
	count := func(s string) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(s, "\n") {
			m[strings.TrimSpace(l)]++
		}
		return m
	}
	ca, cb := count(a), count(b)
	var out []string
	for l, n := range ca {
		if cb[l] < n {
			out = append(out, "- "+l)
		}
	}
	for l, n := range cb {
		if ca[l] < n {
			out = append(out, "+ "+l)
		}
	}
	sort.Strings(out)
	if len(out) > 40 {
		out = append(out[:40], fmt.Sprintf("… %d more", len(out)-40))
	}
	return strings.Join(out, "\n")
}
