package server_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/klique-ai/klique/internal/config"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/server"
	"github.com/klique-ai/klique/internal/store/pgtest"
	"github.com/klique-ai/klique/internal/store/sqlite"
	"github.com/klique-ai/klique/internal/vault"
)

// testVaultKey is the vault key of the servers of these tests, so that a
// test can play one who holds both the database and the vault key.
var testVaultKey = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{3}, vault.KeySize))

// storedSigningKeys reads the token signing key setting as the store
// holds it, and opens it with the vault key: the keys' ids and seeds,
// oldest first.
func storedSigningKeys(t *testing.T, ts *testServer) (raw string, kids []string, seeds [][]byte) {
	t.Helper()
	raw, err := ts.app.Store.GetSetting(context.Background(), identity.SettingTokenSigningKey)
	if err != nil {
		t.Fatalf("read the signing key setting: %v", err)
	}
	sealed, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(raw, "sealed:v1:"))
	if err != nil || !strings.HasPrefix(raw, "sealed:v1:") {
		t.Fatalf("the signing key setting %.16q… is not a sealed key set (%v)", raw, err)
	}
	key, _ := vault.ParseKey(testVaultKey)
	v, _ := vault.New(key)
	plain, err := v.Open(sealed, "klique/setting/"+identity.SettingTokenSigningKey)
	if err != nil {
		t.Fatalf("open the sealed key set with the vault key: %v", err)
	}
	var set struct {
		Keys []struct {
			Kid  string `json:"kid"`
			Seed []byte `json:"seed"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(plain, &set); err != nil {
		t.Fatal(err)
	}
	for _, k := range set.Keys {
		kids, seeds = append(kids, k.Kid), append(seeds, k.Seed)
	}
	return raw, kids, seeds
}

// adminToken signs, with seed and kid, an access token for the platform
// admin from its bootstrap key, issued at iat and expiring at exp.
func adminToken(t *testing.T, ts *testServer, kid string, seed []byte, iat, exp time.Time) string {
	t.Helper()
	d := ts.mustGQL(t, adminKey, `{ me { user { id } tenant { id } } apiKeys { edges { node { id } } } }`, nil)
	keys := nodes(d, "apiKeys")
	if len(keys) != 1 {
		t.Fatalf("the admin has %d keys, want the bootstrap key only", len(keys))
	}
	claims := identity.TokenClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: ts.cfg.PublicURL, Subject: str(d, "me", "user", "id"), Audience: jwt.ClaimStrings{"klique"},
			IssuedAt: jwt.NewNumericDate(iat), NotBefore: jwt.NewNumericDate(iat), ExpiresAt: jwt.NewNumericDate(exp), ID: "forged-1",
		},
		TenantID: str(d, "me", "tenant", "id"), Via: identity.MethodAPIKey, KeyID: str(keys[0], "id"),
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(ed25519.NewKeyFromSeed(seed))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The token signing key was kept in the clear in the settings table, and
// with it a token valid until 2200 was accepted as the platform admin's.
// The setting holds the key sealed by the vault key now, and no token
// that lives longer than KLIQUE_TOKEN_TTL is accepted, whoever signed it.
func TestTheTokenSigningKeyIsSealedAndLifetimesCapped(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, ts *testServer) {
		raw, kids, seeds := storedSigningKeys(t, ts)
		if len(seeds) != 1 || len(seeds[0]) != ed25519.SeedSize {
			t.Fatalf("the sealed set holds %d keys", len(seeds))
		}
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawURLEncoding} {
			if strings.Contains(raw, enc.EncodeToString(seeds[0])[:40]) {
				t.Fatal("the settings row holds the signing key in the clear")
			}
		}
		if b, err := base64.StdEncoding.DecodeString(raw); err == nil && len(b) == ed25519.SeedSize {
			t.Fatal("the settings row is a bare seed")
		}

		now := time.Now()
		// One who holds the key (and the vault key) signs a token as the
		// control plane would: accepted, so what follows is the cap.
		ts.mustGQL(t, adminToken(t, ts, kids[0], seeds[0], now, now.Add(30*time.Minute)), meQuery, nil)
		for name, exp := range map[string]time.Time{"until 2200": time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC), "for a day": now.Add(24 * time.Hour)} {
			res := ts.gql(t, gqlRequest{Credential: adminToken(t, ts, kids[0], seeds[0], now, exp), Query: meQuery})
			if res.Status != http.StatusUnauthorized || !strings.Contains(res.message(), "lifetime") {
				t.Errorf("a token valid %s: %d %s, want 401 saying its lifetime is too long", name, res.Status, res.Raw)
			}
		}
		res := ts.gql(t, gqlRequest{Credential: adminToken(t, ts, kids[0], seeds[0], now.Add(10*time.Minute), now.Add(20*time.Minute)), Query: meQuery})
		if res.Status != http.StatusUnauthorized {
			t.Errorf("a token issued in the future: %d %s, want 401", res.Status, res.Raw)
		}
	}
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		run(t, startServer(t, withVaultKey(testVaultKey)))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		run(t, startServer(t, withDatabaseURL(pgtest.RequirePostgresURL(t)), withVaultKey(testVaultKey)))
	})
}

// A store of an older version holds the signing key in the clear; the
// first start seals it and keeps it, so tokens issued before the upgrade
// still verify.
func TestAClearSigningKeyIsSealedOnStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	cfg := &config.Config{DataDir: dir}
	st, err := sqlite.Open(ctx, cfg.SQLitePath())
	if err != nil {
		t.Fatal(err)
	}
	seed := bytes.Repeat([]byte{8}, ed25519.SeedSize)
	if err := st.PutSetting(ctx, identity.SettingTokenSigningKey, base64.StdEncoding.EncodeToString(seed)); err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	old, err := identity.NewSigner(seed, "x", "y", time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	ts := startServer(t, withVaultKey(testVaultKey), func(c *config.Config) { c.DataDir = dir })
	_, kids, seeds := storedSigningKeys(t, ts)
	if len(kids) != 1 || kids[0] != old.KeyID() || !bytes.Equal(seeds[0], seed) {
		t.Fatalf("the sealed set holds %v, want the key that was stored in the clear (%s)", kids, old.KeyID())
	}
	now := time.Now()
	ts.mustGQL(t, adminToken(t, ts, old.KeyID(), seed, now, now.Add(time.Hour)), meQuery, nil)
}

// `klique rotate-signing-key` makes a new key in the server's store: the
// running server accepts tokens of the new key at once and keeps
// accepting those of the old one.
func TestRotatingTheSigningKeyUnderARunningServer(t *testing.T) {
	t.Parallel()
	ts := startServer(t, withVaultKey(testVaultKey))
	resp, body := ts.exchangeToken(t, "Bearer "+adminKey)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("token exchange: %d %s", resp.StatusCode, body)
	}
	var tr struct {
		AccessToken string `json:"access_token"`
	}
	_ = json.Unmarshal([]byte(body), &tr)
	_, oldKids, _ := storedSigningKeys(t, ts)

	kid, err := server.RotateSigningKey(context.Background(), ts.cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), false)
	if err != nil {
		t.Fatal(err)
	}
	_, kids, seeds := storedSigningKeys(t, ts)
	if len(kids) != 2 || kids[0] != oldKids[0] || kids[1] != kid {
		t.Fatalf("stored keys after the rotation = %v, want [%s %s]", kids, oldKids[0], kid)
	}
	ts.mustGQL(t, tr.AccessToken, meQuery, nil)
	now := time.Now()
	ts.mustGQL(t, adminToken(t, ts, kid, seeds[1], now, now.Add(time.Hour)), meQuery, nil)

	// Without the server's vault key the rotation is refused and says why.
	other := *ts.cfg
	other.VaultKey = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{4}, vault.KeySize))
	if _, err := server.RotateSigningKey(context.Background(), &other, slog.New(slog.NewTextHandler(io.Discard, nil)), false); err == nil || !strings.Contains(err.Error(), "KLIQUE_VAULT_KEY") {
		t.Fatalf("rotating with another vault key: %v, want an error naming KLIQUE_VAULT_KEY", err)
	}
}
