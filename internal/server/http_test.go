package server_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// smallEstate is a minimal allocation model: one compute resource that the
// admin may send tasks to.
const smallEstate = `apiVersion: klique/v1
kind: Estate
gpuClasses:
  - name: l4
    memoryGb: 24
pools:
  - name: lab
    kind: bare_metal
    capacity: 4
    gpuClass: l4
profiles:
  - name: one
    size: 1
    pools: [lab]
groups:
  - name: team
policies:
  - group: team
    reservation: 0
    limit: 4
    computeResources:
      - {name: 1 GPU, profile: one}
projects:
  - name: proj
`

func applyEstate(t *testing.T, ts *testServer, doc string) {
	t.Helper()
	ts.mustGQL(t, adminKey, `mutation($doc: String!) { applyEstate(document: $doc) { summary } }`, map[string]any{"doc": doc})
}

// newKey creates an API key for user as the admin and returns its secret
// and id.
func newKey(t *testing.T, ts *testServer, user string) (secret, id string) {
	t.Helper()
	d := ts.mustGQL(t, adminKey, `mutation($u: ID) { createAPIKey(input: {user: $u}) { secret apiKey { id } } }`, map[string]any{"u": user})
	return str(d, "createAPIKey", "secret"), str(d, "createAPIKey", "apiKey", "id")
}

// projectNames lists the tenant's projects as the admin sees them.
func projectNames(t *testing.T, ts *testServer) []string {
	t.Helper()
	return nodeValues(ts.mustGQL(t, adminKey, `{ projects(first: 500) { edges { node { name } } } }`, nil), "name", "projects")
}

const meQuery = `{ me { user { name } tenant { name } } }`

func TestProbes(t *testing.T) {
	t.Parallel()
	ts := startServer(t)

	t.Run("healthz answers 200 ok", func(t *testing.T) {
		resp, body := ts.get(t, "/healthz", "")
		if resp.StatusCode != http.StatusOK || strings.TrimSpace(body) != "ok" {
			t.Errorf("GET /healthz = %d %q, want 200 ok", resp.StatusCode, body)
		}
	})
	t.Run("readyz answers 200 while the store answers", func(t *testing.T) {
		resp, body := ts.get(t, "/readyz", "")
		if resp.StatusCode != http.StatusOK || strings.TrimSpace(body) != "ready" {
			t.Errorf("GET /readyz = %d %q, want 200 ready", resp.StatusCode, body)
		}
	})
	t.Run("metrics count requests by route and status", func(t *testing.T) {
		ts.get(t, "/healthz", "")
		resp, body := ts.get(t, "/metrics", "")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /metrics = %d", resp.StatusCode)
		}
		for _, want := range []string{
			"# TYPE klique_http_requests_total counter",
			`klique_http_requests_total{code="200",route="healthz"}`,
			`klique_http_requests_total{code="200",route="readyz"}`,
			"klique_http_request_duration_seconds_bucket",
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
	})
	t.Run("every answer carries a request id, and a sane one sent is kept", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, ts.url+"/healthz", nil)
		req.Header.Set("X-Request-Id", "trace-123")
		resp, _ := ts.send(t, req)
		if got := resp.Header.Get("X-Request-Id"); got != "trace-123" {
			t.Errorf("X-Request-Id = %q, want trace-123", got)
		}
		req, _ = http.NewRequest(http.MethodGet, ts.url+"/healthz", nil)
		req.Header.Set("X-Request-Id", "bad id\twith spaces")
		resp, _ = ts.send(t, req)
		if got := resp.Header.Get("X-Request-Id"); got == "" || strings.Contains(got, " ") {
			t.Errorf("X-Request-Id = %q, want a fresh id instead of the malformed one", got)
		}
	})
	t.Run("an unknown path is a JSON 404 that points to the API", func(t *testing.T) {
		resp, body := ts.get(t, "/nope", "")
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, `"NOT_FOUND"`) || !strings.Contains(body, "/graphql") {
			t.Errorf("GET /nope = %d %s", resp.StatusCode, body)
		}
	})
	t.Run("graphiql serves a page", func(t *testing.T) {
		resp, body := ts.get(t, "/graphiql", "")
		if resp.StatusCode != http.StatusOK || !strings.Contains(strings.ToLower(body), "<html") {
			t.Errorf("GET /graphiql = %d, want an HTML page", resp.StatusCode)
		}
	})
}

func TestReadyzWithClosedStore(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	ts.stopped = true
	if err := ts.app.Store.Close(); err != nil {
		t.Fatalf("close store: %v", err)
	}
	resp, body := ts.get(t, "/readyz", "")
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("GET /readyz with a closed store = %d %s, want 503", resp.StatusCode, body)
	}
	if !strings.Contains(body, `"UNAVAILABLE"`) {
		t.Errorf("GET /readyz body = %s, want code UNAVAILABLE", body)
	}
	noStackTrace(t, body)
	if resp, _ := ts.get(t, "/healthz", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz with a closed store = %d, want 200: the process is alive", resp.StatusCode)
	}
}

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

func TestBodyLimit(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	big := func() []byte {
		b, _ := json.Marshal(map[string]any{
			"query":     `mutation($d: String) { createProject(input: {name: "huge", description: $d}) { project { id } } }`,
			"variables": map[string]any{"d": strings.Repeat("x", int(ts.cfg.MaxBodyBytes)+1024)},
		})
		return b
	}
	check := func(t *testing.T, resp *http.Response, body string) {
		t.Helper()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("status = %d, want 413: %.300s", resp.StatusCode, body)
		}
		if !strings.Contains(body, "PAYLOAD_TOO_LARGE") || !strings.Contains(body, fmt.Sprint(ts.cfg.MaxBodyBytes)) {
			t.Errorf("body = %.300s, want code PAYLOAD_TOO_LARGE and the limit in bytes", body)
		}
		if len(body) > 2000 {
			t.Errorf("the refusal is %d bytes long; it must not echo the request", len(body))
		}
		if got := projectNames(t, ts); len(got) != 0 {
			t.Errorf("projects after a refused request: %v", got)
		}
	}

	t.Run("a body with a Content-Length over the limit is refused with 413", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, ts.url+"/graphql", bytes.NewReader(big()))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+adminKey)
		resp, body := ts.send(t, req)
		check(t, resp, body)
	})
	t.Run("a chunked body over the limit is refused with 413", func(t *testing.T) {
		// A reader of unknown length makes the client send the body chunked,
		// without a Content-Length the server could check up front.
		req, _ := http.NewRequest(http.MethodPost, ts.url+"/graphql", io.MultiReader(bytes.NewReader(big())))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+adminKey)
		if req.ContentLength != 0 {
			t.Fatalf("the request has a Content-Length; the case needs a chunked body")
		}
		resp, body := ts.send(t, req)
		check(t, resp, body)
	})
	t.Run("a body under the limit goes through", func(t *testing.T) {
		res := ts.gql(t, gqlRequest{Credential: adminKey, Query: `mutation($d: String) { createProject(input: {name: "fits", description: $d}) { project { name } } }`,
			Vars: map[string]any{"d": strings.Repeat("y", 200)}})
		if len(res.Errors) > 0 {
			t.Errorf("a small request failed: %s", res.Raw)
		}
	})
}

func TestMalformedGraphQL(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	applyEstate(t, ts, smallEstate)

	cases := []struct {
		name        string
		method      string
		body        string
		contentType string
		// want are words the first error message must hold (any case).
		want []string
	}{
		{name: "a syntax error names what the parser expected",
			body: `{"query": "{ me { user { name } "}`, want: []string{"expected"}},
		{name: "an unknown field is named",
			body: `{"query": "{ me { shoeSize } }"}`, want: []string{"shoeSize", "Viewer"}},
		{name: "a string literal where an Int is expected is named",
			body: `{"query": "mutation { createPool(input: {name: \"p1\", kind: KUBERNETES, capacityGpus: \"4\", gpuClass: \"l4\"}) { pool { id } } }"}`,
			want: []string{"Int"}},
		{name: "a float literal where an Int is expected is named",
			body: `{"query": "mutation { createPool(input: {name: \"p2\", kind: KUBERNETES, capacityGpus: 4.5, gpuClass: \"l4\"}) { pool { id } } }"}`,
			want: []string{"Int"}},
		{name: "a string variable where an Int is expected is named",
			body: `{"query": "mutation($in: PoolInput!) { createPool(input: $in) { pool { id } } }", "variables": {"in": {"name": "v1", "kind": "KUBERNETES", "capacityGpus": "4", "gpuClass": "l4"}}}`,
			want: []string{"capacityGpus"}},
		{name: "a string for an Int variable of the operation is named",
			body: `{"query": "query($n: Int) { projects(first: $n) { edges { cursor } } }", "variables": {"n": "3"}}`,
			want: []string{"$n", "Int"}},
		{name: "a float variable where an Int is expected is named",
			body: `{"query": "mutation($in: PoolInput!) { createPool(input: $in) { pool { id } } }", "variables": {"in": {"name": "v2", "kind": "KUBERNETES", "capacityGpus": 4.5, "gpuClass": "l4"}}}`,
			want: []string{"capacityGpus"}},
		{name: "a capacity beyond any real pool is refused by name",
			body: `{"query": "mutation { createPool(input: {name: \"p3\", kind: KUBERNETES, capacityGpus: 99999999999, gpuClass: \"l4\"}) { pool { id } } }"}`,
			want: []string{"capacity"}},
		{name: "an Int beyond 64 bits is refused",
			body: `{"query": "mutation { createPool(input: {name: \"p9\", kind: KUBERNETES, capacityGpus: 99999999999999999999999, gpuClass: \"l4\"}) { pool { id } } }"}`,
			want: []string{"Int", "99999999999999999999999"}},
		{name: "an unknown enum value is named",
			body: `{"query": "mutation { createPool(input: {name: \"p4\", kind: MAINFRAME, capacityGpus: 4, gpuClass: \"l4\"}) { pool { id } } }"}`,
			want: []string{"MAINFRAME"}},
		{name: "a missing required argument is named",
			body: `{"query": "{ task { id } }"}`, want: []string{"id"}},
		{name: "an undeclared variable is named",
			body: `{"query": "{ task(id: $nope) { id } }"}`, want: []string{"nope"}},
		{name: "a body that is not JSON is refused",
			body: `{"query": `, want: []string{"json"}},
		{name: "a request without a query is refused",
			body: `{}`, want: []string{"operation"}},
		{name: "an unsupported content type is refused",
			body: `query { me { user { name } } }`, contentType: "text/plain", want: []string{"application/json"}},
		{name: "an unsupported method is refused",
			method: http.MethodPut, body: `{"query": "{ me { user { name } } }"}`, want: []string{"PUT"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			method := c.method
			if method == "" {
				method = http.MethodPost
			}
			req, _ := http.NewRequest(method, ts.url+"/graphql", strings.NewReader(c.body))
			ct := c.contentType
			if ct == "" {
				ct = "application/json"
			}
			req.Header.Set("Content-Type", ct)
			req.Header.Set("Authorization", "Bearer "+adminKey)
			res := ts.doGQL(t, req)
			if res.Status >= 500 {
				t.Errorf("status %d, want < 500", res.Status)
			}
			if len(res.Errors) == 0 {
				t.Fatalf("no errors: %s", res.Raw)
			}
			if res.code() == "" {
				t.Errorf("the error has no extensions.code: %s", res.Raw)
			}
			if res.code() == "INTERNAL" {
				t.Errorf("malformed input is reported as INTERNAL: %s", res.Raw)
			}
			// The problem is named in the message or, for variables, in
			// the error's path.
			said := strings.ToLower(res.message() + " " + fmt.Sprint(res.Errors[0].Path))
			for _, w := range c.want {
				if !strings.Contains(said, strings.ToLower(w)) {
					t.Errorf("message %q (path %v) does not name %q", res.message(), res.Errors[0].Path, w)
				}
			}
			noStackTrace(t, res.Raw)
			if d := path(res.Data, "createPool"); d != nil {
				t.Errorf("a pool was created: %v", d)
			}
		})
	}
	t.Run("a mutation sent with GET is refused and does not run", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, ts.url+"/graphql?query="+url.QueryEscape(`mutation { createProject(input: {name: "via-get"}) { project { id } } }`), nil)
		req.Header.Set("Authorization", "Bearer "+adminKey)
		res := ts.doGQL(t, req)
		// gqlgen's GET transport answers this itself, without a code.
		if res.Status != http.StatusNotAcceptable || !strings.Contains(res.message(), "only allow query") {
			t.Errorf("GET mutation = %d %s, want 406 saying GET allows only queries", res.Status, res.Raw)
		}
		if contains(projectNames(t, ts), "via-get") {
			t.Errorf("a mutation sent with GET created a project")
		}
	})
	t.Run("a query sent with GET works", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, ts.url+"/graphql?query="+url.QueryEscape(meQuery), nil)
		req.Header.Set("Authorization", "Bearer "+adminKey)
		if res := ts.doGQL(t, req); len(res.Errors) > 0 || str(res.Data, "me", "user", "name") != "admin" {
			t.Errorf("GET query = %d %s", res.Status, res.Raw)
		}
	})
	t.Run("none of them is logged as a server error", func(t *testing.T) {
		noErrorLogs(t, ts)
	})
	t.Run("no pool was created by any of them", func(t *testing.T) {
		d := ts.mustGQL(t, adminKey, `{ pools { edges { node { name } } } }`, nil)
		if got := nodeValues(d, "name", "pools"); len(got) != 1 || got[0] != "lab" {
			t.Errorf("pools = %v, want only lab", got)
		}
	})
}

func TestComplexityLimit(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	// Pools and profiles refer to each other, so a query can nest without
	// end; 300 levels of eight fields each is far over the limit and within
	// the parser's nesting depth.
	var q strings.Builder
	q.WriteString("{ profiles { edges { node {")
	const depth = 300
	for i := 0; i < depth; i++ {
		q.WriteString(" pools { id name capacityGpus executionPriority { id name timeWeight")
	}
	q.WriteString(strings.Repeat(" } }", depth))
	q.WriteString(" } } } }")
	res := ts.gql(t, gqlRequest{Credential: adminKey, Query: q.String()})
	if len(res.Errors) == 0 {
		t.Fatalf("an absurdly nested query was answered: %.300s", res.Raw)
	}
	if res.code() != "COMPLEXITY_LIMIT_EXCEEDED" {
		t.Errorf("code = %v, want COMPLEXITY_LIMIT_EXCEEDED: %.500s", res.codes(), res.Raw)
	}
	if !strings.Contains(res.message(), "exceeds the limit of 2000") {
		t.Errorf("message %q does not give the limit", res.message())
	}
	if res.Status >= 500 {
		t.Errorf("status = %d, want < 500", res.Status)
	}
	if res.Data != nil {
		t.Errorf("data = %v, want none: the operation must not run", res.Data)
	}
}

func TestEstateProblems(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	apply := func(doc string) *gqlResult {
		return ts.gql(t, gqlRequest{Credential: adminKey, Query: `mutation($doc: String!) { applyEstate(document: $doc) { summary } }`,
			Vars: map[string]any{"doc": doc}})
	}

	t.Run("two mistakes are both listed in extensions.problems and nothing is written", func(t *testing.T) {
		res := apply(`apiVersion: klique/v1
kind: Estate
gpuClasses:
  - name: l4
    memoryGb: 24
pools:
  - name: lab
    kind: bare_metal
    capacity: 4
    gpuClass: no-such-class
profiles:
  - name: one
    size: 1
    pools: [no-such-pool]
`)
		if res.code() != "BAD_USER_INPUT" {
			t.Fatalf("code = %v, want BAD_USER_INPUT: %s", res.codes(), res.Raw)
		}
		raw, _ := res.Errors[0].Extensions["problems"].([]any)
		var problems []string
		for _, p := range raw {
			s, _ := p.(string)
			problems = append(problems, s)
		}
		if len(problems) != 2 {
			t.Fatalf("problems = %q, want the two mistakes", problems)
		}
		joined := strings.Join(problems, "\n")
		for _, w := range []string{"no-such-class", "no-such-pool"} {
			if !strings.Contains(joined, w) {
				t.Errorf("problems %q do not name %s", problems, w)
			}
		}
		d := ts.mustGQL(t, adminKey, `{ gpuClasses { edges { node { name } } } pools { edges { node { name } } } }`, nil)
		if n := len(nodes(d, "gpuClasses")) + len(nodes(d, "pools")); n != 0 {
			t.Errorf("a refused estate file wrote %d objects: %v", n, d)
		}
	})
	t.Run("one mistake is the message, without a problems list", func(t *testing.T) {
		res := apply("apiVersion: klique/v1\nkind: Estate\npools:\n  - name: lab\n    kind: bare_metal\n    capacity: 4\n    gpuClass: nope\n")
		if res.code() != "BAD_USER_INPUT" || !strings.Contains(res.message(), "nope") {
			t.Fatalf("answer = %s, want BAD_USER_INPUT naming nope", res.Raw)
		}
		if _, ok := res.Errors[0].Extensions["problems"]; ok {
			t.Errorf("a single problem comes with a problems list: %s", res.Raw)
		}
	})
	t.Run("a dry run reports what it would do, writes nothing and logs no error", func(t *testing.T) {
		ts.logs.errors()
		d := ts.mustGQL(t, adminKey, `mutation($doc: String!) { applyEstate(document: $doc, dryRun: true) { dryRun summary changes { action kind name } } }`,
			map[string]any{"doc": smallEstate})
		if path(d, "applyEstate", "dryRun") != true || !strings.Contains(str(d, "applyEstate", "summary"), "dry run") {
			t.Errorf("applyEstate = %v, want a dry run that says so", d)
		}
		if n := len(path(d, "applyEstate", "changes").([]any)); n != 7 {
			t.Errorf("the dry run lists %d changes, want the 7 objects of the file", n)
		}
		if got := projectNames(t, ts); len(got) != 0 {
			t.Errorf("a dry run wrote projects %v", got)
		}
		noErrorLogs(t, ts)
	})
	t.Run("an unknown field in the file is named with its line", func(t *testing.T) {
		res := apply("apiVersion: klique/v1\nkind: Estate\npools:\n  - name: lab\n    capacty: 4\n")
		if res.code() != "BAD_USER_INPUT" || !strings.Contains(res.message(), "capacty") {
			t.Errorf("answer = %s, want BAD_USER_INPUT naming capacty", res.Raw)
		}
		noStackTrace(t, res.Raw)
	})
}

func TestPagination(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	applyEstate(t, ts, smallEstate)

	t.Run("projects page through all seven exactly once", func(t *testing.T) {
		ts.mustGQL(t, adminKey, `mutation { deleteProject(id: "proj") { id } }`, nil)
		for i := 1; i <= 7; i++ {
			ts.mustGQL(t, adminKey, `mutation($n: String) { createProject(input: {name: $n}) { project { id } } }`,
				map[string]any{"n": fmt.Sprintf("p%d", i)})
		}
		var got []string
		var sizes []int
		var after any
		for page := 0; ; page++ {
			if page > 5 {
				t.Fatalf("more than 5 pages of 3 for 7 projects: %v", got)
			}
			d := ts.mustGQL(t, adminKey, `query($after: String) { projects(first: 3, after: $after) { edges { cursor node { name } } pageInfo { hasNextPage endCursor } } }`,
				map[string]any{"after": after})
			names := nodeValues(d, "name", "projects")
			got = append(got, names...)
			sizes = append(sizes, len(names))
			edges, _ := path(d, "projects", "edges").([]any)
			if len(edges) > 0 && str(edges[len(edges)-1], "cursor") != str(d, "projects", "pageInfo", "endCursor") {
				t.Errorf("endCursor is not the cursor of the last edge")
			}
			if path(d, "projects", "pageInfo", "hasNextPage") != true {
				break
			}
			after = str(d, "projects", "pageInfo", "endCursor")
		}
		if strings.Join(got, ",") != "p1,p2,p3,p4,p5,p6,p7" {
			t.Errorf("pages gave %v, want p1..p7 once each in order", got)
		}
		if fmt.Sprint(sizes) != "[3 3 1]" {
			t.Errorf("page sizes = %v, want [3 3 1]", sizes)
		}
	})

	t.Run("tasks page newest first", func(t *testing.T) {
		for i := 1; i <= 5; i++ {
			ts.mustGQL(t, adminKey, `mutation($n: String!) { enqueueTask(input: {name: $n, computeResource: "1 GPU", project: "p1", command: ["true"]}) { id } }`,
				map[string]any{"n": fmt.Sprintf("t%d", i)})
		}
		var got []string
		var after any
		for page := 0; page < 5; page++ {
			d := ts.mustGQL(t, adminKey, `query($after: String) { tasks(first: 2, after: $after) { edges { node { name position } } pageInfo { hasNextPage endCursor } } }`,
				map[string]any{"after": after})
			got = append(got, nodeValues(d, "name", "tasks")...)
			if path(d, "tasks", "pageInfo", "hasNextPage") != true {
				break
			}
			after = str(d, "tasks", "pageInfo", "endCursor")
		}
		if strings.Join(got, ",") != "t5,t4,t3,t2,t1" {
			t.Errorf("pages gave %v, want t5,t4,t3,t2,t1", got)
		}
		d := ts.mustGQL(t, adminKey, `{ tasks(first: 5) { edges { node { name position } } } }`, nil)
		for _, n := range nodes(d, "tasks") {
			want := float64(n["name"].(string)[1] - '0')
			if n["position"] != want {
				t.Errorf("task %s is at position %v, want %v", n["name"], n["position"], want)
			}
		}
	})

	t.Run("API keys page newest first, each once", func(t *testing.T) {
		var made []string
		for i := 0; i < 4; i++ {
			_, id := newKey(t, ts, "admin")
			made = append(made, id)
		}
		var got []string
		var after any
		for page := 0; page < 6; page++ {
			d := ts.mustGQL(t, adminKey, `query($after: String) { apiKeys(first: 2, after: $after) { edges { node { id } } pageInfo { hasNextPage endCursor } } }`,
				map[string]any{"after": after})
			got = append(got, nodeValues(d, "id", "apiKeys")...)
			if path(d, "apiKeys", "pageInfo", "hasNextPage") != true {
				break
			}
			after = str(d, "apiKeys", "pageInfo", "endCursor")
		}
		if len(got) != 5 {
			t.Fatalf("pages gave %d keys, want 5 (bootstrap and 4 new): %v", len(got), got)
		}
		for i, id := range made {
			if got[3-i] != id {
				t.Errorf("key %d of the newest-first list is %s, want %s", 3-i, got[3-i], id)
			}
		}
	})

	t.Run("users page by name", func(t *testing.T) {
		for _, n := range []string{"uma", "ulf", "ute"} {
			ts.mustGQL(t, adminKey, `mutation($n: String!) { createUser(input: {name: $n}) { id } }`, map[string]any{"n": n})
		}
		var got []string
		var after any
		for page := 0; page < 5; page++ {
			d := ts.mustGQL(t, adminKey, `query($after: String) { users(first: 2, after: $after) { edges { node { name } } pageInfo { hasNextPage endCursor } } }`,
				map[string]any{"after": after})
			got = append(got, nodeValues(d, "name", "users")...)
			if path(d, "users", "pageInfo", "hasNextPage") != true {
				break
			}
			after = str(d, "users", "pageInfo", "endCursor")
		}
		if strings.Join(got, ",") != "admin,ulf,uma,ute" {
			t.Errorf("pages gave %v, want admin,ulf,uma,ute", got)
		}
	})

	for _, c := range []struct{ name, query string }{
		{"a cursor that is not base64 is BAD_USER_INPUT for projects", `{ projects(after: "not a cursor!") { edges { cursor } } }`},
		{"a cursor that is not a sequence number is BAD_USER_INPUT for tasks", `{ tasks(after: "Zm9v") { edges { cursor } } }`},
		{"a garbage cursor is BAD_USER_INPUT for the audit trail", `{ auditLog(after: "%%%") { edges { cursor } } }`},
		{"a negative page size is BAD_USER_INPUT", `{ projects(first: -1) { edges { cursor } } }`},
		{"a page size over 500 is BAD_USER_INPUT", `{ tasks(first: 501) { edges { cursor } } }`},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := ts.gql(t, gqlRequest{Credential: adminKey, Query: c.query})
			if res.code() != "BAD_USER_INPUT" {
				t.Errorf("code = %v, want BAD_USER_INPUT: %s", res.codes(), res.Raw)
			}
			if res.Status >= 500 {
				t.Errorf("status %d", res.Status)
			}
		})
	}
}

func TestAuditChannel(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	channelOf := func(t *testing.T, project string) string {
		t.Helper()
		d := ts.mustGQL(t, adminKey, `{ auditLog(filter: {objectKind: "project"}) { edges { node { action objectName channel actor } } } }`, nil)
		for _, n := range nodes(d, "auditLog") {
			if n["objectName"] == project && n["action"] == "project.created" {
				if n["actor"] != "admin" {
					t.Errorf("actor = %v, want admin", n["actor"])
				}
				return str(n, "channel")
			}
		}
		t.Fatalf("no audit entry for the creation of %s: %v", project, d)
		return ""
	}

	t.Run("a GraphQL mutation is recorded with channel graphql", func(t *testing.T) {
		ts.mustGQL(t, adminKey, `mutation { createProject(input: {name: "via-graphql"}) { project { id } } }`, nil)
		if got := channelOf(t, "via-graphql"); got != "graphql" {
			t.Errorf("channel = %q, want graphql", got)
		}
	})
	t.Run("a mutation sent with X-Klique-Client: cli is recorded with channel cli", func(t *testing.T) {
		res := ts.gql(t, gqlRequest{Credential: adminKey, Query: `mutation { createProject(input: {name: "via-cli"}) { project { id } } }`,
			Headers: map[string]string{"X-Klique-Client": "cli"}})
		if len(res.Errors) > 0 {
			t.Fatalf("createProject: %s", res.Raw)
		}
		if got := channelOf(t, "via-cli"); got != "cli" {
			t.Errorf("channel = %q, want cli", got)
		}
	})
	t.Run("a plain request after a cli one is recorded with channel graphql again", func(t *testing.T) {
		ts.mustGQL(t, adminKey, `mutation { createProject(input: {name: "after-cli"}) { project { id } } }`, nil)
		if got := channelOf(t, "after-cli"); got != "graphql" {
			t.Errorf("channel = %q, want graphql: the cli header of an earlier request must not stick", got)
		}
	})
	t.Run("another client name does not pick a channel", func(t *testing.T) {
		res := ts.gql(t, gqlRequest{Credential: adminKey, Query: `mutation { createProject(input: {name: "via-other"}) { project { id } } }`,
			Headers: map[string]string{"X-Klique-Client": "engine"}})
		if len(res.Errors) > 0 {
			t.Fatalf("createProject: %s", res.Raw)
		}
		if got := channelOf(t, "via-other"); got != "graphql" {
			t.Errorf("channel = %q, want graphql: a header must not claim another channel", got)
		}
	})
}

func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	ts.stopped = true
	started, release := make(chan struct{}), make(chan struct{})
	ts.app.Handler.Mux().HandleFunc("GET /test/slow", func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
		_, _ = w.Write([]byte("finished"))
	})

	type answer struct {
		status int
		body   string
		err    error
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := ts.http.Get(ts.url + "/test/slow")
		if err != nil {
			done <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		done <- answer{status: resp.StatusCode, body: string(b), err: err}
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow request never reached its handler")
	}

	var wg sync.WaitGroup
	var shutdownErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shutdownErr = ts.app.Shutdown(ctx)
	}()

	// New connections are refused while the old request is still running.
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := (&http.Client{Timeout: time.Second}).Get(ts.url + "/healthz")
		if err != nil {
			break
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatal("the server still accepts new requests after Shutdown was called")
		}
		time.Sleep(10 * time.Millisecond)
	}

	close(release)
	a := <-done
	if a.err != nil || a.status != http.StatusOK || a.body != "finished" {
		t.Errorf("the request in flight got %d %q %v, want 200 finished", a.status, a.body, a.err)
	}
	wg.Wait()
	if shutdownErr != nil {
		t.Errorf("Shutdown: %v", shutdownErr)
	}
}
