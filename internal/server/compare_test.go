package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/agentapi"
)

// TestCompareTasksOverGraphQL puts two runs side by side through the API:
// the parameter that differs is marked, each metric has its final value
// (the last by step) and its best by the direction its name implies, its
// series, and the code each ran is summarised.
func TestCompareTasksOverGraphQL(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	f := newFixture(t, ts)
	worker := f.ids["worker gpu-host-7"]
	claim := func() *agentapi.Assignment {
		var out agentapi.ClaimResponse
		if code := agentCall(t, ts, f.workerSecret, http.MethodPost, agentapi.PathClaim,
			agentapi.ClaimRequest{WorkerID: worker, FreeGPUs: 1, WaitSeconds: 1}, &out); code != http.StatusOK || out.Task == nil {
			t.Fatalf("claim: %d", code)
		}
		return out.Task
	}
	report := func(a *agentapi.Assignment, points ...agentapi.MetricPoint) {
		t.Helper()
		if code := agentCall(t, ts, f.workerSecret, http.MethodPost, agentapi.PathTasks+a.TaskID+"/metrics",
			agentapi.MetricsRequest{Attempt: a.Attempt, Points: points}, nil); code != http.StatusNoContent {
			t.Fatalf("metrics: %d", code)
		}
	}
	now := time.Now().UTC()
	pt := func(name string, v float64, step int64) agentapi.MetricPoint {
		return agentapi.MetricPoint{At: now, Name: name, Value: v, Step: step}
	}

	first := claim()
	d := ts.mustGQL(t, f.alice, `mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { id } }`, map[string]any{"in": map[string]any{
		"name": "train-2", "project": "fraud-models", "computeResource": "1 GPU", "command": []any{"python", "train.py", "--lr", "{lr}"},
		"repository": "https://git.example.com/ml/fraud.git", "commit": "4f2a9c1",
		"diff":       "diff --git a/train.py b/train.py\n--- a/train.py\n+++ b/train.py\n@@ -1 +1,2 @@\n-lr = 1\n+lr = 2\n+seed = 3\n",
		"parameters": map[string]any{"lr": "0.01", "seed": "7"}}})
	second := str(d, "enqueueTask", "id")
	place(t, ts)
	a2 := claim()
	if a2.TaskID != second || a2.Command[3] != "0.01" {
		t.Fatalf("claimed %s with %q, want %s with its {lr} filled", a2.TaskID, a2.Command, second)
	}
	// The loss falls then rises again: its final is not its best.
	report(first, pt("loss", 0.5, 1), pt("loss", 0.25, 2), pt("accuracy", 0.8, 2))
	report(a2, pt("loss", 0.4, 1), pt("loss", 0.2, 2), pt("loss", 0.3, 3), pt("accuracy", 0.9, 1), pt("accuracy", 0.85, 2))

	d = ts.mustGQL(t, f.alice, `query($ids: [ID!]!) { compareTasks(ids: $ids) {
		tasks { id }
		parameters { name values differs }
		metrics { name direction differs final { value step } best { value step } series { value step } }
		code { commits diffFiles diffAdded diffRemoved sameDiff differs } } }`,
		map[string]any{"ids": []any{first.TaskID, second}})
	c := path(d, "compareTasks")
	if ids, _ := path(c, "tasks").([]any); len(ids) != 2 || str(ids[0], "id") != first.TaskID || str(ids[1], "id") != second {
		t.Fatalf("tasks: %v", path(c, "tasks"))
	}
	params, _ := path(c, "parameters").([]any)
	want := map[string][]any{"lr": {"0.1", "0.01"}, "seed": {nil, "7"}}
	if len(params) != 2 {
		t.Fatalf("parameters: %v", params)
	}
	for _, p := range params {
		vals, _ := path(p, "values").([]any)
		w := want[str(p, "name")]
		if len(vals) != 2 || vals[0] != w[0] || vals[1] != w[1] || path(p, "differs") != true {
			t.Fatalf("parameter %v, want values %v, differing", p, w)
		}
	}
	metrics, _ := path(c, "metrics").([]any)
	if len(metrics) != 2 || str(metrics[0], "name") != "accuracy" || str(metrics[1], "name") != "loss" {
		t.Fatalf("metrics: %v", metrics)
	}
	check := func(m any, dir string, final, best [2]float64, points [2]int) {
		t.Helper()
		if str(m, "direction") != dir || path(m, "differs") != true {
			t.Fatalf("%s: %v", str(m, "name"), m)
		}
		fs, _ := path(m, "final").([]any)
		bs, _ := path(m, "best").([]any)
		ss, _ := path(m, "series").([]any)
		for i := range 2 {
			if path(fs[i], "value") != final[i] || path(bs[i], "value") != best[i] || len(ss[i].([]any)) != points[i] {
				t.Fatalf("%s run %d: final %v best %v series %v, want %v %v and %d points", str(m, "name"), i, fs[i], bs[i], ss[i], final[i], best[i], points[i])
			}
		}
	}
	check(metrics[0], "MAX", [2]float64{0.8, 0.85}, [2]float64{0.8, 0.9}, [2]int{1, 2})
	check(metrics[1], "MIN", [2]float64{0.25, 0.3}, [2]float64{0.25, 0.2}, [2]int{2, 3})
	code := path(c, "code")
	if path(code, "differs") != true {
		t.Fatalf("code: %v", code)
	}
	if files, _ := path(code, "diffFiles").([]any); files[0] != float64(0) || files[1] != float64(1) {
		t.Fatalf("diff files: %v", code)
	}
	if added, _ := path(code, "diffAdded").([]any); added[1] != float64(2) {
		t.Fatalf("diff lines added: %v", code)
	}
	if commits, _ := path(code, "commits").([]any); commits[1] != "4f2a9c1" {
		t.Fatalf("commits: %v", code)
	}

	for _, c := range []struct {
		ids  []any
		want string
	}{
		{[]any{first.TaskID}, "compare two to ten runs: 1 given"},
		{[]any{first.TaskID, first.TaskID}, "is listed twice"},
	} {
		r := ts.gql(t, gqlRequest{Credential: f.alice, Query: `query($ids: [ID!]!) { compareTasks(ids: $ids) { tasks { id } } }`, Vars: map[string]any{"ids": c.ids}})
		if r.code() != "BAD_USER_INPUT" || !strings.Contains(r.message(), c.want) {
			t.Fatalf("compareTasks(%v): %s %q, want %q", c.ids, r.code(), r.message(), c.want)
		}
	}
}
