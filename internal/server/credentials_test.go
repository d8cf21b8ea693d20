package server_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestAnonymousCallers(t *testing.T) {
	t.Parallel()
	ts := startServer(t)

	t.Run("a query without credentials is UNAUTHENTICATED", func(t *testing.T) {
		res := ts.gql(t, gqlRequest{Query: meQuery})
		if res.code() != "UNAUTHENTICATED" {
			t.Fatalf("code = %v, want UNAUTHENTICATED: %s", res.codes(), res.Raw)
		}
		if !strings.Contains(res.message(), "Authorization") {
			t.Errorf("message %q does not say how to sign in", res.message())
		}
		if res.Status >= 500 {
			t.Errorf("status %d", res.Status)
		}
	})
	t.Run("a mutation without credentials is UNAUTHENTICATED and creates nothing", func(t *testing.T) {
		res := ts.gql(t, gqlRequest{Query: `mutation { createProject(input: {name: "sneaky"}) { project { id } } }`})
		if res.code() != "UNAUTHENTICATED" {
			t.Fatalf("code = %v, want UNAUTHENTICATED: %s", res.codes(), res.Raw)
		}
		if got := projectNames(t, ts); len(got) != 0 {
			t.Errorf("projects after an anonymous createProject: %v", got)
		}
	})
	t.Run("introspection is refused without credentials", func(t *testing.T) {
		for _, q := range []string{`{ __schema { queryType { name } } }`, `{ __type(name: "Query") { fields { name } } }`} {
			res := ts.gql(t, gqlRequest{Query: q})
			if len(res.Errors) == 0 {
				t.Errorf("%s: anonymous introspection answered %s", q, res.Raw)
				continue
			}
			if strings.Contains(res.Raw, `"Query"`) && strings.Contains(res.Raw, "fields") || strings.Contains(res.Raw, "createProject") {
				t.Errorf("%s: the refusal reveals the schema: %s", q, res.Raw)
			}
			if res.code() != "UNAUTHENTICATED" {
				t.Errorf("%s: code = %v, want UNAUTHENTICATED: %s", q, res.codes(), res.Raw)
			}
		}
	})
	t.Run("introspection works for a signed-in user", func(t *testing.T) {
		d := ts.mustGQL(t, adminKey, `{ __schema { queryType { name } mutationType { name } } }`, nil)
		if got := str(d, "__schema", "queryType", "name"); got != "Query" {
			t.Errorf("__schema.queryType.name = %q, want Query", got)
		}
	})
	t.Run("nothing an anonymous caller did is logged as a server error", func(t *testing.T) {
		noErrorLogs(t, ts)
	})
}

func TestCredentials(t *testing.T) {
	t.Parallel()
	ts := startServer(t)

	want401 := func(t *testing.T, res *gqlResult) {
		t.Helper()
		if res.Status != http.StatusUnauthorized {
			t.Errorf("status = %d, want 401: %s", res.Status, res.Raw)
		}
		if res.code() != "UNAUTHENTICATED" {
			t.Errorf("code = %v, want UNAUTHENTICATED: %s", res.codes(), res.Raw)
		}
		if h := res.Header.Get("WWW-Authenticate"); !strings.HasPrefix(h, "Bearer") {
			t.Errorf("WWW-Authenticate = %q, want a Bearer challenge", h)
		}
		noStackTrace(t, res.Raw)
	}
	withAuth := func(t *testing.T, authorization string) *gqlResult {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, ts.url+"/graphql", strings.NewReader(`{"query":"{ me { user { name } } }"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", authorization)
		return ts.doGQL(t, req)
	}

	t.Run("an unknown API key is refused with 401", func(t *testing.T) {
		want401(t, withAuth(t, "Bearer klq_this-key-does-not-exist-0123456789"))
	})
	t.Run("a malformed token is refused with 401", func(t *testing.T) {
		want401(t, withAuth(t, "Bearer eyJhbGciOiJFZERTQSJ9.eyJpc3MiOiJ4In0.c2ln"))
	})
	t.Run("a Basic credential is refused with 401", func(t *testing.T) {
		res := withAuth(t, "Basic eHl6")
		want401(t, res)
		if !strings.Contains(res.message(), "Bearer") {
			t.Errorf("message %q does not say to use a bearer credential", res.message())
		}
	})
	t.Run("an empty bearer credential is refused with 401", func(t *testing.T) {
		want401(t, withAuth(t, "Bearer "))
	})
	t.Run("the refusal never echoes the credential", func(t *testing.T) {
		res := withAuth(t, "Bearer klq_secret-looking-value-0123456789abcdef")
		if strings.Contains(res.Raw, "secret-looking-value") {
			t.Errorf("the answer repeats the credential: %s", res.Raw)
		}
	})

	t.Run("a revoked key stops working at once", func(t *testing.T) {
		secret, id := newKey(t, ts, "admin")
		if d := ts.mustGQL(t, secret, meQuery, nil); str(d, "me", "user", "name") != "admin" {
			t.Fatalf("the new key does not sign in as admin: %v", d)
		}
		d := ts.mustGQL(t, adminKey, `mutation($id: ID!) { revokeAPIKey(id: $id) { revokedAt active } }`, map[string]any{"id": id})
		if str(d, "revokeAPIKey", "revokedAt") == "" || path(d, "revokeAPIKey", "active") != false {
			t.Errorf("revokeAPIKey = %v, want a revocation time and active false", d)
		}
		res := ts.gql(t, gqlRequest{Credential: secret, Query: meQuery})
		want401(t, res)
		if !strings.Contains(res.message(), "revoked") {
			t.Errorf("message %q does not say the key was revoked", res.message())
		}
		if resp, body := ts.exchangeToken(t, "Bearer "+secret); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("exchanging a revoked key = %d %s, want 401", resp.StatusCode, body)
		}
	})

	t.Run("a disabled user's key stops working at once", func(t *testing.T) {
		ts.mustGQL(t, adminKey, `mutation { createUser(input: {name: "dora"}) { id } }`, nil)
		secret, _ := newKey(t, ts, "dora")
		ts.mustGQL(t, secret, meQuery, nil)
		ts.mustGQL(t, adminKey, `mutation { updateUser(id: "dora", input: {disabled: true}) { disabled } }`, nil)
		want401(t, ts.gql(t, gqlRequest{Credential: secret, Query: meQuery}))
	})

	var token string
	t.Run("an API key exchanges for an access token that works as a bearer", func(t *testing.T) {
		resp, body := ts.exchangeToken(t, "Bearer "+adminKey)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST /api/v1/auth/token = %d %s", resp.StatusCode, body)
		}
		var tr struct {
			AccessToken string    `json:"access_token"`
			TokenType   string    `json:"token_type"`
			ExpiresIn   int64     `json:"expires_in"`
			ExpiresAt   time.Time `json:"expires_at"`
		}
		if err := json.Unmarshal([]byte(body), &tr); err != nil {
			t.Fatalf("decode token response: %v: %s", err, body)
		}
		if tr.TokenType != "Bearer" || tr.AccessToken == "" || strings.Count(tr.AccessToken, ".") != 2 {
			t.Errorf("token response = %+v, want a Bearer JWT", tr)
		}
		if tr.ExpiresIn < 3500 || tr.ExpiresIn > 3600 {
			t.Errorf("expires_in = %d, want about an hour (the configured TTL)", tr.ExpiresIn)
		}
		if d := time.Until(tr.ExpiresAt); d < 58*time.Minute || d > 61*time.Minute {
			t.Errorf("expires_at is %s away, want about an hour", d)
		}
		if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("Cache-Control = %q, want no-store", cc)
		}
		token = tr.AccessToken
		d := ts.mustGQL(t, token, meQuery, nil)
		if str(d, "me", "user", "name") != "admin" || str(d, "me", "tenant", "name") != "default" {
			t.Errorf("me with the token = %v, want admin of default", d)
		}
	})
	t.Run("an access token cannot be exchanged for another one", func(t *testing.T) {
		if token == "" {
			t.Skip("no token")
		}
		resp, body := ts.exchangeToken(t, "Bearer "+token)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, `"FORBIDDEN"`) || !strings.Contains(body, "API key") {
			t.Errorf("exchanging a token = %d %s, want 403 FORBIDDEN that says to use an API key", resp.StatusCode, body)
		}
	})
	t.Run("the token exchange without credentials is 401", func(t *testing.T) {
		resp, body := ts.exchangeToken(t, "")
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `"UNAUTHENTICATED"`) {
			t.Errorf("POST /api/v1/auth/token without credentials = %d %s, want 401 UNAUTHENTICATED", resp.StatusCode, body)
		}
		if h := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(h, "Bearer") {
			t.Errorf("WWW-Authenticate = %q, want a Bearer challenge", h)
		}
	})
	t.Run("a token with a changed signature is refused", func(t *testing.T) {
		if token == "" {
			t.Skip("no token")
		}
		parts := strings.Split(token, ".")
		sig, err := base64.RawURLEncoding.DecodeString(parts[2])
		if err != nil {
			t.Fatalf("decode signature: %v", err)
		}
		sig[0] ^= 0xff
		forged := parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(sig)
		want401(t, ts.gql(t, gqlRequest{Credential: forged, Query: meQuery}))
	})
	t.Run("refused credentials are not logged as server errors", func(t *testing.T) {
		noErrorLogs(t, ts)
	})
	t.Run("a token signed by another control plane with the same issuer is refused", func(t *testing.T) {
		if token == "" {
			t.Skip("no token")
		}
		other := startServer(t)
		resp, body := other.exchangeToken(t, "Bearer "+adminKey)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("token from the second server = %d %s", resp.StatusCode, body)
		}
		var tr struct {
			AccessToken string `json:"access_token"`
		}
		_ = json.Unmarshal([]byte(body), &tr)
		want401(t, ts.gql(t, gqlRequest{Credential: tr.AccessToken, Query: meQuery}))
	})
}

func TestJWKS(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	resp, body := ts.get(t, "/.well-known/jwks.json", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /.well-known/jwks.json = %d %s", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.Contains(ct, "json") {
		t.Errorf("Content-Type = %q, want JSON", ct)
	}
	var set struct {
		Keys []map[string]string `json:"keys"`
	}
	if err := json.Unmarshal([]byte(body), &set); err != nil {
		t.Fatalf("decode JWKS: %v: %s", err, body)
	}
	if len(set.Keys) != 1 {
		t.Fatalf("JWKS has %d keys, want 1: %s", len(set.Keys), body)
	}
	k := set.Keys[0]
	if k["kty"] != "OKP" || k["crv"] != "Ed25519" || k["alg"] != "EdDSA" || k["use"] != "sig" || k["kid"] == "" {
		t.Errorf("key = %v, want an OKP Ed25519 signing key with a kid", k)
	}
	if _, ok := k["d"]; ok {
		t.Fatalf("the JWKS publishes the private key")
	}
	pub, err := base64.RawURLEncoding.DecodeString(k["x"])
	if err != nil || len(pub) != ed25519.PublicKeySize {
		t.Fatalf("x = %q is not an Ed25519 public key: %v", k["x"], err)
	}

	t.Run("tokens the server issues verify with the published key", func(t *testing.T) {
		resp, body := ts.exchangeToken(t, "Bearer "+adminKey)
		var tr struct {
			AccessToken string `json:"access_token"`
		}
		if err := json.Unmarshal([]byte(body), &tr); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("token: %d %s", resp.StatusCode, body)
		}
		parts := strings.Split(tr.AccessToken, ".")
		if len(parts) != 3 {
			t.Fatalf("token has %d parts", len(parts))
		}
		var header map[string]any
		hb, _ := base64.RawURLEncoding.DecodeString(parts[0])
		if err := json.Unmarshal(hb, &header); err != nil {
			t.Fatalf("token header: %v", err)
		}
		if header["kid"] != k["kid"] || header["alg"] != "EdDSA" {
			t.Errorf("token header = %v, want kid %s and alg EdDSA", header, k["kid"])
		}
		sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
		if !ed25519.Verify(ed25519.PublicKey(pub), []byte(parts[0]+"."+parts[1]), sig) {
			t.Errorf("the token's signature does not verify with the JWKS key")
		}
		var claims map[string]any
		cb, _ := base64.RawURLEncoding.DecodeString(parts[1])
		if err := json.Unmarshal(cb, &claims); err != nil {
			t.Fatalf("token claims: %v", err)
		}
		if claims["iss"] != "http://127.0.0.1" {
			t.Errorf("iss = %v, want the public URL", claims["iss"])
		}
	})
}
