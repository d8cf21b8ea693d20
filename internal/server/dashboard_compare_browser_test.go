package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/klique-ai/klique/internal/agentapi"
)

// TestDashboardComparesTwoRuns signs in to the dashboard in a real browser
// as a member, ticks two finished runs in the Compare page's task list and
// compares them: the parameter that differs is marked, each metric shows
// its final value (with its best when that differs), and each metric's
// series of both runs is charted by step.
func TestDashboardComparesTwoRuns(t *testing.T) {
	requireChromium(t)
	t.Parallel()
	ts := startServer(t)
	shots := t.TempDir()
	alice := dashboardMember(t, ts)
	w := onpremWorker(t, ts)

	now := time.Now().UTC()
	run := func(name, lr string, losses ...float64) string {
		d := ts.mustGQL(t, alice, `mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { id } }`, map[string]any{"in": map[string]any{
			"name": name, "project": "fraud-models", "computeResource": "1 GPU", "command": []any{"python", "train.py"}, "parameters": map[string]any{"lr": lr}}})
		id := str(d, "enqueueTask", "id")
		place(t, ts)
		a := w.claim(id)
		var points []agentapi.MetricPoint
		for i, l := range losses {
			points = append(points, agentapi.MetricPoint{At: now, Name: "loss", Value: l, Step: int64(i + 1)})
		}
		if code := agentCall(t, ts, w.secret, http.MethodPost, agentapi.PathTasks+id+"/metrics", agentapi.MetricsRequest{Attempt: a.Attempt, Points: points}, nil); code != http.StatusNoContent {
			t.Fatalf("metrics: %d", code)
		}
		w.finish(a, "completed")
		return id
	}
	first := run("lr-high", "0.1", 0.9, 0.5, 0.4)
	second := run("lr-low", "0.01", 0.8, 0.3, 0.35)

	ctx := newBrowser(t)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(ts.url+"/#/compare"),
		chromedp.WaitVisible(chromedp.CSS("#apikey")),
		chromedp.SendKeys(chromedp.CSS("#apikey"), alice),
		chromedp.Click(chromedp.CSS(`#signin button[type="submit"]`)),
	); err != nil {
		t.Fatal(err)
	}
	waitForText(t, ctx, "main h1", "Compare", uiWait)
	waitFor(t, ctx, "the first run in the list", `input[data-task="`+first+`"]`, uiWait)
	waitFor(t, ctx, "the second run in the list", `input[data-task="`+second+`"]`, uiWait)
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`input[data-task="`+first+`"]`)),
		chromedp.Click(chromedp.CSS(`input[data-task="`+second+`"]`)),
		chromedp.Click(chromedp.CSS("#compare-go")),
	); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the comparison", "#compare-table", uiWait)
	screenshot(t, ctx, shots, "compare.png")
	if got := pageText(t, ctx, `#compare-table tr[data-param="lr"]`); !strings.Contains(got, "* lr") || !strings.Contains(got, "0.1") || !strings.Contains(got, "0.01") {
		t.Errorf("the lr row reads %q, want it marked as differing with both values", got)
	}
	if got := pageText(t, ctx, `#compare-table tr[data-metric="loss"]`); !strings.Contains(got, "lower is better") || !strings.Contains(got, "0.4") ||
		!strings.Contains(got, "0.35 (best 0.3)") {
		t.Errorf("the loss row reads %q, want the final values and the second run's best", got)
	}
	if n := evalJS[int](t, ctx, `document.querySelectorAll('#compare-charts svg polyline').length`); n != 2 {
		t.Errorf("the loss chart draws %d series, want both runs'", n)
	}
	if got := evalJS[string](t, ctx, `location.hash`); got != "#/compare/"+first+","+second {
		t.Errorf("the address is %q, want it to name the runs compared", got)
	}
}
