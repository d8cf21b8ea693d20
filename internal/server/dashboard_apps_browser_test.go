package server_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestDashboardAppsPageLaunchesAndStops signs in to the dashboard in a
// real browser as a member, opens the Apps page, and launches a session
// app from the form rendered from its JSON Schema: a value that fails the
// schema shows the server's message next to the form and launches
// nothing; a good launch on a compute resource shows the instance
// waiting, then placed once an engine pass runs (live, without a reload),
// with its compute resource and URL; once its worker reports it ready
// (live too), Open signs the browser in to it through the router and
// shows the app in a new tab; Stop stops it. An admin then locks
// the app from its card, and the member's next launch is refused with the
// lock's message.
func TestDashboardAppsPageLaunchesAndStops(t *testing.T) {
	requireChromium(t)
	t.Parallel()
	ts := startServer(t)
	shots := t.TempDir()

	alice := dashboardMember(t, ts)
	w := onpremWorker(t, ts) // a worker online, so that placed work is not said to wait for one
	// Its instance listens on this machine's loopback: the pool is
	// declared local (the router's address rule).
	declareOnprem(t, ts, "    local: true\n")
	// A session app whose form has a field of each kind the page renders.
	form := `{"type":"object","required":["greeting"],"properties":{
		"greeting":{"type":"string","maxLength":5,"description":"what the page says first"},
		"workers":{"type":"integer","minimum":1,"default":2},
		"debug":{"type":"boolean","default":false},
		"colour":{"type":"string","enum":["red","blue"],"default":"blue"},
		"token_secret":{"type":"string"}}}`
	ts.mustGQL(t, adminKey, `mutation($in: AppInput!) { putApp(input: $in) { app { name } } }`, map[string]any{"in": map[string]any{
		"name": "echo", "kind": "session", "port": 8000, "description": "a web page that says hello",
		"run":     map[string]any{"process": "python3 -m http.server {port}"},
		"form":    form,
		"secrets": []any{"token_secret"},
	}})

	ctx := newBrowser(t)
	signInAs := func(t *testing.T, key string) {
		t.Helper()
		// A fresh session: whoever was signed in in this tab is not.
		if err := chromedp.Do(ctx, chromedp.Navigate(ts.url+"/")); err != nil {
			t.Fatal(err)
		}
		evalJS[bool](t, ctx, `sessionStorage.clear(); true`)
		if err := chromedp.Do(ctx,
			chromedp.Navigate("about:blank"),
			chromedp.Navigate(ts.url+"/#/apps"),
			chromedp.WaitVisible(chromedp.CSS("#apikey")),
			chromedp.SendKeys(chromedp.CSS("#apikey"), key),
			chromedp.Click(chromedp.CSS(`#signin button[type="submit"]`)),
		); err != nil {
			t.Fatal(err)
		}
		waitForText(t, ctx, "main h1", "Apps", uiWait)
		waitFor(t, ctx, "the echo card", `.app-card[data-app="echo"]`, uiWait)
	}
	openForm := func(t *testing.T) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`.app-card[data-app="echo"] button.app-launch`))); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "the launch form", `#app-form[data-app="echo"]`, uiWait)
	}
	setGreeting := func(t *testing.T, v string) {
		t.Helper()
		evalJS[bool](t, ctx, `document.querySelector("#app-field-greeting").value = ""; true`)
		if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS(`#app-field-greeting`), v)); err != nil {
			t.Fatal(err)
		}
	}
	chooseResource := func(t *testing.T, name string) {
		t.Helper()
		if !evalJS[bool](t, ctx, fmt.Sprintf(`(() => { const s = document.querySelector("#app-resource");
			const o = [...s.options].find((o) => o.textContent.startsWith(%s)); if (!o) return false; s.value = o.value; return true })()`, jsString(name+" ("))) {
			t.Fatalf("the compute-resource dropdown has no %q: %s", name, pageText(t, ctx, "#app-resource"))
		}
		evalJS[bool](t, ctx, `document.querySelector("#app-project").value = "fraud-models"; true`)
	}
	submit := func(t *testing.T) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#app-form button[type="submit"]`))); err != nil {
			t.Fatal(err)
		}
	}
	count := func(t *testing.T) int {
		t.Helper()
		d := ts.mustGQL(t, alice, `{ appInstances { id } }`, nil)
		return len(listValues(d, "id", "appInstances"))
	}

	var id string
	t.Run("a member launches from the schema's form, sees it placed live, and stops it", func(t *testing.T) {
		signInAs(t, alice)
		if text := pageText(t, ctx, `.app-card[data-app="echo"]`); !strings.Contains(text, "session") || !strings.Contains(text, "a web page that says hello") {
			t.Fatalf("the echo card reads %q: want its kind and description", text)
		}
		// A member has no lock button.
		if n := evalJS[int](t, ctx, `document.querySelectorAll("button.app-lock").length`); n != 0 {
			t.Fatalf("a member sees %d lock buttons", n)
		}
		openForm(t)
		// The form follows the schema: each field, its default, its
		// description, the enum's choices, the secret's hint; the
		// dropdown lists the member's compute resources by name only.
		if v := evalJS[string](t, ctx, `document.querySelector("#app-field-workers").value`); v != "2" {
			t.Errorf("workers shows %q, want its default 2", v)
		}
		if v := evalJS[string](t, ctx, `document.querySelector("#app-field-debug").type`); v != "checkbox" {
			t.Errorf("debug is a %q input, want a checkbox", v)
		}
		if opts := pageText(t, ctx, "#app-field-colour"); !strings.Contains(opts, "red") || !strings.Contains(opts, "blue") {
			t.Errorf("colour offers %q, want red and blue", opts)
		}
		formText := pageText(t, ctx, "#app-form")
		for _, want := range []string{"greeting *", "what the page says first", "vault secret", "Compute resource"} {
			if !strings.Contains(formText, want) {
				t.Errorf("the form lacks %q:\n%s", want, formText)
			}
		}
		resources := pageText(t, ctx, "#app-resource")
		if !strings.Contains(resources, "1 GPU (ml-research)") || strings.Contains(resources, "(vision)") || strings.Contains(resources, "(nlp)") {
			t.Errorf("the compute-resource dropdown lists %q: want ml-research's resources only", resources)
		}
		screenshot(t, ctx, shots, "apps-form.png")

		// A value the schema refuses: the server's message, nothing launched.
		setGreeting(t, "hello there")
		chooseResource(t, "1 GPU")
		submit(t)
		waitFor(t, ctx, "the refusal", "#app-launch-result .error", uiWait)
		if msg := pageText(t, ctx, "#app-launch-result"); !strings.Contains(msg, `launch form of app 'echo': field "greeting"`) || !strings.Contains(msg, "change the value") {
			t.Fatalf("the refusal reads %q: want the server's message naming the field", msg)
		}
		if n := count(t); n != 0 {
			t.Fatalf("a refused launch made %d instances", n)
		}

		evalJS[bool](t, ctx, `window.__noReload = true; true`)
		setGreeting(t, "hi")
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#app-share`))); err != nil {
			t.Fatal(err)
		}
		submit(t)
		waitFor(t, ctx, "the launch's answer", "#app-launch-result p.ok", uiWait)
		id = evalJS[string](t, ctx, `document.querySelector("#app-launch-result p.ok").dataset.instance`)
		row := fmt.Sprintf(`#apps-instances tr[data-instance=%q]`, id)
		waitFor(t, ctx, "the instance, waiting", row+`[data-state="waiting"]`, uiWait)
		d := ts.mustGQL(t, alice, `query($id: ID!) { appInstance(id: $id) { url shareWithGroup values task { project { name } } } }`, map[string]any{"id": id})
		if str(d, "appInstance", "values", "greeting") != "hi" || path(d, "appInstance", "values", "workers") != float64(2) ||
			path(d, "appInstance", "shareWithGroup") != true || str(d, "appInstance", "task", "project", "name") != "fraud-models" {
			t.Fatalf("the instance the form launched: %v", d)
		}
		text := pageText(t, ctx, row)
		if !strings.Contains(text, "1 GPU") || !strings.Contains(text, str(d, "appInstance", "url")) || !strings.Contains(text, "alice") {
			t.Fatalf("the instance row reads %q: want its compute resource, URL and owner", text)
		}

		// An engine pass places it; the page, following the queues of its
		// compute resources over subscriptions, shows it without a reload.
		waitFor(t, ctx, "the live indicator", `#live[data-mode="live"]`, uiWait)
		place(t, ts)
		waitFor(t, ctx, "the instance, placed", row+`[data-state="placed"]`, uiWait)
		if !evalJS[bool](t, ctx, `window.__noReload === true`) {
			t.Fatal("the page was reloaded")
		}
		if href := evalJS[string](t, ctx, fmt.Sprintf(`document.querySelector(%s).getAttribute("href")`, jsString(row+" a.app-open"))); href != "/apps/"+id+"/" {
			t.Errorf("the open link goes to %q, want /apps/%s/", href, id)
		}
		screenshot(t, ctx, shots, "apps-placed.png")

		// The worker starts it and reports it ready where it listens; the
		// row turns ready live, and Open signs this browser in to the
		// instance through the router and shows the app in a new tab.
		inst := startInstance(t)
		a := w.claim(id)
		w.heartbeatApp(a, inst.addr)
		waitFor(t, ctx, "the instance, ready", row+`[data-state="ready"]`, uiWait)
		screenshot(t, ctx, shots, "apps-ready.png")
		body := openApp(t, ctx, row+" a.app-open", "/apps/"+id+"/")
		if !strings.Contains(body, "hello from the instance") {
			t.Fatalf("the opened tab reads %q: want the instance's page", body)
		}
		if got := inst.seen(); got.auth != "" || strings.Contains(got.cookie, "klique_app") || got.prefix != "/apps/"+id {
			t.Fatalf("the instance saw Authorization %q, Cookie %q, X-Forwarded-Prefix %q: want no credential and the prefix", got.auth, got.cookie, got.prefix)
		}

		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(row+" button.app-stop"))); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "the instance, stopped", row+`[data-state="stopped"]`, uiWait)
		waitForText(t, ctx, row, "stopped by alice", uiWait)
		d = ts.mustGQL(t, alice, `query($id: ID!) { appInstance(id: $id) { state } }`, map[string]any{"id": id})
		if str(d, "appInstance", "state") != "stopped" {
			t.Fatalf("after Stop the instance is %v", d)
		}
	})
	if id == "" {
		t.Fatal("the launch did not get as far as an instance")
	}

	t.Run("an admin locks the app and the member's launch is refused with the lock's message", func(t *testing.T) {
		signInAs(t, adminKey)
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`.app-card[data-app="echo"] button.app-lock`))); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "the locked badge", `.app-card[data-app="echo"][data-locked="true"] .app-locked`, uiWait)
		d := ts.mustGQL(t, alice, `{ app(name: "echo") { locked } }`, nil)
		if path(d, "app", "locked") != true {
			t.Fatalf("after Lock the app reads %v", d)
		}
		screenshot(t, ctx, shots, "apps-admin-locked.png")
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#signout"))); err != nil {
			t.Fatal(err)
		}

		signInAs(t, alice)
		waitFor(t, ctx, "the locked badge, for the member", `.app-card[data-app="echo"] .app-locked`, uiWait)
		before := count(t)
		openForm(t)
		setGreeting(t, "hi")
		chooseResource(t, "1 GPU")
		submit(t)
		waitFor(t, ctx, "the refusal", "#app-launch-result .error", uiWait)
		if msg := pageText(t, ctx, "#app-launch-result"); !strings.Contains(msg, "app 'echo' is locked by an admin") || !strings.Contains(msg, "ask an admin to unlock it") {
			t.Fatalf("the refusal reads %q: want the lock's message", msg)
		}
		if n := count(t); n != before {
			t.Fatalf("a launch of a locked app made an instance (%d, was %d)", n, before)
		}
		screenshot(t, ctx, shots, "apps-locked-refused.png")
	})
}
