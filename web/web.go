// Package web is Klique's dashboard: plain HTML, CSS and JavaScript modules
// embedded in the binary, so that `klique serve` shows it at / with no
// front-end build and no files beside the binary. The pages talk to the
// same GraphQL API as every other channel (queries and mutations over
// HTTP, subscriptions over WebSocket); this package only serves the files
// and never sees a credential.
package web

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed static
var static embed.FS

// AssetPrefix is the path under which the dashboard's files are served.
// It is a prefix of its own, so that / itself and the API's routes
// (/graphql, /api, /v1, /mcp, ...) stay where they are.
const AssetPrefix = "/ui/"

// contentSecurityPolicy keeps the page to its own scripts and styles: no
// inline script, no third-party origin, and connections (fetch and the
// subscription WebSocket) only to the server that served it. Task names,
// logs and parameters are shown as text, and this is the second fence if
// one ever slips into markup.
//
// Forms may post to the dashboard's own origin only: Open on the Apps page
// posts the dashboard's token to the router's sign-in hop
// (/apps/{id}/_klique/signin), which the control plane serves.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self' ws: wss:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"

// Files returns the embedded files, rooted at the dashboard's top folder
// (index.html, js/, css/).
func Files() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		// The folder is embedded at build time; failing here is a build bug.
		panic("web: embedded static folder missing: " + err.Error())
	}
	return sub
}

// Index serves the dashboard's single page. The pages route on the URL's
// fragment (#/queues, #/task/ID), so the server needs one document only.
func Index() http.Handler { return IndexFor("") }

// IndexFor is Index where app instances are served on hosts of their own:
// apps is their origins as a CSP source (https://*.apps.example.com), to
// which the page may post its sign-in form ("" when served by path).
func IndexFor(apps string) http.Handler {
	files := Files()
	csp := contentSecurityPolicy
	if apps != "" {
		csp += " " + apps
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := fs.ReadFile(files, "index.html")
		if err != nil {
			http.Error(w, "the dashboard is missing from this build", http.StatusInternalServerError)
			return
		}
		securityHeaders(w)
		w.Header().Set("Content-Security-Policy", csp)
		// The page is small and names its assets without versions:
		// revalidate, so that an upgraded server is picked up at once.
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(b)
	})
}

// Assets serves the dashboard's scripts and styles under AssetPrefix.
// Directory listings are refused: only files are served.
func Assets() http.Handler {
	fileServer := http.StripPrefix(strings.TrimSuffix(AssetPrefix, "/"), http.FileServerFS(Files()))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r)
			return
		}
		securityHeaders(w)
		w.Header().Set("Cache-Control", "no-cache")
		fileServer.ServeHTTP(w, r)
	})
}

func securityHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	// Not no-referrer nor same-origin: under those a browser sends
	// "Origin: null" with a form's cross-origin POST, and the router's
	// sign-in hop on an instance's own host, which checks that a sign-in
	// comes from the dashboard's origin, could not tell the dashboard from
	// another site. Other origins get the origin only, never the path (the
	// dashboard's page is / and its routes are in the fragment, which is
	// never sent).
	h.Set("Referrer-Policy", "strict-origin-when-cross-origin")
	h.Set("X-Frame-Options", "DENY")
}
