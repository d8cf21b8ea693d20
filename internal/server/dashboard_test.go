package server_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestDashboardMount checks that the dashboard is served at / and /ui/
// without taking any path from the API: the routes beside it answer as
// before, and an unknown path is still the API's JSON 404.
func TestDashboardMount(t *testing.T) {
	t.Parallel()
	ts := startServer(t)

	resp, body := ts.get(t, "/", "")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(body, "/ui/js/app.js") {
		t.Fatalf("GET / answered %d %s:\n%.300s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if resp.Header.Get("Content-Security-Policy") == "" {
		t.Error("the dashboard is served without a Content-Security-Policy")
	}
	resp, body = ts.get(t, "/ui/js/app.js", "")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") || !strings.Contains(body, "import") {
		t.Fatalf("GET /ui/js/app.js answered %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}

	// The dashboard needs no credential to load; the data does.
	res := ts.gql(t, gqlRequest{Query: `{ me { user { name } } }`})
	if res.code() != "UNAUTHENTICATED" {
		t.Errorf("/graphql without a credential: %d %s", res.Status, res.Raw)
	}
	for path, want := range map[string]int{
		"/healthz":                        http.StatusOK,
		"/graphiql":                       http.StatusOK,
		"/.well-known/jwks.json":          http.StatusOK,
		"/metrics":                        http.StatusUnauthorized,
		"/api/v1/usage.csv":               http.StatusBadRequest,
		"/no/such/page":                   http.StatusNotFound,
		"/ui/no-such-file.js":             http.StatusNotFound,
		"/index.html":                     http.StatusNotFound,
		"/api/agent/v1/register":          http.StatusNotFound,
		"/.well-known/no-such-thing.json": http.StatusNotFound,
	} {
		resp, body := ts.get(t, path, "")
		if resp.StatusCode != want && !(path == "/api/agent/v1/register" && resp.StatusCode == http.StatusMethodNotAllowed) {
			t.Errorf("GET %s answered %d, want %d:\n%.200s", path, resp.StatusCode, want, body)
		}
		if strings.Contains(body, "/ui/js/app.js") && path != "/graphiql" {
			t.Errorf("GET %s answered with the dashboard", path)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, ts.url+"/", strings.NewReader("{}"))
	resp, body = ts.send(t, req)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, `"error"`) {
		t.Errorf("POST / answered %d, want the API's JSON 404:\n%s", resp.StatusCode, body)
	}
}
