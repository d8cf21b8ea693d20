package router

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/appnet"
	"github.com/klique-ai/klique/internal/model"
)

// hostsResolver lets the credential "kq_alice" open instance "t1"
// (listening at addr, on a local pool) and route "r1", and nothing else.
type hostsResolver struct {
	addr string
	keep bool // the app is told its own path (KeepPrefix)
}

func (f hostsResolver) Instance(_ context.Context, cred, id string) (*Instance, error) {
	if cred != "kq_alice" && cred != "tok_alice" {
		return nil, unauthenticated("unknown credential")
	}
	if id != "t1" {
		return nil, notFound("no app instance '" + id + "'")
	}
	return &Instance{ID: "t1", Name: "echo-alice-1", State: "ready", KeepPrefix: f.keep, Target: appnet.Target{TaskID: "t1", Address: f.addr, Allow: appnet.Allow{Any: true}}}, nil
}

func (f hostsResolver) Route(ctx context.Context, cred, route string) ([]*Instance, error) {
	in, err := f.Instance(ctx, cred, "t1")
	if err != nil {
		return nil, err
	}
	return []*Instance{in}, nil
}

func (f hostsResolver) CookieCredential(context.Context, string) (string, time.Time, error) {
	return "tok_alice", time.Now().Add(time.Hour), nil
}

// TestInstanceHosts checks the router with each instance on a host of its
// own: the control plane's /apps/{id}/ sends the browser there; the
// sign-in on the instance's host takes the dashboard's origin only and
// sets a host-only cookie (__Host- and Secure over TLS), which the app
// never sees; a route on the control plane's host takes no cookie and is
// sandboxed.
func TestInstanceHosts(t *testing.T) {
	var seen http.Header
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Clone()
		_, _ = io.WriteString(w, "app saw "+r.URL.Path)
	}))
	defer app.Close()
	rt := New(Config{Resolver: hostsResolver{addr: strings.TrimPrefix(app.URL, "http://")}, Reacher: &appnet.Direct{},
		Hosts: model.AppHostsFor("apps.example.com", "https://klique.example.com"), SignInOrigins: []string{"https://klique.example.com"}})
	do := func(method, target string, hdr map[string]string, body string, secure bool) *http.Response {
		t.Helper()
		req := httptest.NewRequest(method, target, strings.NewReader(body))
		if secure {
			req.TLS = &tls.ConnectionState{}
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		rt.ServeHTTP(w, req)
		return w.Result()
	}
	read := func(r *http.Response) string { b, _ := io.ReadAll(r.Body); return string(b) }

	// The control plane's path goes to the instance's host, rest and query kept.
	r := do("GET", "https://klique.example.com/apps/t1/lab/tree?x=1", nil, "", true)
	if r.StatusCode != http.StatusTemporaryRedirect || r.Header.Get("Location") != "https://t1.apps.example.com/lab/tree?x=1" {
		t.Fatalf("/apps/t1/… on the control plane: %d %q", r.StatusCode, r.Header.Get("Location"))
	}
	if loc := do("GET", "https://klique.example.com/apps/t1", nil, "", true).Header.Get("Location"); loc != "https://t1.apps.example.com/" {
		t.Fatalf("/apps/t1 on the control plane goes to %q", loc)
	}

	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": "https://klique.example.com"}
	signIn := url.Values{"token": {"kq_alice"}}.Encode()
	for origin, want := range map[string]int{
		"https://t1.apps.example.com": http.StatusForbidden, // the instance's own pages
		"https://t2.apps.example.com": http.StatusForbidden, // another instance's
		"https://evil.example":        http.StatusForbidden,
		"null":                        http.StatusForbidden,
		"https://klique.example.com":  http.StatusSeeOther, // the dashboard
	} {
		form["Origin"] = origin
		if r := do("POST", "https://t1.apps.example.com/_klique/signin", form, signIn, true); r.StatusCode != want {
			t.Errorf("a sign-in from %s: %d, want %d", origin, r.StatusCode, want)
		}
	}
	form["Origin"] = "https://klique.example.com"
	r = do("POST", "https://t1.apps.example.com/_klique/signin", form, signIn, true)
	c := r.Cookies()
	if len(c) != 1 || c[0].Name != HostCookieName || c[0].Value != "tok_alice" || c[0].Domain != "" || c[0].Path != "/" || !c[0].HttpOnly || !c[0].Secure ||
		c[0].SameSite != http.SameSiteLaxMode || r.Header.Get("Location") != "/" {
		t.Fatalf("the sign-in set %v and went to %q: want a host-only __Host- cookie for / and the app's root", r.Header.Values("Set-Cookie"), r.Header.Get("Location"))
	}
	if r := do("POST", "http://t1.apps.example.com/_klique/signin", form, signIn, false); len(r.Cookies()) != 1 || r.Cookies()[0].Name != CookieName || r.Cookies()[0].Domain != "" {
		t.Fatalf("over plain HTTP the sign-in set %v", r.Header.Values("Set-Cookie"))
	}

	// The cookie opens the instance on its host, and only there; the app
	// never sees it; the path reaches the app whole.
	cookie := map[string]string{"Cookie": HostCookieName + "=tok_alice; _xsrf=abc"}
	if r := do("GET", "https://t1.apps.example.com/lab?x=1", cookie, "", true); r.StatusCode != http.StatusOK || read(r) != "app saw /lab" {
		t.Fatalf("the instance on its host: %d", r.StatusCode)
	}
	if seen.Get("Cookie") != "_xsrf=abc" || seen.Get("X-Forwarded-Prefix") != "" {
		t.Fatalf("the app saw Cookie %q, X-Forwarded-Prefix %q", seen.Get("Cookie"), seen.Get("X-Forwarded-Prefix"))
	}
	if r := do("GET", "https://t1.apps.example.com/", map[string]string{"Cookie": CookieName + "=tok_alice"}, "", true); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("over TLS a cookie without the __Host- prefix (one a sibling could set) opened it: %d", r.StatusCode)
	}
	if r := do("GET", "https://t2.apps.example.com/", cookie, "", true); r.StatusCode != http.StatusNotFound {
		t.Fatalf("another instance's host: %d", r.StatusCode)
	}

	// A route on the control plane's host: programs only, sandboxed.
	if r := do("GET", "https://klique.example.com/routes/r1/v1/models", map[string]string{"Cookie": CookieName + "=tok_alice"}, "", true); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a route opened with a cookie: %d", r.StatusCode)
	}
	r = do("GET", "https://klique.example.com/routes/r1/v1/models", map[string]string{"Authorization": "Bearer kq_alice"}, "", true)
	if r.StatusCode != http.StatusOK || r.Header.Get("Content-Security-Policy") != "sandbox" {
		t.Fatalf("a route with a key: %d, CSP %q", r.StatusCode, r.Header.Get("Content-Security-Policy"))
	}
	if r := do("POST", "https://klique.example.com/routes/r1/_klique/signin", form, signIn, true); r.StatusCode != http.StatusForbidden {
		t.Fatalf("a route's sign-in: %d", r.StatusCode)
	}
}

// TestInstanceHostKeepsAnAppsOwnPath: an app told its own path (JupyterLab
// with base_url=/apps/{instance}/) gets it on its own host too.
func TestInstanceHostKeepsAnAppsOwnPath(t *testing.T) {
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, r.URL.Path) }))
	defer app.Close()
	rt := New(Config{Resolver: hostsResolver{addr: strings.TrimPrefix(app.URL, "http://"), keep: true}, Reacher: &appnet.Direct{},
		Hosts: model.AppHostsFor("apps.example.com", "https://klique.example.com")})
	for path, want := range map[string]string{"/": "/apps/t1/", "/lab": "/apps/t1/lab", "/apps/t1/lab": "/apps/t1/lab", "/apps/t1": "/apps/t1"} {
		req := httptest.NewRequest("GET", "https://t1.apps.example.com"+path, nil)
		req.Header.Set("Authorization", "Bearer kq_alice")
		w := httptest.NewRecorder()
		rt.ServeHTTP(w, req)
		if w.Code != http.StatusOK || w.Body.String() != want {
			t.Errorf("%s reached the app as %d %q, want %q", path, w.Code, w.Body.String(), want)
		}
	}
}

func TestAppHostsNameInstances(t *testing.T) {
	h := model.AppHostsFor("apps.test", "http://127.0.0.1:8080")
	if h.URL("t1") != "http://t1.apps.test:8080/" || h.Pattern() != "http://*.apps.test:8080" {
		t.Fatalf("URL %q, pattern %q", h.URL("t1"), h.Pattern())
	}
	for host, want := range map[string]string{"t1.apps.test:8080": "t1", "T1.Apps.Test": "t1", "apps.test": "", "a.b.apps.test": "", "t1.apps.test.evil": "", "127.0.0.1:8080": ""} {
		if id, _ := h.InstanceOf(host); id != want {
			t.Errorf("InstanceOf(%q) = %q, want %q", host, id, want)
		}
	}
	if p := model.AppHostsFor("", "https://k.example.com"); p.URL("t1") != "/apps/t1/" || p.ByHost() {
		t.Fatal("with no domain, instances are served by path")
	}
}
