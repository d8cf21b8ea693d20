package server_test

import (
	"encoding/csv"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/config"
	"github.com/klique-ai/klique/internal/eventually"
)

// withEngine runs the compute policy engine's loop in the test server.
func withEngine(interval time.Duration) serverOption {
	return func(c *config.Config) { c.Engine, c.EngineInterval = true, interval }
}

// waitStatus polls a task until its status is want.
func waitStatus(t *testing.T, ts *testServer, cred, id, want string) map[string]any {
	t.Helper()
	var d map[string]any
	if !eventually.Poll(10*time.Second, func() bool {
		d = ts.mustGQL(t, cred, `query($id: ID!) { task(id: $id) { status reason position pool { name } } }`, map[string]any{"id": id})
		return str(d, "task", "status") == want
	}) {
		t.Fatalf("task %s is %s (%s), want %s", id, str(d, "task", "status"), str(d, "task", "reason"), want)
	}
	return d
}

func TestEngineInTheServer(t *testing.T) {
	t.Parallel()
	ts := startServer(t, withEngine(50*time.Millisecond))
	f := newFixture(t, ts)

	t.Run("a task enqueued over GraphQL is placed by the running engine", func(t *testing.T) {
		d := ts.mustGQL(t, f.victor, `mutation { enqueueTask(input: {name: "eval", project: "vision-detect", computeResource: "1 GPU", command: ["python", "eval.py"]}) { id status } }`, nil)
		placed := waitStatus(t, ts, f.victor, str(d, "enqueueTask", "id"), "PLACED")
		if str(placed, "task", "pool", "name") != "onprem-k8s" {
			t.Fatalf("placed on %q, want the first pool of one-gpu", str(placed, "task", "pool", "name"))
		}
	})

	t.Run("the policy view shows a group's use against its reservation and limit", func(t *testing.T) {
		d := ts.mustGQL(t, f.victor, `{ policyView { group { name } reservationGpus limitGpus heldGpus borrowedGpus holdingTasks
			budget { hours usedHours leftHours resetsAt alert usedUp } } }`, nil)
		views, _ := path(d, "policyView").([]any)
		if len(views) != 1 || str(views[0], "group", "name") != "vision" || path(views[0], "heldGpus") != 1.0 ||
			path(views[0], "limitGpus") != 32.0 || path(views[0], "budget", "hours") != 2000.0 || path(views[0], "budget", "usedUp") != false {
			t.Fatalf("policy view %s", ts.gql(t, gqlRequest{Credential: f.victor, Query: `{ policyView { group { name } heldGpus } }`}).Raw)
		}
	})

	t.Run("disabling the engine holds new work and says so", func(t *testing.T) {
		ts.mustGQL(t, f.admin, `mutation { setEngineEnabled(enabled: false) { enabled } }`, nil)
		defer ts.mustGQL(t, f.admin, `mutation { setEngineEnabled(enabled: true) { enabled } }`, nil)
		d := ts.mustGQL(t, f.victor, `mutation { enqueueTask(input: {name: "held", project: "vision-detect", computeResource: "1 GPU", command: ["true"]}) { id } }`, nil)
		id := str(d, "enqueueTask", "id")
		var held map[string]any
		if !eventually.Poll(10*time.Second, func() bool {
			held = ts.mustGQL(t, f.victor, `query($id: ID!) { task(id: $id) { status reason computeResource { queueState { constraint } } } }`, map[string]any{"id": id})
			if str(held, "task", "status") != "QUEUED" {
				t.Fatalf("a disabled engine placed the task: %v", held)
			}
			// A pass made before the task was enqueued may already have
			// marked the queue; the task's own reason follows the next.
			return str(held, "task", "computeResource", "queueState", "constraint") == "engine_disabled" &&
				strings.Contains(str(held, "task", "reason"), "engine is disabled")
		}) {
			t.Fatalf("the queue never said the engine is disabled: %v", held)
		}
		res := ts.gql(t, gqlRequest{Credential: f.victor, Query: `mutation { setEngineEnabled(enabled: true) { enabled } }`})
		if res.code() != "FORBIDDEN" {
			t.Fatalf("a member enabled the engine: %s", res.Raw)
		}
		ts.mustGQL(t, f.admin, `mutation { setEngineEnabled(enabled: true) { enabled } }`, nil)
		waitStatus(t, ts, f.victor, id, "PLACED")
	})

	t.Run("a limit of 0 set with updateResourcePolicy pauses the group: its placed work stays, new work is accepted and waits, saying so", func(t *testing.T) {
		d := ts.mustGQL(t, f.victor, `mutation { enqueueTask(input: {name: "before-pause", project: "vision-detect", computeResource: "1 GPU", command: ["true"]}) { id } }`, nil)
		before := str(d, "enqueueTask", "id")
		waitStatus(t, ts, f.victor, before, "PLACED")

		// vision keeps its reservation of 16: the limit alone pauses it.
		d = ts.mustGQL(t, f.admin, `mutation { updateResourcePolicy(id: "vision", input: {limitGpus: 0}) { resourcePolicy { limitGpus reservationGpus } } }`, nil)
		if path(d, "updateResourcePolicy", "resourcePolicy", "limitGpus") != 0.0 {
			t.Fatalf("updateResourcePolicy: %v", d)
		}
		defer ts.mustGQL(t, f.admin, `mutation { updateResourcePolicy(id: "vision", input: {limitGpus: 32}) { resourcePolicy { id } } }`, nil)
		d = ts.mustGQL(t, f.victor, `mutation { enqueueTask(input: {name: "paused", project: "vision-detect", computeResource: "1 GPU", command: ["true"]}) { id status } }`, nil)
		id := str(d, "enqueueTask", "id")
		var held map[string]any
		if !eventually.Poll(10*time.Second, func() bool {
			held = ts.mustGQL(t, f.victor, `query($id: ID!) { task(id: $id) { status reason computeResource { queueState { constraint } } } }`, map[string]any{"id": id})
			if str(held, "task", "status") != "QUEUED" {
				t.Fatalf("a paused group's task was placed: %v", held)
			}
			return str(held, "task", "computeResource", "queueState", "constraint") == "group_paused" &&
				strings.Contains(str(held, "task", "reason"), "group vision is paused: an admin set its limit to 0 GPUs")
		}) {
			t.Fatalf("the queue never said the group is paused: %v", held)
		}
		if d := ts.mustGQL(t, f.victor, `query($id: ID!) { task(id: $id) { status } }`, map[string]any{"id": before}); str(d, "task", "status") != "PLACED" {
			t.Fatalf("the task placed before the pause is %s, want it left to run", str(d, "task", "status"))
		}
		ts.mustGQL(t, f.admin, `mutation { updateResourcePolicy(id: "vision", input: {limitGpus: 32}) { resourcePolicy { id } } }`, nil)
		waitStatus(t, ts, f.victor, id, "PLACED")
	})

	t.Run("the usage ledger exports as CSV, for admins the whole tenant and for members their groups", func(t *testing.T) {
		from := url.QueryEscape(time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))
		to := url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
		q := "/api/v1/usage.csv?from=" + from + "&to=" + to + "&by=group,pool"
		resp, body := ts.get(t, q, f.admin)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv") {
			t.Fatalf("admin CSV: %d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		rows, err := csv.NewReader(strings.NewReader(body)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(rows[0], ","); got != "group_id,group,pool_id,pool,from,to,gpu_hours,budget_hours,cost,currency,calls,input_tokens,output_tokens,token_cost,token_currency" {
			t.Fatalf("header %s", got)
		}
		groups := map[string]bool{}
		for _, r := range rows[1:] {
			groups[r[1]] = true
		}
		if !groups["ml-research"] || !groups["vision"] {
			t.Fatalf("admin's CSV groups %v, want ml-research and vision", groups)
		}
		_, body = ts.get(t, q, f.victor)
		if strings.Contains(body, "ml-research") || !strings.Contains(body, "vision") {
			t.Fatalf("victor's CSV:\n%s", body)
		}
		if resp, _ := ts.get(t, q, ""); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("anonymous CSV: %d", resp.StatusCode)
		}
		resp, body = ts.get(t, "/api/v1/usage.csv?from=yesterday&to="+to, f.admin)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "RFC 3339") {
			t.Fatalf("bad range: %d %s", resp.StatusCode, body)
		}
		resp, body = ts.get(t, "/api/v1/usage.csv?from="+from+"&to="+to+"&by=planet", f.admin)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `cannot be grouped by \"planet\"`) {
			t.Fatalf("bad dimension: %d %s", resp.StatusCode, body)
		}
	})
}
