package server_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestDashboardListsAndPausesSchedules signs in to the dashboard in a real
// browser as a member with a schedule: the Schedules page lists it with
// its target, cron expression and next run, and its Pause button pauses
// it, after which the row says who paused it.
func TestDashboardListsAndPausesSchedules(t *testing.T) {
	requireChromium(t)
	t.Parallel()
	ts := startServer(t)
	alice := dashboardMember(t, ts)
	d := ts.mustGQL(t, alice, `mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { id } }`, map[string]any{"in": map[string]any{
		"name": "train", "project": "fraud-models", "computeResource": "1 GPU", "command": []any{"python", "train.py"}}})
	task := str(d, "enqueueTask", "id")
	ts.mustGQL(t, alice, `mutation($t: ID!) { createSchedule(input: {name: "yearly-retrain", task: $t, cron: "0 3 1 1 *"}) { id } }`,
		map[string]any{"t": task})

	ctx := newBrowser(t)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(ts.url+"/#/schedules"),
		chromedp.WaitVisible(chromedp.CSS("#apikey")),
		chromedp.SendKeys(chromedp.CSS("#apikey"), alice),
		chromedp.Click(chromedp.CSS(`#signin button[type="submit"]`)),
	); err != nil {
		t.Fatal(err)
	}
	waitForText(t, ctx, "main h1", "Schedules", uiWait)
	row := `#schedules tr[data-schedule="yearly-retrain"]`
	waitFor(t, ctx, "the schedule's row", row, uiWait)
	got := pageText(t, ctx, row)
	for _, want := range []string{"task " + task[:8], "cron '0 3 1 1 *' (UTC)", "01-01 03:00:00Z", "active"} {
		if !strings.Contains(got, want) {
			t.Errorf("the row reads %q, want %q in it", got, want)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(row+" button"))); err != nil {
		t.Fatal(err)
	}
	waitForText(t, ctx, row, "paused: paused by alice", uiWait)
	d = ts.mustGQL(t, alice, `{ schedules { paused nextRunAt } }`, nil)
	if s := d["schedules"].([]any)[0].(map[string]any); s["paused"] != true || s["nextRunAt"] != nil {
		t.Errorf("after Pause the schedule is %v", s)
	}
}
