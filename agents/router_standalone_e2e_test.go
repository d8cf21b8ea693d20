package agents_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/appnet"
	"github.com/klique-ai/klique/internal/eventually"
	"github.com/klique-ai/klique/internal/router"
)

// accessToken exchanges an API key for an access token at the control
// plane, as the dashboard and the CLI do.
func accessToken(t *testing.T, base, key string) string {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/api/v1/auth/token", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Token string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Token == "" {
		t.Fatalf("exchange a key for a token: %d %v", resp.StatusCode, err)
	}
	return out.Token
}

// TestStandaloneRouterReachesAnInstanceDirectly runs `klique router`'s
// handler (router.Standalone, what the command serves) on its own
// loopback listener against a real control plane and process worker: it
// resolves the instance through the control plane's API with the caller's
// credential and reaches it directly at its address; an access token is
// verified against the control plane's keys (a forged one is refused);
// another group's member gets 404; a revoked key stops working within the
// cache TTL (1 s here; 5 s by default).
func TestStandaloneRouterReachesAnInstanceDirectly(t *testing.T) {
	t.Parallel()
	b := startRouterBed(t)
	id := b.launch(t, "", true)
	const ttl = time.Second
	// The control plane's tokens are issued by its public URL.
	h, err := router.Standalone(router.RemoteConfig{ControlPlane: b.url, Issuer: "http://127.0.0.1", Log: slog.New(slog.DiscardHandler)}, ttl, appnet.NewActivity(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	site := httptest.NewServer(h)
	t.Cleanup(site.Close)
	at := site.URL + "/apps/" + id

	tok := accessToken(t, b.url, b.alice)
	for what, cred := range map[string]string{"an API key": b.alice, "an access token": tok} {
		status, body, _ := call(t, nil, "GET", at+"/headers", cred, nil)
		if status != http.StatusOK {
			t.Fatalf("with %s: %d %s", what, status, body)
		}
		if s := decodeSeen(t, body); s.Path != "/headers" || s.Headers["Authorization"] != "" {
			t.Fatalf("with %s the app was sent %+v", what, s)
		}
	}
	// A token with a valid shape but a signature the control plane never
	// made is refused here.
	parts := strings.Split(tok, ".")
	forged := parts[0] + "." + parts[1] + "." + strings.Repeat("A", len(parts[2]))
	if status, body, _ := call(t, nil, "GET", at+"/headers", forged, nil); status != http.StatusUnauthorized {
		t.Fatalf("a forged token: %d %s", status, body)
	}
	if status, body, _ := call(t, nil, "GET", at+"/headers", b.victor, nil); status != http.StatusNotFound {
		t.Fatalf("another group's member at the site: %d %s", status, body)
	}

	t.Log("a revoked key stops working within the cache TTL")
	d := gql(t, b.url, adminKey, `mutation { createAPIKey(input: {name: "short-lived", user: "alice"}) { secret apiKey { id } } }`, nil)
	key, keyID := str(d, "createAPIKey", "secret"), str(d, "createAPIKey", "apiKey", "id")
	if status, body, _ := call(t, nil, "GET", at+"/headers", key, nil); status != http.StatusOK {
		t.Fatalf("the new key: %d %s", status, body)
	}
	gql(t, b.url, adminKey, `mutation($id: ID!) { revokeAPIKey(id: $id) { id } }`, map[string]any{"id": keyID})
	revoked := time.Now()
	var body string
	if !eventually.Poll(ttl+time.Second, func() bool {
		var status int
		status, body, _ = call(t, nil, "GET", at+"/headers", key, nil)
		if status != http.StatusOK && status != http.StatusUnauthorized {
			t.Fatalf("the revoked key: %d %s", status, body)
		}
		return status == http.StatusUnauthorized
	}) {
		t.Fatalf("the revoked key still works %s after its revocation; the cache TTL is %s", time.Since(revoked), ttl)
	}
	if !strings.Contains(body, "revoked") {
		t.Fatalf("the revoked key's refusal should say so: %s", body)
	}
	t.Logf("the revoked key stopped working after %s", time.Since(revoked).Round(time.Millisecond))
}
