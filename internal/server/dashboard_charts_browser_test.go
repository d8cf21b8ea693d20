package server_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/eventually"
)

// A member's view of the dashboard's charts and of a finished task: the
// utilization chart covers the last hour from the server, with distinct
// times on its axis and a share axis that ends at 100 %; a cost label
// with its currency is not cut at the chart's edge; and a completed
// task's page stays live.
func TestDashboardChartsAndAFinishedTaskForAMember(t *testing.T) {
	requireChromium(t)
	t.Parallel()
	ts := startServer(t)
	shots := t.TempDir()

	alice := dashboardMember(t, ts)
	worker := onpremWorker(t, ts)

	// alice's task runs and completes, with a log line.
	taskID := enqueueAs(t, ts, alice, "finished-task", "fraud-models")
	place(t, ts)
	a := worker.claim(taskID)
	worker.logs(a, "epoch 1 loss 0.5")
	worker.finish(a, agentapi.StateCompleted)
	if s := str(ts.mustGQL(t, alice, `query($id: ID!) { task(id: $id) { status } }`, map[string]any{"id": taskID}), "task", "status"); s != "COMPLETED" {
		t.Fatalf("the task is %s, want COMPLETED", s)
	}

	ctx := newBrowser(t)
	// Every message the page's WebSocket receives is recorded, so that the
	// test knows when the server has completed a subscription.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(ts.url+"/#/task/"+taskID),
		chromedp.WaitVisible(chromedp.CSS("#apikey")),
	); err != nil {
		t.Fatal(err)
	}
	evalJS[bool](t, ctx, `{
		window.__wsMessages = [];
		const Base = window.WebSocket;
		window.WebSocket = class extends Base {
			constructor(...args) {
				super(...args);
				this.addEventListener('message', (ev) => { try { window.__wsMessages.push(JSON.parse(ev.data)); } catch (_) {} });
			}
		};
		true }`)
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS("#apikey"), alice),
		chromedp.Click(chromedp.CSS(`#signin button[type="submit"]`)),
	); err != nil {
		t.Fatal(err)
	}

	t.Run("a completed task's page is live for a member", func(t *testing.T) {
		waitForText(t, ctx, "main h1", "COMPLETED", uiWait)
		waitForText(t, ctx, "#task-log", "epoch 1 loss 0.5", uiWait)
		// The server sends the finished task's log and completes that
		// subscription; the page must stay live on the task's events.
		if !eventually.Poll(uiWait, func() bool { return evalJS[bool](t, ctx, `window.__wsMessages.some((m) => m.type === "complete")`) }) {
			t.Fatalf("the server never completed the finished task's log subscription; messages: %s", evalJS[string](t, ctx, `JSON.stringify(window.__wsMessages.map((m) => m.type))`))
		}
		waitFor(t, ctx, "the live indicator", `#live[data-mode="live"]`, uiWait)
		if mode := evalJS[string](t, ctx, `document.querySelector("#live").dataset.mode || ""`); mode != "live" {
			t.Fatalf("the completed task's page is %q, want live", mode)
		}
		screenshot(t, ctx, shots, "task-completed.png")
	})

	t.Run("the utilization chart covers the last hour from the server, with distinct times and at most 100 %", func(t *testing.T) {
		if err := chromedp.Do(ctx, chromedp.Navigate(ts.url+"/#/orchestration")); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "the utilization chart", "#utilization-chart svg polyline", uiWait)
		labels := evalJS[[]string](t, ctx, `[...document.querySelectorAll("#utilization-chart text.axis.x")].map((e) => e.textContent)`)
		if len(labels) < 3 {
			t.Fatalf("the time axis has %d labels %q, want at least 3", len(labels), labels)
		}
		seen := map[string]bool{}
		for _, l := range labels {
			if seen[l] {
				t.Fatalf("the time axis repeats %q: %q", l, labels)
			}
			seen[l] = true
		}
		first, err1 := time.Parse("15:04", labels[0])
		last, err2 := time.Parse("15:04", labels[len(labels)-1])
		if err1 != nil || err2 != nil {
			t.Fatalf("time labels %q are not HH:MM", labels)
		}
		if span := (last.Sub(first) + 24*time.Hour) % (24 * time.Hour); span < 40*time.Minute {
			t.Fatalf("the time axis spans %s (%q), want about the last hour", span, labels)
		}
		top := evalJS[float64](t, ctx, `Math.max(...[...document.querySelectorAll("#utilization-chart text.axis.y")].map((e) => Number(e.dataset.value)))`)
		if top > 100 {
			t.Fatalf("the share axis goes up to %v %%, want at most 100", top)
		}
		if text := pageText(t, ctx, "#utilization-chart"); !strings.Contains(text, "100%") {
			t.Fatalf("the share axis reads %q, want it to end at 100%%", text)
		}
		screenshot(t, ctx, shots, "orchestration-utilization.png")
	})

	t.Run("the usage page's value labels, currency included, are not cut", func(t *testing.T) {
		if err := chromedp.Do(ctx, chromedp.Navigate(ts.url+"/#/usage")); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "the usage table", "#page-usage table", uiWait)
		// The case, drawn by the page's own chart code beside the
		// page's charts: a tiny cost in a long currency label.
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`import("/ui/js/charts.js").then((c) => {
			const f = c.barChart({ title: "Token cost", items: [
				{ label: "ml-research", value: 0.000037, note: "mixed" },
				{ label: "vision", value: 0.00001, note: "mixed" }] });
			f.id = "cost-probe";
			document.querySelector("#page-usage").appendChild(f);
			return true;
		})`, chromedp.EvalAwaitPromise)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "the probe chart", "#cost-probe svg", uiWait)
		cut := evalJS[[]string](t, ctx, `[...document.querySelectorAll("#page-usage figure.chart svg")].flatMap((s) => {
			const w = s.viewBox.baseVal.width;
			return [...s.querySelectorAll("text")].filter((e) => { const b = e.getBBox(); return b.x < 0 || b.x + b.width > w + 0.5; })
				.map((e) => e.textContent + " (ends at " + Math.round(e.getBBox().x + e.getBBox().width) + " of " + w + ")");
		})`)
		if len(cut) > 0 {
			t.Fatalf("labels run past their chart's edge: %q", cut)
		}
		if text := pageText(t, ctx, "#cost-probe"); !strings.Contains(text, "0.000037 mixed") {
			t.Fatalf("the probe chart reads %q, want the whole label 0.000037 mixed", text)
		}
		screenshot(t, ctx, shots, fmt.Sprintf("usage-%s.png", "labels"))
	})
}
