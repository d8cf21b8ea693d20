package server_test

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/klique-ai/klique/internal/config"
)

// fakeIdP is an OpenID provider as the dashboard meets it: discovery, an
// authorization endpoint that signs the person in at once and sends them
// back with a code, a token endpoint that checks the code's PKCE verifier
// (RFC 7636) and answers with an identity token, and its keys. Error
// answers follow RFC 6749 §5.2, as Keycloak, Okta and Entra ID give them.
type fakeIdP struct {
	srv      *httptest.Server
	key      *rsa.PrivateKey
	clientID string
	// user is who signs in at the authorization endpoint.
	user   string
	groups []string

	mu    sync.Mutex
	codes map[string]fakeGrant
}

type fakeGrant struct {
	challenge, redirectURI, clientID string
}

func newFakeIdP(t *testing.T, clientID, user string, groups ...string) *fakeIdP {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeIdP{key: key, clientID: clientID, user: user, groups: groups, codes: map[string]fakeGrant{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": f.srv.URL, "authorization_endpoint": f.srv.URL + "/authorize",
			"token_endpoint": f.srv.URL + "/token", "jwks_uri": f.srv.URL + "/jwks"})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		b64 := base64.RawURLEncoding.EncodeToString
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{"kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256",
			"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes())}}})
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		back, err := url.Parse(q.Get("redirect_uri"))
		if err != nil || q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
			http.Error(w, "bad authorization request", http.StatusBadRequest)
			return
		}
		v := back.Query()
		if q.Get("client_id") != f.clientID {
			v.Set("error", "unauthorized_client")
			v.Set("error_description", "unknown client "+q.Get("client_id"))
		} else {
			code := rand.Text()
			f.mu.Lock()
			f.codes[code] = fakeGrant{challenge: q.Get("code_challenge"), redirectURI: q.Get("redirect_uri"), clientID: q.Get("client_id")}
			f.mu.Unlock()
			v.Set("code", code)
		}
		v.Set("state", q.Get("state"))
		back.RawQuery = v.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		refuse := func(why string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant", "error_description": why})
		}
		_ = r.ParseForm()
		f.mu.Lock()
		g, ok := f.codes[r.PostForm.Get("code")]
		delete(f.codes, r.PostForm.Get("code")) // a code is good once
		f.mu.Unlock()
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		switch {
		case r.PostForm.Get("grant_type") != "authorization_code":
			refuse("grant_type must be authorization_code")
		case !ok:
			refuse("the code is unknown, used or expired")
		case base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge:
			refuse("PKCE verification failed")
		case r.PostForm.Get("redirect_uri") != g.redirectURI || r.PostForm.Get("client_id") != g.clientID:
			refuse("redirect_uri or client_id differ from the authorization request")
		default:
			now := time.Now()
			tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"iss": f.srv.URL, "aud": f.clientID, "sub": "sub-" + f.user,
				"preferred_username": f.user, "groups": f.groups, "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix()})
			tok.Header["kid"] = "k1"
			signed, err := tok.SignedString(key)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"id_token": signed, "token_type": "Bearer", "expires_in": 300})
		}
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// withSSO points the server at the fake provider.
func withSSO(f *fakeIdP) serverOption {
	return func(c *config.Config) {
		c.OIDCIssuer, c.OIDCJWKSURL, c.OIDCAudience = f.srv.URL, f.srv.URL+"/jwks", f.clientID
	}
}

// pkcePair is a verifier and its S256 challenge.
func pkcePair() (verifier, challenge string) {
	verifier = base64.RawURLEncoding.EncodeToString([]byte(rand.Text() + rand.Text()))
	sum := sha256.Sum256([]byte(verifier))
	return verifier, base64.RawURLEncoding.EncodeToString(sum[:])
}

// authorize goes through the provider's sign-in as a browser would, and
// returns the code it sends back.
func (f *fakeIdP) authorize(t *testing.T, authorizationEndpoint, redirectURI, challenge string) string {
	t.Helper()
	u, _ := url.Parse(authorizationEndpoint)
	u.RawQuery = url.Values{"response_type": {"code"}, "client_id": {f.clientID}, "redirect_uri": {redirectURI}, "scope": {"openid"},
		"state": {"s1"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"}}.Encode()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(u.String())
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	back, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || back.Query().Get("code") == "" || back.Query().Get("state") != "s1" {
		t.Fatalf("the provider sent the browser to %q", resp.Header.Get("Location"))
	}
	return back.Query().Get("code")
}

func postJSON(t *testing.T, ts *testServer, path string, body any) (*http.Response, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, ts.url+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	return ts.send(t, req)
}

func TestTheDashboardSignsInThroughTheIdentityProvider(t *testing.T) {
	t.Parallel()
	idp := newFakeIdP(t, "klique-dashboard", "dana", "ml-research")
	ts := startServer(t, withSSO(idp))
	newFixture(t, ts) // the groups the provider names

	resp, body := ts.get(t, "/api/v1/auth/sso", "")
	var cfg struct {
		AuthorizationEndpoint string `json:"authorization_endpoint"`
		ClientID              string `json:"client_id"`
		Scope                 string `json:"scope"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &cfg) != nil ||
		cfg.AuthorizationEndpoint != idp.srv.URL+"/authorize" || cfg.ClientID != "klique-dashboard" || !strings.Contains(cfg.Scope, "openid") {
		t.Fatalf("GET /api/v1/auth/sso = %d %s", resp.StatusCode, body)
	}

	redirect := ts.url + "/"
	verifier, challenge := pkcePair()
	code := idp.authorize(t, cfg.AuthorizationEndpoint, redirect, challenge)
	resp, body = postJSON(t, ts, "/api/v1/auth/sso/token", map[string]string{"code": code, "code_verifier": verifier, "redirect_uri": redirect})
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &tok) != nil || tok.AccessToken == "" {
		t.Fatalf("exchange the code = %d %s", resp.StatusCode, body)
	}
	if resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("the token answer may be cached: Cache-Control %q", resp.Header.Get("Cache-Control"))
	}
	me := ts.mustGQL(t, tok.AccessToken, `{ me { user { name role } groups { group { name } } } }`, nil)
	raw, _ := json.Marshal(me)
	if str(me, "me", "user", "name") != "dana" || !strings.Contains(string(raw), `"ml-research"`) {
		t.Fatalf("signed in as %s, want dana, a member of ml-research", raw)
	}

	t.Run("a code is good once", func(t *testing.T) {
		resp, body := postJSON(t, ts, "/api/v1/auth/sso/token", map[string]string{"code": code, "code_verifier": verifier, "redirect_uri": redirect})
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "refused the sign-in code") || !strings.Contains(body, "invalid_grant") {
			t.Fatalf("the same code again = %d %s, want 401 saying the provider refused it", resp.StatusCode, body)
		}
	})
	t.Run("a code with another verifier is refused", func(t *testing.T) {
		_, challenge := pkcePair()
		code := idp.authorize(t, cfg.AuthorizationEndpoint, redirect, challenge)
		other, _ := pkcePair()
		resp, body := postJSON(t, ts, "/api/v1/auth/sso/token", map[string]string{"code": code, "code_verifier": other, "redirect_uri": redirect})
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "PKCE") {
			t.Fatalf("a stolen code without its verifier = %d %s, want 401", resp.StatusCode, body)
		}
	})
	t.Run("an incomplete request says what is missing", func(t *testing.T) {
		for _, in := range []map[string]string{
			{"code_verifier": verifier, "redirect_uri": redirect},
			{"code": "x", "code_verifier": "short", "redirect_uri": redirect},
			{"code": "x", "code_verifier": verifier, "redirect_uri": "javascript:alert(1)"},
		} {
			resp, body := postJSON(t, ts, "/api/v1/auth/sso/token", in)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "code_verifier") {
				t.Errorf("%v = %d %s, want 400 naming what is needed", in, resp.StatusCode, body)
			}
		}
		req, _ := http.NewRequest(http.MethodPost, ts.url+"/api/v1/auth/sso/token", strings.NewReader("code=x"))
		if resp, body := ts.send(t, req); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("a form body = %d %s, want 400", resp.StatusCode, body)
		}
	})
}

func TestWithoutSSOTheSignInEndpointsSaySo(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	resp, body := ts.get(t, "/api/v1/auth/sso", "")
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "API key") {
		t.Fatalf("GET /api/v1/auth/sso without SSO = %d %s, want 404 pointing to API keys", resp.StatusCode, body)
	}
	resp, body = postJSON(t, ts, "/api/v1/auth/sso/token", map[string]string{"code": "x"})
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("POST /api/v1/auth/sso/token without SSO = %d %s, want 404", resp.StatusCode, body)
	}
}
