package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestDashboardPipelineGraphIsLive signs in to the dashboard in a real
// browser as a member, opens a pipeline run's page while its first step
// waits, and watches the graph change without a reload as the step's task
// runs and completes and the controller enqueues the next step.
func TestDashboardPipelineGraphIsLive(t *testing.T) {
	requireChromium(t)
	t.Parallel()
	ts := startServer(t)
	alice := dashboardMember(t, ts)
	w := onpremWorker(t, ts)
	def := `name: live-graph
project: fraud-models
steps:
  - {name: prepare, computeResource: 1 GPU, command: [echo, prepare]}
  - {name: train, computeResource: 1 GPU, dependsOn: [prepare], command: [echo, train]}
`
	d := ts.mustGQL(t, alice, `mutation($in: RunPipelineInput!) { runPipeline(input: $in) { id } }`, map[string]any{"in": map[string]any{"definition": def}})
	id := str(d, "runPipeline", "id")
	advance := func() {
		t.Helper()
		if err := ts.app.Service.AdvancePipelines(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	advance()

	ctx := newBrowser(t)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(ts.url+"/#/pipelines/"+id),
		chromedp.WaitVisible(chromedp.CSS("#apikey")),
		chromedp.SendKeys(chromedp.CSS("#apikey"), alice),
		chromedp.Click(chromedp.CSS(`#signin button[type="submit"]`)),
	); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "prepare waiting in the graph", `#pipeline-graph [data-level="0"] [data-step="prepare"][data-state="QUEUED"]`, uiWait)
	waitFor(t, ctx, "train pending after it", `#pipeline-graph [data-level="1"] [data-step="train"][data-state="PENDING"]`, uiWait)

	steps := ts.mustGQL(t, alice, `query($id: ID!) { pipelineRun(id: $id) { steps { name taskId } } }`, map[string]any{"id": id})
	prepare := str(steps, "pipelineRun", "steps", 0, "taskId")
	if prepare == "" {
		t.Fatalf("no task for prepare: %v", steps)
	}
	place(t, ts)
	a := w.claim(prepare)
	advance()
	waitFor(t, ctx, "prepare running", `[data-step="prepare"][data-state="RUNNING"]`, uiWait)
	w.finish(a, "completed")
	advance()
	waitFor(t, ctx, "prepare completed", `[data-step="prepare"][data-state="COMPLETED"]`, uiWait)
	waitFor(t, ctx, "train enqueued", `[data-step="train"][data-state="QUEUED"]`, uiWait)
	if got := pageText(t, ctx, `[data-step="prepare"]`); !strings.Contains(got, "1 GPU") || !strings.Contains(got, "task") {
		t.Errorf("the prepare step reads %q, want its compute resource and a link to its task", got)
	}
	if n := evalJS[int](t, ctx, `document.querySelectorAll('[data-step="prepare"] a[data-task="`+prepare+`"]').length`); n != 1 {
		t.Errorf("%d links to prepare's task", n)
	}
}
