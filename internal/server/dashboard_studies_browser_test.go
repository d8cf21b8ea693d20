package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/klique-ai/klique/internal/agentapi"
)

// TestDashboardStudyPageFollowsItsTrials opens a study's page in a real
// browser as its owner: the trials are ranked by the objective with the
// best marked and charted over time, and when another trial completes
// better the page shows the new best without a reload (studyChanged).
func TestDashboardStudyPageFollowsItsTrials(t *testing.T) {
	requireChromium(t)
	t.Parallel()
	ts := startServer(t)
	shots := t.TempDir()
	alice := dashboardMember(t, ts)
	w := onpremWorker(t, ts)

	base := str(ts.mustGQL(t, alice, `mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { id } }`, map[string]any{"in": map[string]any{
		"name": "train", "project": "fraud-models", "computeResource": "1 GPU", "command": []any{"python", "train.py", "--lr", "{lr}"},
		"parameters": map[string]any{"lr": "0.1"}}}), "enqueueTask", "id")
	st := ts.mustGQL(t, alice, `mutation($base: ID!) { startStudy(input: {name: "lr-grid", baseTask: $base, strategy: "grid", objective: "accuracy",
		maxConcurrent: 2, budget: {trials: 3}, space: [{name: "lr", kind: "choice", values: ["0.1", "0.01", "0.001"]}]}) { id trials { taskId } } }`,
		map[string]any{"base": base})
	id := str(st, "startStudy", "id")
	trials, _ := path(st, "startStudy", "trials").([]any)
	if len(trials) != 2 {
		t.Fatalf("the first pass started %d trials, want 2", len(trials))
	}
	run := func(task string, accuracy float64) {
		place(t, ts)
		a := w.claim(task)
		points := []agentapi.MetricPoint{{At: time.Now().UTC(), Name: "accuracy", Value: accuracy, Step: 1}}
		if code := agentCall(t, ts, w.secret, http.MethodPost, agentapi.PathTasks+task+"/metrics", agentapi.MetricsRequest{Attempt: a.Attempt, Points: points}, nil); code != http.StatusNoContent {
			t.Fatalf("metrics: %d", code)
		}
		w.finish(a, "completed")
		if err := ts.app.Service.ReconcileStudies(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	run(str(trials[0], "taskId"), 0.7)

	ctx := newBrowser(t)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(ts.url+"/#/studies/"+id),
		chromedp.WaitVisible(chromedp.CSS("#apikey")),
		chromedp.SendKeys(chromedp.CSS("#apikey"), alice),
		chromedp.Click(chromedp.CSS(`#signin button[type="submit"]`)),
	); err != nil {
		t.Fatal(err)
	}
	waitForText(t, ctx, "main h1", "Study lr-grid", uiWait)
	waitForText(t, ctx, "#study-best-value", "0.7", uiWait)
	if n := evalJS[int](t, ctx, `document.querySelectorAll('#study-trials-table tbody tr').length`); n != 3 {
		t.Errorf("the trials table has %d rows, want 3 (one completed, two running)", n)
	}
	if got := pageText(t, ctx, `#study-trials-table tbody tr:first-child`); !strings.Contains(got, "0.1") || !strings.Contains(got, "completed") {
		t.Errorf("the first ranked trial reads %q, want the completed one (lr 0.1)", got)
	}

	// The second trial completes better: the page follows without a reload.
	run(str(trials[1], "taskId"), 0.9)
	waitForText(t, ctx, "#study-best-value", "0.9", uiWait)
	screenshot(t, ctx, shots, "study.png")
	if got := pageText(t, ctx, `#study-trials-table tbody tr:first-child`); !strings.Contains(got, "0.01") {
		t.Errorf("the first ranked trial reads %q, want lr 0.01's", got)
	}
	if n := evalJS[int](t, ctx, `document.querySelectorAll('#study-chart svg polyline').length`); n != 1 {
		t.Errorf("the objective chart draws %d series, want 1", n)
	}

	if err := chromedp.Do(ctx, chromedp.Navigate(ts.url+"/#/studies")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the study in the list", `#studies-table tr[data-study="`+id+`"]`, uiWait)
}
