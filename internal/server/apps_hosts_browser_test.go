package server_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/klique-ai/klique/internal/config"
)

// appsDomain is the test's wildcard domain for app instances; Chromium
// is told that every name under it is this machine.
const appsDomain = "apps.test"

// TestAppInstancesAreIsolatedInTheBrowser reproduces issue 39's defect 6
// in a real browser: a member's notebook page, opened by a colleague,
// ran script in the origin of the dashboard and of every instance the
// colleague had open. With KLIQUE_APPS_DOMAIN each instance is served on
// a host of its own ({id}.apps.test), and a page of instance A, opened
// from the dashboard's link in the very tab the viewer signed in to the
// dashboard with, can read neither a response of instance B (which the
// browser is signed in to), nor the dashboard's storage, nor call the API
// with the viewer's credentials; /apps/{id}/ on the control plane's host
// sends the browser to the instance's host, where the dashboard's Open
// link has signed it in, and the dashboard and the API do not answer
// there.
func TestAppInstancesAreIsolatedInTheBrowser(t *testing.T) {
	requireChromium(t)
	t.Parallel()
	// The control plane's port is known before it starts: the instances'
	// URLs carry it (the scheme and port of KLIQUE_PUBLIC_URL).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	ts := startServer(t, func(c *config.Config) {
		c.Listen, c.PublicURL, c.AppsDomain = addr, "http://"+addr, appsDomain
	})
	alice := dashboardMember(t, ts)
	w := onpremWorker(t, ts)
	// The instances listen on this machine's loopback: the pool is
	// declared local (the router's address rule).
	declareOnprem(t, ts, "    local: true\n")
	ts.mustGQL(t, adminKey, `mutation($in: AppInput!) { putApp(input: $in) { app { name } } }`, map[string]any{"in": map[string]any{
		"name": "echo", "kind": "session", "port": 8000, "run": map[string]any{"process": "python3 -m http.server {port}"}}})

	// Two instances: A, whose page is the attacker's, and B, which has
	// something to steal.
	serve := func(name, secret string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/secret" {
				_, _ = io.WriteString(w, secret)
				return
			}
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = io.WriteString(w, "<!doctype html><title>"+name+"</title><h1>hello from instance "+name+"</h1>")
		}))
		t.Cleanup(srv.Close)
		return strings.TrimPrefix(srv.URL, "http://")
	}
	launch := func(addr string) (id, url string) {
		d := ts.mustGQL(t, alice, launchMutation, map[string]any{"in": map[string]any{"app": "echo", "computeResource": "1 GPU", "project": "fraud-models"}})
		id = str(d, "launchApp", "id")
		place(t, ts)
		w.heartbeatApp(w.claim(id), addr)
		return id, str(d, "launchApp", "url")
	}
	idA, urlA := launch(serve("A", "A-SECRET"))
	idB, urlB := launch(serve("B", "B-SECRET-7781"))
	for id, u := range map[string]string{idA: urlA, idB: urlB} {
		if want := "http://" + id + "." + appsDomain + ":" + strings.Split(addr, ":")[1] + "/"; u != want {
			t.Errorf("instance %s is served at %q, want its own host %s", id, u, want)
		}
	}

	ctx := newBrowser(t, chromedp.Flag("host-resolver-rules", "MAP *."+appsDomain+" 127.0.0.1"))
	// Sign in to the dashboard; it keeps its key in this tab's
	// sessionStorage, and something of its own in localStorage.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(ts.url+"/#/apps"),
		chromedp.WaitVisible(chromedp.CSS("#apikey")),
		chromedp.SendKeys(chromedp.CSS("#apikey"), alice),
		chromedp.Click(chromedp.CSS(`#signin button[type="submit"]`)),
	); err != nil {
		t.Fatal(err)
	}
	waitForText(t, ctx, "main h1", "Apps", uiWait)
	evalJS[bool](t, ctx, `localStorage.setItem("dashboard.marker", "DASHBOARD-STORAGE"); true`)
	if !strings.Contains(evalJS[string](t, ctx, `JSON.stringify(Object.entries(sessionStorage))`), alice) {
		t.Fatal("the dashboard does not keep its key in sessionStorage: the storage check below would prove nothing")
	}

	// Open B, then A, from the dashboard's links: each tab is signed in
	// on the instance's own host and shows the app.
	for id, u := range map[string]string{idB: urlB, idA: urlA} {
		row := fmt.Sprintf(`#apps-instances tr[data-instance=%q][data-state="ready"]`, id)
		waitFor(t, ctx, "instance "+id+", ready", row, uiWait)
		if body := openApp(t, ctx, row+" a.app-open", strings.TrimPrefix(u, "http://")); !strings.Contains(body, "hello from instance") {
			t.Fatalf("the opened tab of %s reads %q", id, body)
		}
	}

	// The viewer, in the dashboard's own tab, follows instance A's path
	// on the control plane: the browser is sent to A's host.
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.url+"/apps/"+idA+"/")); err != nil {
		t.Fatal(err)
	}
	waitForText(t, ctx, "h1", "hello from instance A", uiWait)
	// A's page tries everything it can with what the browser holds.
	attack := fmt.Sprintf(`(async () => {
		const out = {origin: location.origin};
		out.session = JSON.stringify(Object.entries(sessionStorage));
		out.local = String(localStorage.getItem("dashboard.marker"));
		const get = async (u, init) => {
			try { const r = await fetch(u, Object.assign({credentials: "include"}, init || {})); return r.status + " " + await r.text(); }
			catch (e) { return "blocked: " + e.message; }
		};
		out.b = await get(new URL("secret", new URL(%s, location.href)).href);
		const key = sessionStorage.getItem("klique.apiKey") || "";
		const api = {method: "POST", headers: Object.assign({"Content-Type": "application/json"}, key ? {Authorization: "Bearer " + key} : {}),
			body: JSON.stringify({query: "{ me { user { name } } }"})};
		out.api = await get(%s + "/graphql", api);
		out.apiHere = await get("/graphql", api);
		out.dashboardHere = (await get("/ui/js/api.js")).slice(0, 200);
		return JSON.stringify(out);
	})()`, jsString(urlB), jsString(ts.url))
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](attack, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("run instance A's script: %v", err)
	}
	t.Logf("what instance A's page could reach: %s", got)
	if !strings.Contains(got, `"origin":"http://`+idA+"."+appsDomain) {
		t.Errorf("the page is not on instance A's own host: %s", got)
	}
	for what, leak := range map[string]string{
		"instance B's response":        "B-SECRET-7781",
		"the dashboard's key":          alice,
		"the dashboard's localStorage": "DASHBOARD-STORAGE",
		"the API, as the viewer":       `"name":"alice"`,
		"the dashboard's script":       "sessionStorage",
	} {
		if strings.Contains(got, leak) {
			t.Errorf("a page of instance A read %s: %s", what, got)
		}
	}

	// The controls: B's own page reads B's response, and the viewer's key
	// does call the API, so the refusals above are the origins' doing.
	if err := chromedp.Do(ctx, chromedp.Navigate(ts.url+"/apps/"+idB+"/")); err != nil {
		t.Fatal(err)
	}
	waitForText(t, ctx, "h1", "hello from instance B", uiWait)
	if own, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch("secret").then((r) => r.text())`, chromedp.EvalAwaitPromise)); err != nil || own != "B-SECRET-7781" {
		t.Fatalf("B's own page read %q (%v): want its secret", own, err)
	}
	if me := ts.mustGQL(t, alice, `{ me { user { name } } }`, nil); str(me, "me", "user", "name") != "alice" {
		t.Fatalf("the viewer's key: %v", me)
	}
}
