package identity

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const (
	idpIssuer   = "https://idp.example.com/realms/lab"
	idpAudience = "klique-client"
)

var (
	idpKeysOnce sync.Once
	idpRSA      *rsa.PrivateKey
	idpEC       *ecdsa.PrivateKey
	idpEC384    *ecdsa.PrivateKey
	idpEd       ed25519.PrivateKey
)

func idpKeys(t *testing.T) {
	t.Helper()
	idpKeysOnce.Do(func() {
		var err error
		if idpRSA, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		if idpEC, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			panic(err)
		}
		if idpEC384, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader); err != nil {
			panic(err)
		}
		if _, idpEd, err = ed25519.GenerateKey(rand.Reader); err != nil {
			panic(err)
		}
	})
}

func b64u(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func rsaJWK(kid string, k *rsa.PublicKey) map[string]string {
	return map[string]string{"kty": "RSA", "kid": kid, "use": "sig", "n": b64u(k.N.Bytes()), "e": b64u(big.NewInt(int64(k.E)).Bytes())}
}

func ecJWK(kid, crv string, k *ecdsa.PublicKey, size int) map[string]string {
	raw, err := k.Bytes() // 0x04 || X || Y
	if err != nil {
		panic(err)
	}
	return map[string]string{"kty": "EC", "kid": kid, "crv": crv, "x": b64u(raw[1 : 1+size]), "y": b64u(raw[1+size:])}
}

// fakeIdP serves a JWKS and counts requests. keys can be changed to
// simulate rotation.
type fakeIdP struct {
	srv  *httptest.Server
	hits atomic.Int32
	mu   sync.Mutex
	keys []map[string]string
	fail bool
}

func newFakeIdP(t *testing.T) *fakeIdP {
	t.Helper()
	idpKeys(t)
	f := &fakeIdP{keys: []map[string]string{
		rsaJWK("rsa1", &idpRSA.PublicKey), // no "alg": the key type alone must bind the algorithm family
		ecJWK("ec1", "P-256", &idpEC.PublicKey, 32),
		ecJWK("ec384", "P-384", &idpEC384.PublicKey, 48),
		{"kty": "OKP", "kid": "ed1", "crv": "Ed25519", "x": b64u(idpEd.Public().(ed25519.PublicKey)), "alg": "EdDSA"},
		// Keys that must be skipped without spoiling the set.
		{"kty": "RSA", "kid": "enc1", "use": "enc", "n": b64u(idpRSA.N.Bytes()), "e": "AQAB"},
		{"kty": "oct", "kid": "hmac1", "k": b64u([]byte("shared-secret"))},
		{"kty": "EC", "kid": "bad-point", "crv": "P-256", "x": b64u(make([]byte, 32)), "y": b64u(make([]byte, 32))},
		{"kty": "RSA", "kid": "short", "n": b64u(big.NewInt(0).Lsh(big.NewInt(1), 1023).Bytes()), "e": "AQAB"},
	}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.hits.Add(1)
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.fail {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": f.keys})
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeIdP) verifier(t *testing.T) *OIDCVerifier {
	t.Helper()
	v, err := NewOIDCVerifier(OIDCConfig{Issuer: idpIssuer, JWKSURL: f.srv.URL + "/certs", Audience: idpAudience}, f.srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func idpClaims(mod func(jwt.MapClaims)) jwt.MapClaims {
	c := jwt.MapClaims{
		"iss":                idpIssuer,
		"aud":                []string{idpAudience, "account"},
		"sub":                "f3a1-subject",
		"preferred_username": "Jane.Doe",
		"email":              "jane@example.com",
		"name":               "Jane Doe",
		"groups":             []string{"ml-research", "vision"},
		"iat":                testNow.Unix(),
		"nbf":                testNow.Unix(),
		"exp":                testNow.Add(5 * time.Minute).Unix(),
		"jti":                "idp-jti-1",
	}
	if mod != nil {
		mod(c)
	}
	return c
}

func TestOIDCVerify(t *testing.T) {
	idp := newFakeIdP(t)
	v := idp.verifier(t)
	ctx := context.Background()
	rsaPubDER, err := x509.MarshalPKIXPublicKey(&idpRSA.PublicKey)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name   string
		token  string
		at     time.Time
		reason string // "" means valid
		groups []string
	}{
		{name: "RS256", token: signRaw(t, jwt.SigningMethodRS256, idpClaims(nil), "rsa1", idpRSA), at: testNow, groups: []string{"ml-research", "vision"}},
		{name: "PS256", token: signRaw(t, jwt.SigningMethodPS256, idpClaims(nil), "rsa1", idpRSA), at: testNow, groups: []string{"ml-research", "vision"}},
		{name: "ES256 with a single-string groups claim", token: signRaw(t, jwt.SigningMethodES256, idpClaims(func(c jwt.MapClaims) { c["groups"] = "vision" }), "ec1", idpEC), at: testNow, groups: []string{"vision"}},
		{name: "ES384", token: signRaw(t, jwt.SigningMethodES384, idpClaims(nil), "ec384", idpEC384), at: testNow, groups: []string{"ml-research", "vision"}},
		{name: "EdDSA", token: signRaw(t, jwt.SigningMethodEdDSA, idpClaims(nil), "ed1", idpEd), at: testNow, groups: []string{"ml-research", "vision"}},
		{name: "single-string audience", token: signRaw(t, jwt.SigningMethodRS256, idpClaims(func(c jwt.MapClaims) { c["aud"] = idpAudience }), "rsa1", idpRSA), at: testNow, groups: []string{"ml-research", "vision"}},
		{name: "RSA kid with ES256", token: signRaw(t, jwt.SigningMethodES256, idpClaims(nil), "rsa1", idpEC), at: testNow, reason: reasonAlgKeyMismatch},
		{name: "P-384 kid with ES256", token: signRaw(t, jwt.SigningMethodES256, idpClaims(nil), "ec384", idpEC), at: testNow, reason: reasonAlgKeyMismatch},
		{name: "EC kid with RS256", token: signRaw(t, jwt.SigningMethodRS256, idpClaims(nil), "ec1", idpRSA), at: testNow, reason: reasonAlgKeyMismatch},
		{name: "HS256 keyed with the RSA public key (algorithm confusion)", token: signRaw(t, jwt.SigningMethodHS256, idpClaims(nil), "rsa1", rsaPubDER), at: testNow, reason: reasonSignature},
		{name: "HS256 with a random secret", token: signRaw(t, jwt.SigningMethodHS256, idpClaims(nil), "rsa1", []byte("0123456789abcdef0123456789abcdef")), at: testNow, reason: reasonSignature},
		{name: "HS256 with the oct key of the set", token: signRaw(t, jwt.SigningMethodHS256, idpClaims(nil), "hmac1", []byte("shared-secret")), at: testNow, reason: reasonSignature},
		{name: "alg none", token: signRaw(t, jwt.SigningMethodNone, idpClaims(nil), "rsa1", jwt.UnsafeAllowNoneSignatureType), at: testNow, reason: reasonSignature},
		{name: "ES512 not allowed", token: signRaw(t, jwt.SigningMethodES512, idpClaims(nil), "ec1", mustP521(t)), at: testNow, reason: reasonSignature},
		{name: "encryption key refused", token: signRaw(t, jwt.SigningMethodRS256, idpClaims(nil), "enc1", idpRSA), at: testNow, reason: reasonKeyUnknown},
		{name: "wrong issuer", token: signRaw(t, jwt.SigningMethodRS256, idpClaims(func(c jwt.MapClaims) { c["iss"] = "https://evil.example.com" }), "rsa1", idpRSA), at: testNow, reason: reasonIssuer},
		{name: "wrong audience", token: signRaw(t, jwt.SigningMethodRS256, idpClaims(func(c jwt.MapClaims) { c["aud"] = []string{"other-app"} }), "rsa1", idpRSA), at: testNow, reason: reasonAudience},
		{name: "expired", token: signRaw(t, jwt.SigningMethodRS256, idpClaims(nil), "rsa1", idpRSA), at: testNow.Add(5*time.Minute + 31*time.Second), reason: reasonIdentityExpired},
		{name: "expired within leeway", token: signRaw(t, jwt.SigningMethodRS256, idpClaims(nil), "rsa1", idpRSA), at: testNow.Add(5*time.Minute + 29*time.Second), groups: []string{"ml-research", "vision"}},
		{name: "not yet valid", token: signRaw(t, jwt.SigningMethodRS256, idpClaims(func(c jwt.MapClaims) { c["nbf"] = testNow.Add(2 * time.Minute).Unix() }), "rsa1", idpRSA), at: testNow, reason: reasonIdentityNotYet},
		{name: "issued in the future", token: signRaw(t, jwt.SigningMethodRS256, idpClaims(func(c jwt.MapClaims) { c["iat"] = testNow.Add(2 * time.Minute).Unix() }), "rsa1", idpRSA), at: testNow, reason: reasonIdentityNotYet},
		{name: "missing exp", token: signRaw(t, jwt.SigningMethodRS256, idpClaims(func(c jwt.MapClaims) { delete(c, "exp") }), "rsa1", idpRSA), at: testNow, reason: reasonClaimMissing},
		{name: "missing sub", token: signRaw(t, jwt.SigningMethodRS256, idpClaims(func(c jwt.MapClaims) { delete(c, "sub") }), "rsa1", idpRSA), at: testNow, reason: reasonClaimMissing},
		{name: "missing kid", token: signRaw(t, jwt.SigningMethodRS256, idpClaims(nil), "", idpRSA), at: testNow, reason: reasonKeyUnknown},
		{name: "signed by another RSA key under our kid", token: signRaw(t, jwt.SigningMethodRS256, idpClaims(nil), "rsa1", mustRSA(t)), at: testNow, reason: reasonSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := v.Verify(ctx, tc.token, tc.at)
			if tc.reason != "" {
				if id != nil {
					t.Fatal("identity returned with an error")
				}
				wantUnauthenticated(t, err, tc.reason)
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if id.Subject != "f3a1-subject" || id.Username != "Jane.Doe" || id.Email != "jane@example.com" || id.DisplayName != "Jane Doe" || id.TokenID != "idp-jti-1" {
				t.Fatalf("identity = %+v", id)
			}
			if id.ExternalID() != idpIssuer+"|f3a1-subject" {
				t.Fatalf("external id = %q", id.ExternalID())
			}
			if !slices.Equal(id.Groups, tc.groups) {
				t.Fatalf("groups = %v, want %v", id.Groups, tc.groups)
			}
		})
	}
	// Everything above ran against one fetch: known kids are cached, and
	// the unknown ones ("enc1", "") did not refetch within 30 seconds.
	if got := idp.hits.Load(); got != 1 {
		t.Errorf("JWKS fetched %d times, want 1", got)
	}
}

func mustRSA(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mustP521(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestOIDCUsernameFallback(t *testing.T) {
	idp := newFakeIdP(t)
	v := idp.verifier(t)
	for _, tc := range []struct {
		name string
		mod  func(jwt.MapClaims)
		want string
	}{
		{"preferred_username", nil, "Jane.Doe"},
		{"email", func(c jwt.MapClaims) { delete(c, "preferred_username") }, "jane@example.com"},
		{"sub", func(c jwt.MapClaims) { delete(c, "preferred_username"); delete(c, "email") }, "f3a1-subject"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := v.Verify(context.Background(), signRaw(t, jwt.SigningMethodRS256, idpClaims(tc.mod), "rsa1", idpRSA), testNow)
			if err != nil {
				t.Fatal(err)
			}
			if id.Username != tc.want {
				t.Fatalf("username = %q, want %q", id.Username, tc.want)
			}
		})
	}
	// Malformed groups claims grant nothing.
	id, err := v.Verify(context.Background(), signRaw(t, jwt.SigningMethodRS256, idpClaims(func(c jwt.MapClaims) {
		c["groups"] = []any{"ok", 7, map[string]any{"x": 1}, ""}
	}), "rsa1", idpRSA), testNow)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(id.Groups, []string{"ok"}) {
		t.Fatalf("groups = %v", id.Groups)
	}
}

func TestOIDCUnknownKidRefetch(t *testing.T) {
	idp := newFakeIdP(t)
	v := idp.verifier(t)
	ctx := context.Background()
	t0 := testNow

	if _, err := v.Verify(ctx, signRaw(t, jwt.SigningMethodRS256, idpClaims(nil), "rsa1", idpRSA), t0); err != nil {
		t.Fatal(err)
	}
	if got := idp.hits.Load(); got != 1 {
		t.Fatalf("hits after first verify = %d, want 1", got)
	}

	// The provider rotates in a new key. 31 seconds later a token with its
	// kid arrives: one refetch, and the token is accepted.
	rotated := mustRSA(t)
	idp.mu.Lock()
	idp.keys = append(idp.keys, rsaJWK("rsa2", &rotated.PublicKey))
	idp.mu.Unlock()
	at := t0.Add(31 * time.Second)
	if _, err := v.Verify(ctx, signRaw(t, jwt.SigningMethodRS256, idpClaims(nil), "rsa2", rotated), at); err != nil {
		t.Fatalf("rotated key not picked up: %v", err)
	}
	if got := idp.hits.Load(); got != 2 {
		t.Fatalf("hits after rotation = %d, want 2", got)
	}

	// An unknown kid after another 31 seconds: one refetch, still unknown.
	at = at.Add(31 * time.Second)
	_, err := v.Verify(ctx, signRaw(t, jwt.SigningMethodRS256, idpClaims(nil), "made-up-1", idpRSA), at)
	wantUnauthenticated(t, err, reasonKeyUnknown)
	if got := idp.hits.Load(); got != 3 {
		t.Fatalf("hits after unknown kid = %d, want 3", got)
	}

	// A flood of other unknown kids within 30 seconds: no more fetches.
	for i := 0; i < 20; i++ {
		_, err := v.Verify(ctx, signRaw(t, jwt.SigningMethodRS256, idpClaims(nil), "made-up-"+string(rune('a'+i)), idpRSA), at.Add(time.Duration(i)*time.Second))
		wantUnauthenticated(t, err, reasonKeyUnknown)
	}
	if got := idp.hits.Load(); got != 3 {
		t.Fatalf("hits after a flood of unknown kids = %d, want 3", got)
	}
	// Known keys keep working meanwhile.
	if _, err := v.Verify(ctx, signRaw(t, jwt.SigningMethodES256, idpClaims(nil), "ec1", idpEC), at.Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}

	// Concurrent unknown kids after the interval: exactly one fetch.
	at = at.Add(time.Minute)
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = v.Verify(ctx, signRaw(t, jwt.SigningMethodRS256, idpClaims(nil), "made-up-x", idpRSA), at)
		}()
	}
	wg.Wait()
	if got := idp.hits.Load(); got != 4 {
		t.Fatalf("hits after concurrent unknown kids = %d, want 4", got)
	}
}

func TestOIDCProviderDown(t *testing.T) {
	idp := newFakeIdP(t)
	idp.fail = true
	v := idp.verifier(t)
	_, err := v.Verify(context.Background(), signRaw(t, jwt.SigningMethodRS256, idpClaims(nil), "rsa1", idpRSA), testNow)
	if err == nil || errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("error = %v, want a provider failure that is not ErrUnauthenticated", err)
	}
	// Within 30 seconds a down provider is not asked again.
	_, err = v.Verify(context.Background(), signRaw(t, jwt.SigningMethodRS256, idpClaims(nil), "rsa1", idpRSA), testNow.Add(time.Second))
	wantUnauthenticated(t, err, reasonKeyUnknown)
	if got := idp.hits.Load(); got != 1 {
		t.Fatalf("hits = %d, want 1", got)
	}
	// Once it is back, the next attempt after the interval succeeds.
	idp.mu.Lock()
	idp.fail = false
	idp.mu.Unlock()
	if _, err := v.Verify(context.Background(), signRaw(t, jwt.SigningMethodRS256, idpClaims(func(c jwt.MapClaims) {
		c["exp"] = testNow.Add(10 * time.Minute).Unix()
	}), "rsa1", idpRSA), testNow.Add(31*time.Second)); err != nil {
		t.Fatal(err)
	}
}

func TestNewOIDCVerifierConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  OIDCConfig
		ok   bool
	}{
		{"https", OIDCConfig{Issuer: "i", JWKSURL: "https://idp.example.com/certs", Audience: "a"}, true},
		{"loopback http", OIDCConfig{Issuer: "i", JWKSURL: "http://127.0.0.1:8080/certs", Audience: "a"}, true},
		{"localhost http", OIDCConfig{Issuer: "i", JWKSURL: "http://localhost:8080/certs", Audience: "a"}, true},
		{"plain http refused", OIDCConfig{Issuer: "i", JWKSURL: "http://idp.example.com/certs", Audience: "a"}, false},
		{"plain http allowed explicitly", OIDCConfig{Issuer: "i", JWKSURL: "http://idp.example.com/certs", Audience: "a", AllowHTTP: true}, true},
		{"file URL", OIDCConfig{Issuer: "i", JWKSURL: "file:///etc/keys.json", Audience: "a"}, false},
		{"no audience", OIDCConfig{Issuer: "i", JWKSURL: "https://idp.example.com/certs"}, false},
		{"no issuer", OIDCConfig{JWKSURL: "https://idp.example.com/certs", Audience: "a"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := NewOIDCVerifier(tc.cfg, nil)
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if err == nil {
				c := v.Config()
				if c.GroupsClaim != "groups" || c.UsernameClaim != "preferred_username" || c.Tenant != "default" {
					t.Fatalf("defaults not applied: %+v", c)
				}
			}
		})
	}
}
