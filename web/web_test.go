package web_test

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/klique-ai/klique/web"
)

func serve(t *testing.T, h http.Handler, target string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	resp := rec.Result()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func TestIndex(t *testing.T) {
	resp, body := serve(t, web.Index(), "/")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET / answered %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("Content-Security-Policy %q allows inline or eval'd script", csp)
	}
	if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Error("no X-Content-Type-Options: nosniff")
	}
	if !strings.Contains(body, `src="/ui/js/app.js"`) {
		t.Errorf("the page does not load the app module:\n%s", body)
	}
}

func TestAssets(t *testing.T) {
	h := web.Assets()
	for target, wantType := range map[string]string{
		"/ui/js/app.js":          "text/javascript",
		"/ui/js/pages/queues.js": "text/javascript",
		"/ui/css/app.css":        "text/css",
	} {
		resp, body := serve(t, h, target)
		if resp.StatusCode != http.StatusOK || body == "" {
			t.Errorf("GET %s answered %d with %d bytes", target, resp.StatusCode, len(body))
			continue
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, wantType) {
			t.Errorf("GET %s: Content-Type %q, want %s (modules are refused with another type)", target, ct, wantType)
		}
	}
	for _, target := range []string{"/ui/", "/ui/js/", "/ui/nope.js", "/ui/../web.go"} {
		if resp, body := serve(t, h, target); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s answered %d, want 404:\n%.200s", target, resp.StatusCode, body)
		}
	}
}

var (
	importRE = regexp.MustCompile(`(?m)^\s*import\s[^'"]*['"]([^'"]+)['"]`)
	assetRE  = regexp.MustCompile(`(?:src|href)="(/ui/[^"]+)"`)
)

// TestModulesResolve checks what a browser would find only at run time:
// every module import and every asset the page names is embedded.
func TestModulesResolve(t *testing.T) {
	files := web.Files()
	exists := func(p string) bool {
		_, err := fs.Stat(files, p)
		return err == nil
	}
	index, err := fs.ReadFile(files, "index.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range assetRE.FindAllStringSubmatch(string(index), -1) {
		if p := strings.TrimPrefix(m[1], web.AssetPrefix); !exists(p) {
			t.Errorf("index.html names %s, which is not embedded", m[1])
		}
	}
	n := 0
	err = fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".js") {
			return err
		}
		b, err := fs.ReadFile(files, p)
		if err != nil {
			return err
		}
		n++
		for _, m := range importRE.FindAllStringSubmatch(string(b), -1) {
			spec := m[1]
			if !strings.HasPrefix(spec, "./") && !strings.HasPrefix(spec, "../") {
				t.Errorf("%s imports %q: only relative imports of embedded files work without a build step", p, spec)
				continue
			}
			if target := path.Join(path.Dir(p), spec); !exists(target) {
				t.Errorf("%s imports %q, which is not embedded (%s)", p, spec, target)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 8 {
		t.Fatalf("found %d modules, want the app, its helpers and its pages", n)
	}
}

// TestNoMarkupFromData keeps server data out of markup: the pages build
// elements and text nodes, never HTML strings, and nothing inline that
// the Content-Security-Policy would block.
func TestNoMarkupFromData(t *testing.T) {
	files := web.Files()
	err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(files, p)
		if err != nil {
			return err
		}
		s := string(b)
		switch {
		case strings.HasSuffix(p, ".js"):
			for _, bad := range []string{"innerHTML", "outerHTML =", "insertAdjacentHTML", "document.write", "eval(", "new Function"} {
				if strings.Contains(s, bad) {
					t.Errorf("%s uses %s: build elements with dom.js's h() instead", p, bad)
				}
			}
		case strings.HasSuffix(p, ".html"):
			if regexp.MustCompile(`<script(?:\s+type="module")?>`).MatchString(s) || strings.Contains(s, " style=") || strings.Contains(s, " onclick=") {
				t.Errorf("%s has inline script or style, which the Content-Security-Policy blocks", p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
