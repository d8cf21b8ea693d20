package agents_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/klique-ai/klique/agents/worker"
	"github.com/klique-ai/klique/internal/eventually"
	"github.com/klique-ai/klique/internal/router"
)

// routerEstate has two groups, so that a member of another group can be
// refused, the probe app of testdata/routerprobe.py, and a static route
// (its URL endpoint is the gateway's; the router serves the route's
// instances only).
func routerEstate(t *testing.T) string {
	probe, err := filepath.Abs("testdata/routerprobe.py")
	if err != nil {
		t.Fatal(err)
	}
	return oneGroup().group("vision").String() + fmt.Sprintf(`gateway:
  routes:
    - {name: probe-route, endpoints: ["http://127.0.0.1:9/v1"]}
apps:
  catalogue:
    - name: probe
      kind: serving
      port: 8000
      healthPath: /
      run: {process: "python3 %s {port}"}
    - name: probe-based
      kind: session
      port: 8000
      healthPath: /
      run: {process: "python3 %s {port} --base-url=/apps/{instance}/"}
`, probe, probe)
}

// routerBed is a control plane, a process-mode worker with two GPUs, and
// the callers the router tests need.
type routerBed struct {
	*e2e
	logs                *syncWriter
	victor, otherTenant string
}

func startRouterBed(t *testing.T) *routerBed {
	t.Helper()
	e := startControlPlane(t, routerEstate(t))
	_, logs := e.startWorkerTuned(t, "gpu-host-router", "0,1", func(c *worker.Config) {
		c.AppProbeInterval = 100 * time.Millisecond
	})
	b := &routerBed{e2e: e, logs: logs, victor: e.member(t, "victor", "vision")}
	b.otherTenant = str(gql(t, e.url, adminKey, `mutation { createTenant(input: {name: "acme"}) { secret } }`, nil), "createTenant", "secret")
	return b
}

// launch starts the probe app as alice and waits until it is ready.
func (b *routerBed) launch(t *testing.T, route string, ready bool) string {
	return b.launchApp(t, "probe", route, ready)
}

func (b *routerBed) launchApp(t *testing.T, app, route string, ready bool) string {
	t.Helper()
	in := map[string]any{"app": app, "computeResource": "1 GPU", "project": "fraud-models", "values": map[string]any{}}
	if route != "" {
		in["route"] = route
	}
	id := str(gql(t, b.url, b.alice, `mutation($in: LaunchAppInput!) { launchApp(input: $in) { id } }`, map[string]any{"in": in}), "launchApp", "id")
	if !ready {
		return id
	}
	waitInstance(t, b.url, b.alice, instanceQuery, id, b.logs, "the probe app to be ready", instanceReady)
	return id
}

// call makes a request through the router with a credential (none when
// empty), and returns the status and the body.
func call(t *testing.T, client *http.Client, method, u, cred string, hdr map[string]string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cred != "" {
		req.Header.Set("Authorization", "Bearer "+cred)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header
}

// seen is what the probe app reports it was sent.
type seen struct {
	Path    string            `json:"path"`
	Port    int               `json:"port"`
	Headers map[string]string `json:"headers"`
}

func decodeSeen(t *testing.T, body string) seen {
	t.Helper()
	var s seen
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatalf("the app's answer %q: %v", body, err)
	}
	return s
}

// TestRouterServesAnAppInstance runs the real control plane, its embedded
// router and a process-mode worker on loopback: the probe app opened
// through /apps/{id}/ by its owner with a bearer key and with the cookie
// of the sign-in hop; refused (404) for a member of another group and for
// another tenant, 401 without a credential; the app never sees the
// caller's credentials; a WebSocket echoes through the router and
// server-sent events arrive one by one; the traffic is noted for the idle
// limits; a static route balances over the ready instances launched with
// it; an instance still waiting for GPUs answers 503 saying so.
func TestRouterServesAnAppInstance(t *testing.T) {
	t.Parallel()
	b := startRouterBed(t)
	id := b.launch(t, "probe-route", true)
	base := b.url + "/apps/" + id

	t.Run("the owner opens it with a bearer key, and the app sees no credential", func(t *testing.T) {
		status, body, _ := call(t, nil, "GET", base+"/headers?x=1", b.alice, map[string]string{"X-Api-Key": b.alice, "Cookie": "theirs=1; " + router.CookieName + "=leak"})
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, body)
		}
		s := decodeSeen(t, body)
		if s.Path != "/headers?x=1" {
			t.Fatalf("the app was sent path %q, want /headers?x=1 (the /apps/{id} prefix stripped)", s.Path)
		}
		if s.Headers["X-Forwarded-Prefix"] != "/apps/"+id {
			t.Fatalf("X-Forwarded-Prefix %q", s.Headers["X-Forwarded-Prefix"])
		}
		for k, v := range s.Headers {
			if strings.EqualFold(k, "Authorization") || strings.EqualFold(k, "X-Api-Key") || strings.Contains(v, b.alice) || strings.Contains(v, router.CookieName) {
				t.Fatalf("the app was sent the caller's credential: %s: %s", k, v)
			}
		}
		if s.Headers["Cookie"] != "theirs=1" {
			t.Fatalf("the app's own cookies should pass, the router's should not: Cookie %q", s.Headers["Cookie"])
		}
	})

	t.Run("refused: another group's member and another tenant get 404, no credential 401", func(t *testing.T) {
		for who, cred := range map[string]string{"a member of another group": b.victor, "another tenant's admin": b.otherTenant} {
			status, body, _ := call(t, nil, "GET", base+"/", cred, nil)
			if status != http.StatusNotFound || !strings.Contains(body, "no app instance") {
				t.Fatalf("%s: %d %s, want 404 no app instance", who, status, body)
			}
		}
		status, body, _ := call(t, nil, "GET", base+"/", "", nil)
		if status != http.StatusUnauthorized || !strings.Contains(body, "sign in") {
			t.Fatalf("no credential: %d %s", status, body)
		}
		status, body, _ = call(t, nil, "GET", base+"/", "kq_not_a_real_key", nil)
		if status != http.StatusUnauthorized {
			t.Fatalf("a bad credential: %d %s", status, body)
		}
		status, _, hdr := call(t, &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, "GET", base, b.alice, nil)
		if status != http.StatusPermanentRedirect || hdr.Get("Location") != "/apps/"+id+"/" {
			t.Fatalf("/apps/{id} without its slash: %d to %q", status, hdr.Get("Location"))
		}
	})

	t.Run("a browser signs in and opens it with the cookie", func(t *testing.T) {
		jar, _ := cookiejar.New(nil)
		browser := &http.Client{Jar: jar}
		resp, err := browser.PostForm(base+router.SignInPath, url.Values{"token": {b.alice}})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/apps/"+id+"/" {
			t.Fatalf("after the sign-in: %d at %s: %s", resp.StatusCode, resp.Request.URL, body)
		}
		var kept *http.Cookie
		for _, c := range resp.Request.Response.Cookies() {
			if c.Name == router.CookieName {
				kept = c
			}
		}
		if kept == nil || kept.Path != "/apps/"+id+"/" || !kept.HttpOnly || kept.SameSite != http.SameSiteLaxMode || kept.Value == b.alice {
			t.Fatalf("the sign-in's cookie %+v: want one scoped to the app's path, HttpOnly, SameSite=Lax, holding a token and not the key", kept)
		}
		status, body2, _ := call(t, browser, "GET", base+"/headers", "", nil)
		if status != http.StatusOK || strings.Contains(body2, kept.Value) {
			t.Fatalf("with the cookie: %d %s", status, body2)
		}
		// Another group's member cannot sign in to it.
		resp, err = (&http.Client{}).PostForm(base+router.SignInPath, url.Values{"token": {b.victor}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || len(resp.Cookies()) != 0 {
			t.Fatalf("victor's sign-in: %d, cookies %v", resp.StatusCode, resp.Cookies())
		}
		// A sign-in posted from another site is refused.
		req, _ := http.NewRequest("POST", base+router.SignInPath, strings.NewReader("token="+b.alice))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "https://evil.example")
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
			t.Fatalf("a cross-site sign-in: %d", resp.StatusCode)
		}
	})

	t.Run("a WebSocket echoes through the router", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/ws", &websocket.DialOptions{
			HTTPHeader: http.Header{"Authorization": {"Bearer " + b.alice}}})
		if err != nil {
			t.Fatalf("dial the app's WebSocket through the router: %v", err)
		}
		defer c.CloseNow()
		for _, msg := range []string{"hello", "kernel message 2"} {
			if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
				t.Fatal(err)
			}
			_, got, err := c.Read(ctx)
			if err != nil || string(got) != "echo: "+msg {
				t.Fatalf("echo of %q: %q %v", msg, got, err)
			}
		}
		_ = c.Close(websocket.StatusNormalClosure, "")
	})

	t.Run("server-sent events arrive one by one", func(t *testing.T) {
		req, _ := http.NewRequest("GET", base+"/sse", nil)
		req.Header.Set("Authorization", "Bearer "+b.alice)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var at []time.Time
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data: ") {
				at = append(at, time.Now())
			}
		}
		// The app sleeps 400 ms between events: buffered, they would
		// arrive together at the end.
		if len(at) != 3 || at[1].Sub(at[0]) < 250*time.Millisecond || at[2].Sub(at[1]) < 250*time.Millisecond {
			t.Fatalf("events arrived at %v; want 3, about 400 ms apart", at)
		}
	})

	t.Run("the traffic is noted for the idle limits", func(t *testing.T) {
		if n := b.app.AppActivity.Of(id); n.Bytes < 1000 || time.Since(n.Last) > time.Minute {
			t.Fatalf("activity of the instance: %+v", n)
		}
	})

	t.Run("a static route balances over its ready instances", func(t *testing.T) {
		second := b.launch(t, "probe-route", true)
		ports := map[int]bool{}
		for range 6 {
			status, body, _ := call(t, nil, "GET", b.url+"/routes/probe-route/v1/models", b.alice, nil)
			if status != http.StatusOK {
				t.Fatalf("through the route: %d %s", status, body)
			}
			s := decodeSeen(t, body)
			if s.Path != "/v1/models" {
				t.Fatalf("the route sent path %q", s.Path)
			}
			ports[s.Port] = true
		}
		if len(ports) != 2 {
			t.Fatalf("6 calls reached %d instances, want both", len(ports))
		}
		// The route is the tenant's, but none of its instances was shared
		// with victor: to him it has no endpoint.
		status, body, _ := call(t, nil, "GET", b.url+"/routes/probe-route/", b.victor, nil)
		if status != http.StatusServiceUnavailable || !strings.Contains(body, "no running endpoint") {
			t.Fatalf("victor through the route: %d %s", status, body)
		}
		status, body, _ = call(t, nil, "GET", b.url+"/routes/probe-route/", b.otherTenant, nil)
		if status != http.StatusNotFound || !strings.Contains(body, "no route 'probe-route'") {
			t.Fatalf("another tenant through the route: %d %s", status, body)
		}
		status, body, _ = call(t, nil, "GET", b.url+"/routes/no-such-route/", b.alice, nil)
		if status != http.StatusNotFound || !strings.Contains(body, "no route 'no-such-route'") {
			t.Fatalf("an unknown route: %d %s", status, body)
		}

		t.Log("with both GPUs held, a third instance waits, and its address says so")
		third := b.launch(t, "", false)
		status, body, hdr := call(t, nil, "GET", b.url+"/apps/"+third+"/", b.alice, nil)
		if status != http.StatusServiceUnavailable || !strings.Contains(body, "waiting for GPUs") || hdr.Get("Retry-After") == "" {
			t.Fatalf("a waiting instance: %d %s", status, body)
		}

		t.Log("stopped, the route's instances are dropped: the route answers 503 naming it")
		for _, x := range []string{id, second, third} {
			gql(t, b.url, b.alice, `mutation($id: ID!) { stopApp(id: $id) { state } }`, map[string]any{"id": x})
		}
		eventually.True(t, "", func() bool {
			status, body, _ = call(t, nil, "GET", b.url+"/routes/probe-route/", b.alice, nil)
			return status == http.StatusServiceUnavailable && strings.Contains(body, "route 'probe-route' has no running endpoint")
		})
		// The router keeps a resolved instance for its cache time (5 s): a
		// call in that window is answered 502 by the worker's refusal and
		// drops the entry; after it, the instance's end is said.
		eventually.True(t, "", func() bool {
			status, body, _ = call(t, nil, "GET", base+"/", b.alice, nil)
			return status == http.StatusServiceUnavailable && strings.Contains(body, "has ended (state stopped)")
		})
	})

	t.Run("an app whose run line names its own path is sent the path whole", func(t *testing.T) {
		based := b.launchApp(t, "probe-based", "", true)
		status, body, _ := call(t, nil, "GET", b.url+"/apps/"+based+"/lab/tree", b.alice, nil)
		if status != http.StatusOK {
			t.Fatalf("%d %s", status, body)
		}
		if s := decodeSeen(t, body); s.Path != "/apps/"+based+"/lab/tree" {
			t.Fatalf("an app started with its base URL /apps/{instance}/ was sent %q", s.Path)
		}
	})
}
