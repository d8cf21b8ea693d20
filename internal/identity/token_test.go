package identity

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/klique-ai/klique/internal/store"
)

const (
	testIssuer   = "https://klique.test"
	testAudience = "klique"
	testTTL      = time.Hour
)

var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func testSigner(t *testing.T, seedByte byte, issuer, audience string) *Signer {
	t.Helper()
	s, err := NewSigner(bytes.Repeat([]byte{seedByte}, ed25519.SeedSize), issuer, audience, testTTL)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// signRaw signs arbitrary claims with method and key, setting kid when not
// empty: the tool for forging the tokens an attacker would send.
func signRaw(t *testing.T, method jwt.SigningMethod, claims jwt.Claims, kid string, key any) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// wantUnauthenticated checks err wraps ErrUnauthenticated with reason.
func wantUnauthenticated(t *testing.T, err error, reason string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %q", reason)
	}
	if !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("error %v does not wrap ErrUnauthenticated", err)
	}
	if reason != "" && err.Error() != reason {
		t.Fatalf("reason = %q, want %q", err.Error(), reason)
	}
}

func TestSignerVerify(t *testing.T) {
	s := testSigner(t, 1, testIssuer, testAudience)
	p := &Principal{UserID: "user-1", TenantID: "tenant-1", ProjectID: "proj-1", Method: MethodAPIKey, CredentialID: "key-1"}
	valid, expires, err := s.Issue(p, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if !expires.Equal(testNow.Add(testTTL)) {
		t.Fatalf("expires = %v", expires)
	}

	claims := func(mod func(c *TokenClaims)) *TokenClaims {
		c := &TokenClaims{
			RegisteredClaims: jwt.RegisteredClaims{
				Issuer:    testIssuer,
				Subject:   "user-1",
				Audience:  jwt.ClaimStrings{testAudience},
				ExpiresAt: jwt.NewNumericDate(testNow.Add(time.Hour)),
				NotBefore: jwt.NewNumericDate(testNow),
				IssuedAt:  jwt.NewNumericDate(testNow),
				ID:        "jti-1",
			},
			TenantID:  "tenant-1",
			ProjectID: "proj-1",
			Via:       MethodAPIKey,
			KeyID:     "key-1",
		}
		if mod != nil {
			mod(c)
		}
		return c
	}
	sk := s.keys[0]
	pub := []byte(sk.pub)
	other := testSigner(t, 2, testIssuer, testAudience)
	otherAud := testSigner(t, 1, testIssuer, "someone-else")
	otherIss := testSigner(t, 1, "https://evil.test", testAudience)
	tok := func(tk string, _ time.Time, err error) string {
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	tamperSig := func(tk string) string {
		i := strings.LastIndexByte(tk, '.') + 5
		c := byte('A')
		if tk[i] == 'A' {
			c = 'B'
		}
		return tk[:i] + string(c) + tk[i+1:]
	}
	tamperPayload := func(tk string) string {
		parts := strings.Split(tk, ".")
		body, _ := base64.RawURLEncoding.DecodeString(parts[1])
		body = bytes.Replace(body, []byte(`"user-1"`), []byte(`"admin-1"`), 1)
		parts[1] = base64.RawURLEncoding.EncodeToString(body)
		return strings.Join(parts, ".")
	}

	for _, tc := range []struct {
		name   string
		token  string
		at     time.Time
		reason string // "" means valid
	}{
		{"valid", valid, testNow.Add(time.Minute), ""},
		{"valid within leeway after expiry", valid, expires.Add(20 * time.Second), ""},
		{"valid within leeway before nbf", valid, testNow.Add(-20 * time.Second), ""},
		{"expired", valid, expires.Add(31 * time.Second), reasonAccessExpired},
		{"not yet valid", valid, testNow.Add(-5 * time.Minute), reasonAccessNotYet},
		{"issued in the future", signRaw(t, jwt.SigningMethodEdDSA, claims(func(c *TokenClaims) {
			c.NotBefore = nil
			c.IssuedAt = jwt.NewNumericDate(testNow.Add(10 * time.Minute))
		}), sk.id, sk.priv), testNow, reasonAccessNotYet},
		{"wrong audience", tok(otherAud.Issue(p, testNow)), testNow, reasonAudience},
		{"missing audience", signRaw(t, jwt.SigningMethodEdDSA, claims(func(c *TokenClaims) { c.Audience = nil }), sk.id, sk.priv), testNow, reasonClaimMissing},
		{"wrong issuer", tok(otherIss.Issue(p, testNow)), testNow, reasonIssuer},
		{"alg none", signRaw(t, jwt.SigningMethodNone, claims(nil), sk.id, jwt.UnsafeAllowNoneSignatureType), testNow, reasonSignature},
		{"HS256 keyed with the public key (algorithm confusion)", signRaw(t, jwt.SigningMethodHS256, claims(nil), sk.id, pub), testNow, reasonSignature},
		{"HS256 keyed with the base64 public key", signRaw(t, jwt.SigningMethodHS256, claims(nil), sk.id, []byte(base64.RawURLEncoding.EncodeToString(pub))), testNow, reasonSignature},
		{"HS256 with a random secret", signRaw(t, jwt.SigningMethodHS256, claims(nil), sk.id, []byte("0123456789abcdef0123456789abcdef")), testNow, reasonSignature},
		{"signature tampered", tamperSig(valid), testNow, reasonSignature},
		{"payload tampered", tamperPayload(valid), testNow, reasonSignature},
		{"missing exp", signRaw(t, jwt.SigningMethodEdDSA, claims(func(c *TokenClaims) { c.ExpiresAt = nil }), sk.id, sk.priv), testNow, reasonClaimMissing},
		{"missing tenant", signRaw(t, jwt.SigningMethodEdDSA, claims(func(c *TokenClaims) { c.TenantID = "" }), sk.id, sk.priv), testNow, reasonClaimMissing},
		{"missing subject", signRaw(t, jwt.SigningMethodEdDSA, claims(func(c *TokenClaims) { c.Subject = "" }), sk.id, sk.priv), testNow, reasonClaimMissing},
		{"missing kid", signRaw(t, jwt.SigningMethodEdDSA, claims(nil), "", sk.priv), testNow, reasonKeyUnknown},
		{"another signer (other key)", tok(other.Issue(p, testNow)), testNow, reasonKeyUnknown},
		{"another key claiming our kid", signRaw(t, jwt.SigningMethodEdDSA, claims(nil), sk.id, other.keys[0].priv), testNow, reasonSignature},
		{"missing iat", signRaw(t, jwt.SigningMethodEdDSA, claims(func(c *TokenClaims) { c.IssuedAt = nil }), sk.id, sk.priv), testNow, reasonClaimMissing},
		{"missing jti", signRaw(t, jwt.SigningMethodEdDSA, claims(func(c *TokenClaims) { c.ID = "" }), sk.id, sk.priv), testNow, reasonClaimMissing},
		// A token the signing key made to last until 2200 was accepted
		// (as a platform admin's, in the attack); no token lives longer
		// than the control plane issues them.
		{"valid until 2200", signRaw(t, jwt.SigningMethodEdDSA, claims(func(c *TokenClaims) {
			c.ExpiresAt = jwt.NewNumericDate(time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC))
		}), sk.id, sk.priv), testNow, reasonLifetime},
		{"a second longer than the TTL", signRaw(t, jwt.SigningMethodEdDSA, claims(func(c *TokenClaims) {
			c.ExpiresAt = jwt.NewNumericDate(testNow.Add(testTTL + time.Second))
		}), sk.id, sk.priv), testNow, reasonLifetime},
		{"issued long ago to outlive the cap", signRaw(t, jwt.SigningMethodEdDSA, claims(func(c *TokenClaims) {
			c.IssuedAt = jwt.NewNumericDate(testNow.Add(-24 * time.Hour))
			c.NotBefore = c.IssuedAt
		}), sk.id, sk.priv), testNow, reasonLifetime},
		{"no credential it was issued from", signRaw(t, jwt.SigningMethodEdDSA, claims(func(c *TokenClaims) { c.Via, c.KeyID = "", "" }), sk.id, sk.priv), testNow, reasonTokenSource},
		{"via an API key without its id", signRaw(t, jwt.SigningMethodEdDSA, claims(func(c *TokenClaims) { c.KeyID = "" }), sk.id, sk.priv), testNow, reasonTokenSource},
		{"via another token", signRaw(t, jwt.SigningMethodEdDSA, claims(func(c *TokenClaims) { c.Via = MethodToken }), sk.id, sk.priv), testNow, reasonTokenSource},
		{"garbage", "not.a.token", testNow, reasonMalformed},
		{"two segments", "abc.def", testNow, reasonMalformed},
		{"too long", strings.Repeat("a", maxCredentialLen+1), testNow, reasonTooLong},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := s.Verify(tc.token, tc.at)
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if c.Subject != "user-1" || c.TenantID != "tenant-1" || c.ProjectID != "proj-1" || c.ID == "" || c.Via != MethodAPIKey || c.KeyID != "key-1" {
					t.Fatalf("claims = %+v", c)
				}
				return
			}
			if c != nil {
				t.Fatal("claims returned with an error")
			}
			wantUnauthenticated(t, err, tc.reason)
			if strings.Contains(err.Error(), tc.token) {
				t.Fatal("error echoes the token")
			}
		})
	}
}

func TestIssueClaims(t *testing.T) {
	s := testSigner(t, 1, testIssuer, testAudience)
	a, _, err := s.Issue(&Principal{UserID: "u", TenantID: "t", Method: MethodAPIKey, CredentialID: "k"}, testNow)
	if err != nil {
		t.Fatal(err)
	}
	b, _, _ := s.Issue(&Principal{UserID: "u", TenantID: "t", Method: MethodAPIKey, CredentialID: "k"}, testNow)
	if a == b {
		t.Fatal("two tokens are identical: jti is not random")
	}
	parts := strings.Split(a, ".")
	header, _ := base64.RawURLEncoding.DecodeString(parts[0])
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var h map[string]any
	var c map[string]any
	if err := json.Unmarshal(header, &h); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(payload, &c); err != nil {
		t.Fatal(err)
	}
	if h["alg"] != "EdDSA" || h["kid"] != s.KeyID() {
		t.Errorf("header = %v", h)
	}
	for _, k := range []string{"iss", "aud", "sub", "tid", "iat", "nbf", "exp", "jti", "via", "key"} {
		if _, ok := c[k]; !ok {
			t.Errorf("claim %s missing", k)
		}
	}
	if _, ok := c["pid"]; ok {
		t.Error("pid present for an unscoped principal")
	}
	if _, _, err := s.Issue(&Principal{UserID: "u"}, testNow); err == nil {
		t.Error("issued a token without a tenant")
	}
	if _, _, err := s.Issue(nil, testNow); err == nil {
		t.Error("issued a token for nil")
	}
	if _, _, err := s.Issue(&Principal{UserID: "u", TenantID: "t", Method: MethodToken, CredentialID: "jti"}, testNow); err == nil {
		t.Error("issued a token for a principal signed in with a token")
	}
	if _, _, err := s.Issue(&Principal{UserID: "u", TenantID: "t", Method: MethodAPIKey}, testNow); err == nil {
		t.Error("issued a token for an API key without its id")
	}
}

func TestJWKSVerifiesSignerTokens(t *testing.T) {
	s := testSigner(t, 1, testIssuer, testAudience)
	keys, err := parseJWKS(s.JWKS())
	if err != nil {
		t.Fatal(err)
	}
	k, ok := keys[s.KeyID()]
	if !ok || k.alg != "EdDSA" {
		t.Fatalf("JWKS keys = %v", keys)
	}
	if !bytes.Equal(k.key.(ed25519.PublicKey), s.keys[0].pub) {
		t.Fatal("JWKS key is not the public key")
	}
	if bytes.Contains(s.JWKS(), []byte(base64.RawURLEncoding.EncodeToString(s.keys[0].priv.Seed()))) {
		t.Fatal("JWKS contains the private seed")
	}
	var set map[string][]map[string]string
	if err := json.Unmarshal(s.JWKS(), &set); err != nil {
		t.Fatal(err)
	}
	if got := set["keys"][0]; got["kty"] != "OKP" || got["crv"] != "Ed25519" || got["d"] != "" {
		t.Fatalf("JWK = %v", got)
	}
}

// settingsOnly is a store.Queries with only settings implemented; every
// other method panics through the nil embedded interface.
type settingsOnly struct {
	store.Queries
	values map[string]string
	puts   int
}

func (s *settingsOnly) GetSetting(_ context.Context, key string) (string, error) {
	v, ok := s.values[key]
	if !ok {
		return "", store.ErrNotFound
	}
	return v, nil
}

func (s *settingsOnly) PutSettingIfAbsent(_ context.Context, key, value string) (string, error) {
	s.puts++
	if v, ok := s.values[key]; ok {
		return v, nil
	}
	s.values[key] = value
	return value, nil
}

func (s *settingsOnly) PutSetting(_ context.Context, key, value string) error {
	s.puts++
	s.values[key] = value
	return nil
}

func TestLoadOrCreateSigner(t *testing.T) {
	ctx := context.Background()
	v := testVault(t, 1)
	q := &settingsOnly{values: map[string]string{}}
	a, err := LoadOrCreateSigner(ctx, q, v, testIssuer, testAudience, testTTL)
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadOrCreateSigner(ctx, q, v, testIssuer, testAudience, testTTL)
	if err != nil {
		t.Fatal(err)
	}
	if a.KeyID() != b.KeyID() || q.puts != 1 {
		t.Fatalf("second load made a new key (puts=%d)", q.puts)
	}
	now := time.Now()
	tok, _, err := a.Issue(&Principal{UserID: "u", TenantID: "t", Method: MethodOIDC}, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Verify(tok, now); err != nil {
		t.Fatalf("replica cannot verify: %v", err)
	}

	// A racing replica's key wins: PutSettingIfAbsent returns the stored one.
	race := &racingSettings{settingsOnly: settingsOnly{values: map[string]string{}}, winner: q.values[SettingTokenSigningKey]}
	c, err := LoadOrCreateSigner(ctx, race, v, testIssuer, testAudience, testTTL)
	if err != nil {
		t.Fatal(err)
	}
	if c.KeyID() != a.KeyID() {
		t.Fatal("lost the race but kept its own key")
	}

	bad := &settingsOnly{values: map[string]string{SettingTokenSigningKey: "bm90IGEgc2VlZA=="}}
	if _, err := LoadOrCreateSigner(ctx, bad, v, testIssuer, testAudience, testTTL); err == nil {
		t.Fatal("accepted a corrupt stored key")
	}
	if bad.puts != 0 {
		t.Fatal("replaced a corrupt stored key")
	}
	if _, err := LoadOrCreateSigner(ctx, q, v, "", testAudience, testTTL); err == nil {
		t.Fatal("accepted an empty issuer")
	}
	if _, err := LoadOrCreateSigner(ctx, q, nil, testIssuer, testAudience, testTTL); err == nil {
		t.Fatal("loaded the signing keys without a vault")
	}
}

// racingSettings behaves as if another replica stored winner between our
// GetSetting and PutSettingIfAbsent.
type racingSettings struct {
	settingsOnly
	winner string
}

func (r *racingSettings) PutSettingIfAbsent(_ context.Context, key, _ string) (string, error) {
	r.values[key] = r.winner
	return r.winner, nil
}
