package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/eventually"
)

// testInstance is an app instance's server as its worker would run it:
// a page that says hello, recording the headers the router sent it.
type testInstance struct {
	addr string
	mu   sync.Mutex
	last instanceSaw
}

type instanceSaw struct{ auth, cookie, prefix string }

func startInstance(t *testing.T) *testInstance {
	t.Helper()
	inst := &testInstance{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inst.mu.Lock()
		inst.last = instanceSaw{auth: r.Header.Get("Authorization"), cookie: r.Header.Get("Cookie"), prefix: r.Header.Get("X-Forwarded-Prefix")}
		inst.mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, "<!doctype html><title>echo</title><h1>hello from the instance</h1>")
	}))
	t.Cleanup(srv.Close)
	inst.addr = strings.TrimPrefix(srv.URL, "http://")
	return inst
}

func (i *testInstance) seen() instanceSaw {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.last
}

// heartbeatApp reports the claimed instance a ready, listening at addr,
// as a worker does once its health path answers.
func (w *agentWorker) heartbeatApp(a *agentapi.Assignment, addr string) {
	w.t.Helper()
	req := agentapi.HeartbeatRequest{WorkerID: w.id, Tasks: []agentapi.TaskHeartbeat{{TaskID: a.TaskID, Attempt: a.Attempt,
		App: &agentapi.AppStatus{Ready: true, Address: addr}}}}
	if code := agentCall(w.t, w.ts, w.secret, http.MethodPost, agentapi.PathHeartbeat, req, nil); code != http.StatusOK && code != http.StatusNoContent {
		w.t.Fatalf("heartbeat %s as ready at %s: %d", a.TaskID, addr, code)
	}
}

// openApp clicks the dashboard's Open link of an instance, which posts
// the dashboard's token to the router's sign-in hop in a new tab; the
// hop sets the instance's cookie and redirects to the app. It returns the
// app page's text once that tab is on it.
func openApp(t *testing.T, ctx context.Context, link, path string) string {
	t.Helper()
	// The page redraws its list as instances change: a row found just
	// before it was redrawn is gone by the click ("Could not find node"),
	// before any click was sent, so the click is tried again on the new row.
	var clickErr error
	if !eventually.Poll(uiWait, func() bool {
		clickErr = chromedp.Do(ctx, chromedp.Click(chromedp.CSS(link)))
		if clickErr != nil && !strings.Contains(clickErr.Error(), "Could not find node") {
			t.Fatal(clickErr)
		}
		return clickErr == nil
	}) {
		t.Fatalf("click %s: %v", link, clickErr)
	}
	// The tab is found among the browser's targets: it has no opener
	// (the form is rel=noopener), so it is not this tab's child.
	var id target.ID
	var seen []string
	if !eventually.Poll(uiWait, func() bool {
		infos, err := chromedp.Targets(ctx)
		if err != nil {
			t.Fatalf("list the browser's tabs: %v", err)
		}
		seen = seen[:0]
		for _, info := range infos {
			seen = append(seen, info.URL)
			if info.Type == "page" && strings.Contains(info.URL, path) {
				id = info.TargetID
			}
		}
		return id != ""
	}) {
		t.Fatalf("no tab opened on %s within %s; the tabs: %q", path, uiWait, seen)
	}
	tab, closeTab := chromedp.NewContext(ctx, chromedp.WithTargetID(id))
	defer closeTab()
	var text, body string
	var err error
	if !eventually.Poll(uiWait, func() bool {
		var page []string
		if page, err = chromedp.Run(tab, chromedp.Evaluate[[]string](`[document.location.href, document.readyState, document.body ? document.body.innerText : ""]`)); err != nil {
			return false
		}
		text, body = page[0]+": "+page[2], page[2]
		return strings.Contains(page[0], path) && !strings.Contains(page[0], "/_klique/") && page[1] == "complete"
	}) {
		t.Fatalf("the opened tab did not reach %s within %s: %q (%v)", path, uiWait, text, err)
	}
	return body
}
