package server_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestDashboardModelsPageShowsACallLive signs in to the dashboard in a
// real browser as a member, opens the Models page, makes a real call
// through the gateway (POST /v1/chat/completions with the member's key, to
// a model server on loopback), and sees the call's tokens appear on the
// page without a reload, carried by the gatewayTraffic subscription; a
// call a guardrail blocks then shows among the refusals with its reason.
// The admin's page has the route with its endpoint's health.
func TestDashboardModelsPageShowsACallLive(t *testing.T) {
	requireChromium(t)
	t.Parallel()
	ts := startServer(t)
	shots := t.TempDir()
	mdl, _, _ := holdingModel(t) // answers with 9 + 1 tokens

	alice := dashboardMember(t, ts)
	ts.mustGQL(t, adminKey, `mutation($in: LLMRouteInput!) { putLLMRoute(input: $in) { changes { action } } }`,
		map[string]any{"in": map[string]any{"name": "local", "endpoints": []any{mdl.URL + "/v1"}}})
	ts.mustGQL(t, adminKey, `mutation { putLLMModel(input: {name: "mock", route: "local", inputPrice: 0.2, outputPrice: 0.2}) { changes { action } } }`, nil)
	ts.mustGQL(t, adminKey, `mutation { putLLMAlias(input: {name: "agent-chat", rules: [{groups: ["ml-research"], targets: [{model: "mock"}]}], guardrails: {deny: ["(?i)forbidden"]}}) { changes { action } } }`, nil)

	ctx := newBrowser(t)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(ts.url+"/#/models"),
		chromedp.WaitVisible(chromedp.CSS("#apikey")),
	); err != nil {
		t.Fatal(err)
	}
	// The page's WebSocket messages are recorded, and a mark is left on
	// the document: a reload would take it away.
	evalJS[bool](t, ctx, `{
		window.__wsMessages = [];
		window.__notReloaded = true;
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
	waitForText(t, ctx, "main h1", "Models", uiWait)
	waitFor(t, ctx, "the live indicator", `#live[data-mode="live"]`, uiWait)
	waitForText(t, ctx, "#models-traffic", "No calls in the last minute", uiWait)
	waitForText(t, ctx, "#models-aliases", "agent-chat", uiWait)
	screenshot(t, ctx, shots, "models-before.png")

	if code, body := modelsCallBody(t, ts.url, alice, "fraud-models", `{"model":"agent-chat","messages":[{"role":"user","content":"hello"}]}`); code != 200 {
		t.Fatalf("the gateway call: HTTP %d %s", code, body)
	}

	waitForText(t, ctx, `#models-traffic tr[data-alias="agent-chat"] td[data-field="tokens"]`, "10", uiWait)
	if got := pageText(t, ctx, "#models-tokens-total"); got != "10" {
		t.Errorf("the page's tokens in the last minute read %q, want 10", got)
	}
	if got := pageText(t, ctx, `#models-traffic tr[data-alias="agent-chat"] td[data-field="calls"]`); got != "1" {
		t.Errorf("the page's calls a minute of agent-chat read %q, want 1", got)
	}
	if !evalJS[bool](t, ctx, `window.__notReloaded === true`) {
		t.Fatal("the page was reloaded")
	}
	// The numbers came over the subscription, not from a poll.
	if !evalJS[bool](t, ctx, `window.__wsMessages.some((m) => m.type === "next" && m.payload && m.payload.data && m.payload.data.gatewayTraffic && m.payload.data.gatewayTraffic.tokensPerMinute === 10)`) {
		t.Fatalf("no gatewayTraffic update with the call's 10 tokens came over the WebSocket; messages: %s",
			evalJS[string](t, ctx, `JSON.stringify(window.__wsMessages.map((m) => m.type))`))
	}
	screenshot(t, ctx, shots, "models-after-call.png")
	// The tokens report of the range lists the call under alice,
	// fraud-models and the model.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#models-tokens-form button[type="submit"]`))); err != nil {
		t.Fatal(err)
	}
	waitForText(t, ctx, "#models-tokens", "mock", uiWait)
	if text := pageText(t, ctx, "#models-tokens"); !strings.Contains(text, "alice") || !strings.Contains(text, "fraud-models") {
		t.Errorf("the tokens report reads %q, want alice's call in fraud-models on mock", text)
	}
	// Download CSV saves the same report, by user, project and model.
	evalJS[bool](t, ctx, `{
		window.__downloads = [];
		HTMLAnchorElement.prototype.click = function () { window.__downloads.push({name: this.download, href: this.href}); };
		const make = URL.createObjectURL;
		URL.createObjectURL = (blob) => { window.__blob = blob; return make(blob); };
		true }`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#models-csv"))); err != nil {
		t.Fatal(err)
	}
	waitDownload(t, ctx)
	csv, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.__blob.text()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("read the downloaded CSV: %v", err)
	}
	if lines := strings.Split(strings.TrimSpace(csv), "\n"); !strings.HasPrefix(lines[0], "user_id,user,project_id,project,model_id,model,") ||
		!strings.Contains(csv, ",alice,") || !strings.Contains(csv, ",fraud-models,") || !strings.Contains(csv, ",mock,") {
		t.Errorf("the downloaded CSV:\n%s\nwant a header by user, project and model and alice's call on mock", csv)
	}

	if code, body := modelsCallBody(t, ts.url, alice, "fraud-models", `{"model":"agent-chat","messages":[{"role":"user","content":"a forbidden word"}]}`); code != 400 {
		t.Fatalf("the blocked call: HTTP %d %s", code, body)
	}
	waitForText(t, ctx, "#models-refusals", "blocked by guardrail", uiWait)
	if text := pageText(t, ctx, "#models-refusals"); !strings.Contains(text, "alice") || !strings.Contains(text, "agent-chat") {
		t.Errorf("the refusals read %q, want alice's blocked call to agent-chat", text)
	}

	// The admin's page: the route's endpoint, healthy, and no error.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#signout")), chromedp.WaitVisible(chromedp.CSS("#apikey")),
		chromedp.SendKeys(chromedp.CSS("#apikey"), adminKey), chromedp.Click(chromedp.CSS(`#signin button[type="submit"]`))); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.url+"/#/models")); err != nil {
		t.Fatal(err)
	}
	waitForText(t, ctx, fmt.Sprintf(`#models-estate tr[data-endpoint=%q]`, mdl.URL+"/v1"), "healthy", uiWait)
	waitForText(t, ctx, "#models-aliases", "ml-research → mock", uiWait)
	waitForText(t, ctx, "#models-traffic", "agent-chat", uiWait)
	if errs := evalJS[int](t, ctx, `document.querySelectorAll("main .error").length`); errs > 0 {
		t.Fatalf("the admin's Models page shows an error:\n%s", pageText(t, ctx, "main"))
	}
	screenshot(t, ctx, shots, "models-admin.png")
}
