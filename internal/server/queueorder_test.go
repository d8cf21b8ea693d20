package server_test

import (
	"slices"
	"testing"
)

// queueOrderEstate gives team one compute resource and two projects.
const queueOrderEstate = `apiVersion: klique/v1
kind: Estate
gpuClasses:
  - {name: h100, memoryGb: 80, pricePerGpuHour: 2}
pools:
  - {name: p1, kind: kubernetes, capacity: 1, gpuClass: h100}
profiles:
  - {name: one, size: 1, pools: [p1]}
groups:
  - {name: team}
policies:
  - group: team
    reservation: 0
    limit: 1
    computeResources: [{name: 1 GPU, profile: one}]
projects:
  - {name: alpha, group: team}
  - {name: beta, group: team}
`

// TestQueueOrderOverGraphQL: a lead orders the team's projects and moves
// a waiting task; Task.position follows; a member is refused.
func TestQueueOrderOverGraphQL(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	applyEstate(t, ts, queueOrderEstate)
	ts.mustGQL(t, adminKey, `mutation { createUser(input: {name: "lena", groups: [{group: "team", role: LEAD}]}) { id } }`, nil)
	ts.mustGQL(t, adminKey, `mutation { createUser(input: {name: "mo", groups: [{group: "team"}]}) { id } }`, nil)
	lead, _ := newKey(t, ts, "lena")
	member, _ := newKey(t, ts, "mo")

	ids := map[string]string{}
	var order []string
	for _, c := range [][2]string{{"a1", "alpha"}, {"a2", "alpha"}, {"b1", "beta"}} {
		d := ts.mustGQL(t, member, `mutation($n: String!, $p: ID!) { enqueueTask(input: {name: $n, computeResource: "1 GPU", project: $p, command: ["true"]}) { id } }`,
			map[string]any{"n": c[0], "p": c[1]})
		ids[c[0]] = str(d, "enqueueTask", "id")
		order = append(order, c[0])
	}
	queue := func() []string {
		t.Helper()
		out := make([]string, len(order))
		for _, n := range order {
			d := ts.mustGQL(t, member, `query($id: ID!) { task(id: $id) { position } }`, map[string]any{"id": ids[n]})
			pos, ok := path(d, "task", "position").(float64)
			if !ok || pos < 1 || int(pos) > len(order) {
				t.Fatalf("task %s has position %v", n, path(d, "task", "position"))
			}
			out[int(pos)-1] = n
		}
		return out
	}
	if got := queue(); !slices.Equal(got, []string{"a1", "a2", "b1"}) {
		t.Fatalf("queue %v", got)
	}

	d := ts.mustGQL(t, lead, `mutation { setProjectPriorities(group: "team", projects: ["beta", "alpha"]) { group { name } projects { name } } }`, nil)
	if got := names(d, "setProjectPriorities", "projects"); !slices.Equal(got, []string{"beta", "alpha"}) {
		t.Fatalf("setProjectPriorities answered %v", got)
	}
	if got := queue(); !slices.Equal(got, []string{"b1", "a1", "a2"}) {
		t.Fatalf("queue after the priority %v", got)
	}
	d = ts.mustGQL(t, member, `{ projectPriority(group: "team") { projects { name } } }`, nil)
	if got := names(d, "projectPriority", "projects"); !slices.Equal(got, []string{"beta", "alpha"}) {
		t.Fatalf("projectPriority %v", got)
	}

	d = ts.mustGQL(t, lead, `mutation($id: ID!, $b: ID) { moveQueuedTask(task: $id, before: $b) { task { name position } from to } }`,
		map[string]any{"id": ids["a2"], "b": ids["b1"]})
	if from, to := path(d, "moveQueuedTask", "from"), path(d, "moveQueuedTask", "to"); from != 3.0 || to != 1.0 ||
		path(d, "moveQueuedTask", "task", "position") != 1.0 {
		t.Fatalf("moveQueuedTask answered %v", d)
	}
	if got := queue(); !slices.Equal(got, []string{"a2", "b1", "a1"}) {
		t.Fatalf("queue after the move %v", got)
	}

	res := ts.gql(t, gqlRequest{Credential: member, Query: `mutation($id: ID!) { moveQueuedTask(task: $id, toFront: true) { to } }`,
		Vars: map[string]any{"id": ids["a1"]}})
	if res.code() != "FORBIDDEN" {
		t.Fatalf("a member's move: %v %s", res.codes(), res.message())
	}
	res = ts.gql(t, gqlRequest{Credential: lead, Query: `mutation($id: ID!, $b: ID) { moveQueuedTask(task: $id, before: $b, toBack: true) { to } }`,
		Vars: map[string]any{"id": ids["a1"], "b": ids["b1"]}})
	if res.code() != "BAD_USER_INPUT" {
		t.Fatalf("a move with two places: %v %s", res.codes(), res.message())
	}
	if got := queue(); !slices.Equal(got, []string{"a2", "b1", "a1"}) {
		t.Fatalf("queue after the refusals %v", got)
	}
	d = ts.mustGQL(t, adminKey, `{ auditLog(first: 5) { edges { node { action detail } } } }`, nil)
	if got := nodeValues(d, "action", "auditLog"); len(got) == 0 || got[0] != "task.moved" {
		t.Fatalf("audit log %v", got)
	}
}

// names is the name of each object of the plain list at steps.
func names(d map[string]any, steps ...any) []string {
	list, _ := path(d, steps...).([]any)
	out := []string{}
	for _, v := range list {
		if m, ok := v.(map[string]any); ok {
			out = append(out, str(m, "name"))
		}
	}
	return out
}
