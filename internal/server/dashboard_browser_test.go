package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/eventually"
)

// uiWait bounds each wait for the page to show something. It is generous:
// under "make test" the browser shares the CPUs with every other package's
// tests, and a passing run does not wait for it.
const uiWait = 30 * time.Second

// chromiumPath is Debian's chromium package's browser: the test drives the
// system browser and never downloads one.
const chromiumPath = "/usr/bin/chromium"

// requireChromium skips the test without the browser, or fails it under
// CI=true, where .ci/chromium.sh is expected to have installed it. Under
// -short (never used by make test or CI) it skips: the test starts Chromium.
func requireChromium(t *testing.T) {
	t.Helper()
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("the browser test starts Chromium: run it without -short")
	}
	if _, err := os.Stat(chromiumPath); err != nil {
		msg := fmt.Sprintf("%s is missing (%v): run .ci/chromium.sh (apt-get install -y chromium) to run the browser test", chromiumPath, err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

// newBrowser starts headless Chromium with a fresh profile and the flags
// that keep it off the network: without them Chromium floods a closed
// network with update, sync and safe-browsing requests. JavaScript errors
// of the page are collected and fail the test at its end.
func newBrowser(t *testing.T, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("safebrowsing-disable-auto-update", true),
		chromedp.WindowSize(1400, 1000),
	}
	opts = append(opts, extra...)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	var mu sync.Mutex
	var jsErrors []string
	// Listen starts the browser and opens its tab, so that a browser that
	// cannot start fails here with its own error.
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*runtime.EventExceptionThrown); ok {
			msg := e.ExceptionDetails.Text
			if e.ExceptionDetails.Exception != nil {
				msg += " " + e.ExceptionDetails.Exception.Description
			}
			mu.Lock()
			jsErrors = append(jsErrors, fmt.Sprintf("%s (%s:%d)", msg, e.ExceptionDetails.URL, e.ExceptionDetails.LineNumber+1))
			mu.Unlock()
		}
	}); err != nil {
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
		t.Fatalf("start %s: %v", chromiumPath, err)
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range jsErrors {
			t.Errorf("the page threw a JavaScript error: %s", e)
		}
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
	})
	return ctx
}

// screenshot saves a full-page PNG under the test's temp dir and, when
// KLIQUE_SCREENSHOT_DIR is set, there too; it returns the first path.
func screenshot(t *testing.T, ctx context.Context, dir, name string) string {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("screenshot %s is not a PNG (%d bytes)", name, len(png))
	}
	out := filepath.Join(dir, name)
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatalf("save screenshot: %v", err)
	}
	if extra := os.Getenv("KLIQUE_SCREENSHOT_DIR"); extra != "" {
		if err := os.MkdirAll(extra, 0o755); err != nil {
			t.Fatalf("KLIQUE_SCREENSHOT_DIR: %v", err)
		}
		if err := os.WriteFile(filepath.Join(extra, name), png, 0o644); err != nil {
			t.Fatalf("save screenshot in KLIQUE_SCREENSHOT_DIR: %v", err)
		}
	}
	t.Logf("screenshot: %s", out)
	return out
}

// waitFor waits for a selector to be visible, and says which when it is
// not, with what the page shows instead.
func waitFor(t *testing.T, ctx context.Context, what, sel string, timeout time.Duration) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := chromedp.Do(wctx, chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
		text, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main")))
		t.Fatalf("%s: %s did not appear within %s (%v); the page shows:\n%s", what, sel, timeout, err, text)
	}
}

// dashboardMember applies the example estate and gives alice, a member of
// ml-research, an API key to sign in to the dashboard with: where the
// dashboard's browser tests start.
func dashboardMember(t *testing.T, ts *testServer) string {
	t.Helper()
	ts.mustGQL(t, adminKey, `mutation($doc: String!) { applyEstate(document: $doc) { summary } }`,
		map[string]any{"doc": readExample(t, "estate.yaml")})
	ts.mustGQL(t, adminKey, `mutation { createUser(input: {name: "alice", role: MEMBER, groups: [{group: "ml-research"}]}) { id } }`, nil)
	return str(ts.mustGQL(t, adminKey, `mutation { createAPIKey(input: {name: "dashboard", user: "alice"}) { secret } }`, nil), "createAPIKey", "secret")
}

// onpremWorker registers a process worker, gpu-host-1, on the example
// estate's onprem-k8s pool.
func onpremWorker(t *testing.T, ts *testServer) *agentWorker {
	t.Helper()
	secret := str(ts.mustGQL(t, adminKey, `mutation { createWorkerCredential(pool: "onprem-k8s", name: "rack-1") { secret } }`, nil),
		"createWorkerCredential", "secret")
	return registerWorker(t, ts, secret, "gpu-host-1")
}

// TestDashboardQueuesLive signs in to the dashboard in a real browser,
// opens the queues page, and watches a task enqueued through the API
// appear and then move to running without a reload; then it opens every
// other page and checks each renders without an error.
func TestDashboardQueuesLive(t *testing.T) {
	requireChromium(t)
	t.Parallel()
	ts := startServer(t)
	shots := t.TempDir()

	// The example estate, alice in ml-research with a key, and a worker
	// registered on onprem-k8s.
	alice := dashboardMember(t, ts)
	w := onpremWorker(t, ts)
	workerSecret, reg := w.secret, agentapi.RegisterResponse{WorkerID: w.id}

	ctx := newBrowser(t)

	t.Run("a wrong key is refused with a message", func(t *testing.T) {
		if err := chromedp.Do(ctx,
			chromedp.Navigate(ts.url+"/"),
			chromedp.WaitVisible(chromedp.CSS("#apikey")),
			chromedp.SendKeys(chromedp.CSS("#apikey"), "klique_not-a-real-key"),
			chromedp.Click(chromedp.CSS(`#signin button[type="submit"]`)),
		); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "the refusal", "#signin-error .error", uiWait)
		msg := pageText(t, ctx, "#signin-error")
		if !strings.Contains(msg, "refused") || !strings.Contains(msg, "unknown credential") || strings.Contains(msg, "klique_not-a-real-key") {
			t.Fatalf("refusal message %q: want the server's reason, without the key", msg)
		}
	})

	var taskID string
	var attempt int
	t.Run("a task enqueued through the API appears on the queues page and moves to running without a reload", func(t *testing.T) {
		if err := chromedp.Do(ctx,
			chromedp.Navigate("about:blank"),
			chromedp.Navigate(ts.url+"/#/queues"),
			chromedp.WaitVisible(chromedp.CSS("#apikey")),
			chromedp.SendKeys(chromedp.CSS("#apikey"), alice),
			chromedp.Click(chromedp.CSS(`#signin button[type="submit"]`)),
		); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "the queues page after sign-in", "#page-queues section.card", uiWait)
		who := pageText(t, ctx, "#who")
		keyInDOM := evalJS[bool](t, ctx, `document.documentElement.outerHTML.includes(`+jsString(alice)+`)`)
		// A marker on window: a reload would lose it.
		evalJS[bool](t, ctx, `window.__noReload = "still here"; true`)
		if !strings.HasPrefix(who, "alice") {
			t.Fatalf("signed in as %q, want alice", who)
		}
		if keyInDOM {
			t.Fatal("the API key is in the page's markup")
		}

		// Every queue is followed over the queueChanged subscription (the
		// page polls only while one is down, and says so).
		waitFor(t, ctx, "the live indicator", `#live[data-mode="live"]`, uiWait)

		enqueuedAt := time.Now()
		d := ts.mustGQL(t, alice, `mutation { enqueueTask(input: {name: "browser-test", project: "fraud-models", computeResource: "1 GPU", command: ["python", "train.py"], parameters: {lr: "0.01"}}) { id status } }`, nil)
		taskID = str(d, "enqueueTask", "id")
		if s := str(d, "enqueueTask", "status"); s != "QUEUED" {
			t.Fatalf("enqueued task is %s, want QUEUED", s)
		}
		waitFor(t, ctx, "the enqueued task, waiting", fmt.Sprintf(`tr[data-task-id=%q][data-status="QUEUED"]`, taskID), uiWait)
		t.Logf("enqueue to the waiting row on the page: %s", time.Since(enqueuedAt).Round(time.Millisecond))
		row := pageText(t, ctx, fmt.Sprintf(`tr[data-task-id=%q]`, taskID))
		if !strings.Contains(row, "browser-test") || !strings.Contains(row, "alice") {
			t.Fatalf("the waiting row reads %q: want the task's name and owner", row)
		}
		position := pageText(t, ctx, fmt.Sprintf(`tr[data-task-id=%q] td.num`, taskID))
		reason := pageText(t, ctx, fmt.Sprintf(`tr[data-task-id=%q] td.reason`, taskID))
		if position != "1" || strings.TrimSpace(reason) == "" || reason == "–" {
			t.Fatalf("the waiting row shows position %q and reason %q: want position 1 and why it waits", position, reason)
		}
		screenshot(t, ctx, shots, "queues-waiting.png")

		// One engine pass places it; the worker's claim starts it.
		place(t, ts)
		var claim agentapi.ClaimResponse
		if code := agentCall(t, ts, workerSecret, http.MethodPost, agentapi.PathClaim,
			agentapi.ClaimRequest{WorkerID: reg.WorkerID, FreeGPUs: 1, WaitSeconds: 5}, &claim); code != http.StatusOK || claim.Task == nil || claim.Task.TaskID != taskID {
			t.Fatalf("claim: HTTP %d %+v, want task %s", code, claim.Task, taskID)
		}
		attempt = claim.Task.Attempt
		claimedAt := time.Now()
		waitFor(t, ctx, "the task, running", fmt.Sprintf(`tr[data-task-id=%q][data-status="RUNNING"]`, taskID), uiWait)
		t.Logf("claim to the running row on the page: %s", time.Since(claimedAt).Round(time.Millisecond))
		marker := evalJS[string](t, ctx, `String(window.__noReload)`)
		if marker != "still here" {
			t.Fatalf("the page was reloaded (marker %q): the update must arrive live", marker)
		}
		if mode := evalJS[string](t, ctx, `document.querySelector("#live").dataset.mode || ""`); mode != "live" {
			t.Fatalf("the queues page is %q, want live over subscriptions", mode)
		}
		row = pageText(t, ctx, fmt.Sprintf(`tr[data-task-id=%q]`, taskID))
		if !strings.Contains(row, "onprem-k8s") {
			t.Fatalf("the running row reads %q: want the pool it runs on", row)
		}
		screenshot(t, ctx, shots, "queues-running.png")
	})
	if taskID == "" {
		t.Fatal("the queues test did not get as far as a task")
	}

	// Every other page renders for alice without an error box, with what
	// it is for on it.
	for _, p := range []struct{ hash, ready, want string }{
		{"#/orchestration", "#page-orchestration table", "onprem-k8s"},
		{"#/policy", `#page-policy [data-group="ml-research"]`, "held of a 48 limit; 16 reserved"},
		{"#/usage", "#page-usage table", "GPU-hours"},
		{"#/task/" + taskID, "#task-reason", "browser-test"},
	} {
		t.Run("page "+strings.Replace(p.hash, taskID, "ID", 1), func(t *testing.T) {
			if err := chromedp.Do(ctx, chromedp.Navigate(ts.url+"/"+p.hash)); err != nil {
				t.Fatal(err)
			}
			waitFor(t, ctx, p.hash, p.ready, uiWait)
			text := pageText(t, ctx, "main")
			errs := evalJS[int](t, ctx, `document.querySelectorAll("main .error").length`)
			if errs > 0 {
				t.Fatalf("%s shows an error:\n%s", p.hash, text)
			}
			if !strings.Contains(text, p.want) {
				t.Fatalf("%s does not mention %q:\n%s", p.hash, p.want, text)
			}
			if p.hash == "#/usage" {
				csvDownload(t, ctx)
				// Last month had nothing; today has alice's task.
				if err := chromedp.Do(ctx, chromedp.Click(chromedp.Search(`//button[text()="Last month"]`))); err != nil {
					t.Fatal(err)
				}
				waitForText(t, ctx, "#page-usage", "Nothing was used in this range.", uiWait)
				if err := chromedp.Do(ctx, chromedp.Click(chromedp.Search(`//button[text()="Today"]`))); err != nil {
					t.Fatal(err)
				}
				waitFor(t, ctx, "today's usage", "#page-usage table", uiWait)
			}
			if p.hash == "#/orchestration" {
				// The tenant-wide use arrives with poolUtilization.
				waitForText(t, ctx, "#page-orchestration", "Used and free count all work on the pool", uiWait)
				// A pool says whether a worker serves it: work placed on
				// one that has none waits unseen (docs/engine.md).
				if got := pageText(t, ctx, `tr[data-pool="onprem-k8s"] td.workers`); got != "1 online" {
					t.Fatalf("onprem-k8s workers %q, want 1 online", got)
				}
				got := pageText(t, ctx, `tr[data-pool="bare-metal"] td.workers`)
				if !strings.Contains(got, "no worker online") || !strings.Contains(got, "no worker of pool bare-metal is online (none has registered)") ||
					!strings.Contains(got, "after 5 min unclaimed") {
					t.Fatalf("bare-metal workers %q, want that no worker is online and what happens to its work", got)
				}
			}
			name := strings.NewReplacer("#/", "", "/", "-").Replace(p.hash)
			if strings.HasPrefix(name, "task-") {
				name = "task"
			}
			screenshot(t, ctx, shots, name+".png")
		})
	}

	t.Run("the task page follows the log and charts metrics without a reload", func(t *testing.T) {
		if err := chromedp.Do(ctx, chromedp.Navigate(ts.url+"/#/task/"+taskID)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "the task page", "#task-reason", uiWait)
		evalJS[bool](t, ctx, `window.__noReload = "task page"; true`)
		now := time.Now().UTC()
		logs := agentapi.LogsRequest{Attempt: attempt, Lines: []agentapi.LogLine{
			{At: now, Stream: "stdout", Line: "epoch 1 loss 0.91"},
			{At: now, Stream: "stderr", Line: "<b>not markup</b>"},
		}}
		if code := agentCall(t, ts, workerSecret, http.MethodPost, agentapi.PathTasks+taskID+"/logs", logs, nil); code != http.StatusOK {
			t.Fatalf("send log lines: HTTP %d", code)
		}
		var points []agentapi.MetricPoint
		for i := range 5 {
			points = append(points, agentapi.MetricPoint{At: now.Add(time.Duration(i) * time.Second), Name: "loss", Value: 1 / float64(i+1), Step: int64(i)})
		}
		if code := agentCall(t, ts, workerSecret, http.MethodPost, agentapi.PathTasks+taskID+"/metrics", agentapi.MetricsRequest{Attempt: attempt, Points: points}, nil); code/100 != 2 {
			t.Fatalf("send metrics: HTTP %d", code)
		}
		waitForText(t, ctx, "#task-log", "epoch 1 loss 0.91", uiWait)
		waitForText(t, ctx, "#task-log", "<b>not markup</b>", uiWait)
		waitFor(t, ctx, "the loss chart", "#task-metrics figure.chart polyline", uiWait)
		if marker := evalJS[string](t, ctx, `String(window.__noReload)`); marker != "task page" {
			t.Fatalf("the task page was reloaded (marker %q)", marker)
		}
		if n := evalJS[int](t, ctx, `document.querySelectorAll("#task-log b").length`); n != 0 {
			t.Fatalf("a log line became markup: %d <b> elements in the log", n)
		}
		screenshot(t, ctx, shots, "task.png")
	})

	t.Run("clone & enqueue sends the changed parameter, and the clone is aborted from its page", func(t *testing.T) {
		evalJS[bool](t, ctx, `{ const v = [...document.querySelectorAll("#task-clone tbody input")]; v[1].value = "0.02"; true }`)
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#task-clone button[type="submit"]`))); err != nil {
			t.Fatal(err)
		}
		waitForText(t, ctx, "main h1", "browser-test-clone", uiWait)
		hash := evalJS[string](t, ctx, `location.hash`)
		cloneID := strings.TrimPrefix(hash, "#/task/")
		d := ts.mustGQL(t, alice, `query($id: ID!) { task(id: $id) { name status clonedFrom { id } spec { parameters command } } }`, map[string]any{"id": cloneID})
		if str(d, "task", "clonedFrom", "id") != taskID || str(d, "task", "spec", "parameters", "lr") != "0.02" || str(d, "task", "status") != "QUEUED" {
			t.Fatalf("the clone (page %s) is %v: want a queued clone of %s with lr 0.02", hash, d, taskID)
		}

		// Its owner aborts it from its page, with a reason.
		// In one step in the page: a live update may re-render it between
		// separate steps of the driver, which then lose their element.
		if !evalJS[bool](t, ctx, `(() => {
			document.querySelector("#task-abort").click();
			const reason = document.querySelector("#task-abort-reason");
			reason.value = "wrong learning rate";
			reason.dispatchEvent(new Event("input", {bubbles: true}));
			document.querySelector("#task-abort-confirm").click();
			return true;
		})()`) {
			t.Fatal("could not abort from the task page")
		}
		waitForText(t, ctx, "main h1", "ABORTED", uiWait)
		d = ts.mustGQL(t, alice, `query($id: ID!) { task(id: $id) { status reason } }`, map[string]any{"id": cloneID})
		if str(d, "task", "status") != "ABORTED" || !strings.Contains(str(d, "task", "reason"), "wrong learning rate") {
			t.Fatalf("after the abort the clone is %v: want ABORTED with the reason given", d)
		}
	})

	t.Run("a viewer reads the queues but is not offered the estate", func(t *testing.T) {
		ts.mustGQL(t, adminKey, `mutation { createUser(input: {name: "vera", role: VIEWER, groups: [{group: "ml-research"}]}) { id } }`, nil)
		vera := str(ts.mustGQL(t, adminKey, `mutation { createAPIKey(input: {name: "dashboard", user: "vera"}) { secret } }`, nil), "createAPIKey", "secret")
		evalJS[bool](t, ctx, `sessionStorage.clear(); true`)
		if err := chromedp.Do(ctx,
			chromedp.Navigate("about:blank"),
			chromedp.Navigate(ts.url+"/#/queues"),
			chromedp.WaitVisible(chromedp.CSS("#apikey")),
			chromedp.SendKeys(chromedp.CSS("#apikey"), vera),
			chromedp.Click(chromedp.CSS(`#signin button[type="submit"]`)),
		); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "alice's task on vera's queues page", fmt.Sprintf(`tr[data-task-id=%q]`, taskID), uiWait)
		if evalJS[bool](t, ctx, `!document.querySelector('#nav a[data-page="estate"]').hidden`) {
			t.Fatal("a viewer is offered the estate editor")
		}
		if err := chromedp.Do(ctx, chromedp.Navigate(ts.url+"/#/estate")); err != nil {
			t.Fatal(err)
		}
		waitForText(t, ctx, "#page-estate", "Only tenant admins edit the estate", uiWait)
		if n := evalJS[int](t, ctx, `document.querySelectorAll("#estate-yaml").length`); n != 0 {
			t.Fatal("a viewer got the estate editor")
		}
	})

	t.Run("an admin previews an estate change with the API's validation, and sees every group's policy with a used-up budget marked", func(t *testing.T) {
		evalJS[bool](t, ctx, `sessionStorage.clear(); true`)
		if err := chromedp.Do(ctx,
			chromedp.Navigate("about:blank"),
			chromedp.Navigate(ts.url+"/#/estate"),
			chromedp.WaitVisible(chromedp.CSS("#apikey")),
			chromedp.SendKeys(chromedp.CSS("#apikey"), adminKey),
			chromedp.Click(chromedp.CSS(`#signin button[type="submit"]`)),
		); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "the estate editor", "#estate-yaml", uiWait)
		// Wait for the export to fill the editor, then break a capacity.
		eventually.Within(t, uiWait, "the estate editor to be filled with the exported estate", func() bool {
			return evalJS[bool](t, ctx, `document.querySelector("#estate-yaml").value.includes("onprem-k8s")`)
		})
		evalJS[bool](t, ctx, `{ const e = document.querySelector("#estate-yaml"); e.value = e.value.replace(/(name: onprem-k8s[^]*?capacity: )32/, "$140"); true }`)
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#estate-preview"))); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "the dry run", "#estate-result table", uiWait)
		result := pageText(t, ctx, "#estate-result")
		if !strings.Contains(result, "Dry run") || !strings.Contains(result, "onprem-k8s") {
			t.Fatalf("dry run result %q: want a dry run naming onprem-k8s", result)
		}
		screenshot(t, ctx, shots, "estate-preview.png")
		d := ts.mustGQL(t, adminKey, `{ pool(id: "onprem-k8s") { capacityGpus } }`, nil)
		if c, _ := path(d, "pool", "capacityGpus").(float64); c != 32 {
			t.Fatalf("after a dry run the pool's capacity is %v, want 32 unchanged", c)
		}

		evalJS[bool](t, ctx, `document.querySelector("#estate-yaml").value = "apiVersion: klique/v1\nkind: Estate\npools:\n  - name: broken\n    capacity: -1\n"; true`)
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#estate-preview"))); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "the refusal of a bad estate file", "#estate-result .error", uiWait)

		// The admin's policy view has every group, vision's time budget
		// charted.
		if err := chromedp.Do(ctx, chromedp.Navigate(ts.url+"/#/policy")); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "vision's policy", `#page-policy [data-group="vision"] figure.chart svg`, uiWait)
		if text := pageText(t, ctx, `#page-policy [data-group="vision"]`); !strings.Contains(strings.ToLower(text), "time budget, per week") || !strings.Contains(text, "hours used") {
			t.Fatalf("vision's policy card reads %q: want its weekly time budget", text)
		}
		screenshot(t, ctx, shots, "policy-admin.png")

		// A budget smaller than what ml-research's running task has used
		// is marked on its card, live.
		ts.mustGQL(t, adminKey, `mutation { updateResourcePolicy(id: "ml-research", input: {timeBudget: {hours: 0.001, period: DAY}}) { resourcePolicy { id } } }`, nil)
		waitFor(t, ctx, "ml-research's budget marked", `#page-policy section.near-limit[data-group="ml-research"]`, uiWait)
		// 0.001 h is 3.6 s: until the running task has used that much,
		// the card says the alert threshold is passed; then used up (the
		// engine's alert and preemption update the page).
		waitForText(t, ctx, `#page-policy [data-group="ml-research"] h2`, "budget used up", uiWait)
		screenshot(t, ctx, shots, "policy-near-limit.png")
	})
}

// csvDownload clicks the usage page's Download CSV and reads what the
// browser would save: the anchor's click is recorded instead of followed,
// and the file is read from the blob the page made.
func csvDownload(t *testing.T, ctx context.Context) {
	t.Helper()
	evalJS[bool](t, ctx, `{
		window.__downloads = [];
		HTMLAnchorElement.prototype.click = function () { window.__downloads.push({name: this.download, href: this.href}); };
		const make = URL.createObjectURL;
		URL.createObjectURL = (blob) => { window.__blob = blob; return make(blob); };
		true }`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.Search(`//button[text()="Download CSV"]`))); err != nil {
		t.Fatal(err)
	}
	waitDownload(t, ctx)
	name := evalJS[string](t, ctx, `window.__downloads[0].name`)
	csv, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.__blob.text()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("read the downloaded CSV: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(csv), "\n")
	if !strings.HasSuffix(name, "-by-group.csv") || len(lines) != 2 || !strings.HasPrefix(lines[0], "group_id,group,from,to,gpu_hours") || !strings.Contains(lines[1], ",ml-research,") {
		t.Fatalf("downloaded %q:\n%s\nwant a header and ml-research's row", name, csv)
	}
}

// waitDownload waits until the page has saved a download (the page's
// window.__downloads, which the test installs, records it).
func waitDownload(t *testing.T, ctx context.Context) {
	t.Helper()
	if !eventually.Poll(uiWait, func() bool { return evalJS[int](t, ctx, `window.__downloads.length`) > 0 }) {
		t.Fatalf("Download CSV saved nothing; the page shows:\n%s", pageText(t, ctx, "main"))
	}
}

// waitForText waits until the text of the element matching sel holds want.
func waitForText(t *testing.T, ctx context.Context, sel, want string, timeout time.Duration) {
	t.Helper()
	expr := fmt.Sprintf(`(document.querySelector(%s) || {textContent: ""}).textContent.includes(%s)`, jsString(sel), jsString(want))
	if !eventually.Poll(timeout, func() bool { return evalJS[bool](t, ctx, expr) }) {
		t.Fatalf("%s did not come to hold %q within %s; it reads:\n%s", sel, want, timeout, pageText(t, ctx, sel))
	}
}

// pageText is the rendered text of the first element matching a CSS
// selector. It is found and read in one evaluation in the page: a live
// page may replace the element between a lookup and a separate read.
func pageText(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	expr := fmt.Sprintf(`(() => { const e = document.querySelector(%s); return e ? e.innerText : null })()`, jsString(sel))
	var s *string
	if !eventually.Poll(uiWait, func() bool { s = evalJS[*string](t, ctx, expr); return s != nil }) {
		t.Fatalf("read the text of %s: no such element on the page within %s", sel, uiWait)
	}
	return *s
}

// evalJS evaluates a JavaScript expression in the page.
func evalJS[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(errors.New("marshal string"))
	}
	return string(b)
}

// A person signs in to the dashboard at the identity provider: the page
// sends them there (authorization code with PKCE), the provider sends them
// back with a code, and they land signed in on the page they left, with
// the code gone from the address.
func TestDashboardSignsInWithSSO(t *testing.T) {
	requireChromium(t)
	t.Parallel()
	idp := newFakeIdP(t, "klique-dashboard", "dana", "ml-research")
	ts := startServer(t, withSSO(idp))
	newFixture(t, ts)
	shots := t.TempDir()
	ctx := newBrowser(t)

	if err := chromedp.Do(ctx, chromedp.Navigate(ts.url+"/#/policy")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the SSO button", "#signin-sso", uiWait)
	screenshot(t, ctx, shots, "signin-sso.png")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#signin-sso"))); err != nil {
		t.Fatal(err)
	}
	waitForText(t, ctx, "#who", "dana", uiWait)
	if where := evalJS[string](t, ctx, "location.search + location.hash"); where != "#/policy" {
		t.Fatalf("after the sign-in the address ends %q, want #/policy with no code in it", where)
	}
	waitFor(t, ctx, "ml-research's policy", `#page-policy [data-group="ml-research"]`, uiWait)
	screenshot(t, ctx, shots, "signed-in-sso.png")
	if stored := evalJS[string](t, ctx, "JSON.stringify(Object.keys(sessionStorage))"); strings.Contains(stored, "apiKey") || strings.Contains(stored, "pkce") {
		t.Fatalf("sessionStorage holds %s after an SSO sign-in, want the token only", stored)
	}

	// A link with a code this tab did not ask for is refused.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#signout")), chromedp.Navigate(ts.url+"/?code=stolen&state=forged")); err != nil {
		t.Fatal(err)
	}
	waitForText(t, ctx, "#signin-error", "without the state this tab sent", uiWait)
}
