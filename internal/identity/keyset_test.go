package identity

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/vault"
)

func testVault(t *testing.T, b byte) *vault.Vault {
	t.Helper()
	v, err := vault.New(bytes.Repeat([]byte{b}, vault.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// The signing key was stored in the clear in the settings table, so that
// whoever read the table (a backup, a database replica) could mint a
// platform admin's token. It is sealed by the vault key now.
func TestTheSigningKeyIsStoredSealed(t *testing.T) {
	ctx := context.Background()
	v := testVault(t, 1)
	q := &settingsOnly{values: map[string]string{}}
	s, err := LoadOrCreateSigner(ctx, q, v, testIssuer, testAudience, testTTL)
	if err != nil {
		t.Fatal(err)
	}
	stored := q.values[SettingTokenSigningKey]
	if !strings.HasPrefix(stored, sealedPrefix) {
		t.Fatalf("the stored setting %.20q… is not sealed", stored)
	}
	seed := s.keys[0].seed
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if strings.Contains(stored, enc.EncodeToString(seed)[:40]) {
			t.Fatal("the stored setting holds the seed in base64")
		}
	}
	if raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(stored, sealedPrefix)); err != nil || bytes.Contains(raw, seed) {
		t.Fatalf("the sealed key set holds the seed in the clear (%v)", err)
	}
	// Another vault key does not open it, and says what to change.
	_, err = LoadOrCreateSigner(ctx, q, testVault(t, 2), testIssuer, testAudience, testTTL)
	if err == nil || !strings.Contains(err.Error(), "KLIQUE_VAULT_KEY") {
		t.Fatalf("loading with another vault key: %v, want an error naming KLIQUE_VAULT_KEY", err)
	}
}

// A key an older version stored in the clear is sealed on start, and stays
// the key: tokens signed with it before the upgrade still verify.
func TestAKeyStoredInTheClearIsSealedOnStart(t *testing.T) {
	ctx := context.Background()
	seed := bytes.Repeat([]byte{5}, ed25519.SeedSize)
	q := &settingsOnly{values: map[string]string{SettingTokenSigningKey: base64.StdEncoding.EncodeToString(seed)}}
	old, err := NewSigner(seed, testIssuer, testAudience, testTTL)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, _, err := old.Issue(&Principal{UserID: "u", TenantID: "t", Method: MethodOIDC}, now)
	if err != nil {
		t.Fatal(err)
	}
	s, err := LoadOrCreateSigner(ctx, q, testVault(t, 1), testIssuer, testAudience, testTTL)
	if err != nil {
		t.Fatal(err)
	}
	if stored := q.values[SettingTokenSigningKey]; !strings.HasPrefix(stored, sealedPrefix) || strings.Contains(stored, base64.StdEncoding.EncodeToString(seed)) {
		t.Fatalf("the clear key was not sealed: %.20q…", stored)
	}
	if s.KeyID() != old.KeyID() {
		t.Fatalf("sealing changed the key: kid %s, was %s", s.KeyID(), old.KeyID())
	}
	if _, err := s.Verify(tok, now); err != nil {
		t.Fatalf("a token signed before sealing: %v", err)
	}
	// The next start opens the sealed set without writing again.
	puts := q.puts
	if _, err := LoadOrCreateSigner(ctx, q, testVault(t, 1), testIssuer, testAudience, testTTL); err != nil || q.puts != puts {
		t.Fatalf("second start: %v, %d writes", err, q.puts-puts)
	}
}

// Rotation makes a new key that signs from then on; tokens of the old key
// verify until they expire, on every replica; once no token of the old key
// can be alive, the key is dropped.
func TestRotatingTheSigningKey(t *testing.T) {
	ctx := context.Background()
	v := testVault(t, 1)
	q := &settingsOnly{values: map[string]string{}}
	t0 := time.Now()
	a, err := LoadOrCreateSigner(ctx, q, v, testIssuer, testAudience, testTTL)
	if err != nil {
		t.Fatal(err)
	}
	oldKid := a.KeyID()
	p := &Principal{UserID: "u", TenantID: "t", Method: MethodAPIKey, CredentialID: "k"}
	oldTok, _, err := a.Issue(p, t0)
	if err != nil {
		t.Fatal(err)
	}

	newKid, err := RotateSigningKey(ctx, q, v, testTTL, t0, false)
	if err != nil {
		t.Fatal(err)
	}
	if newKid == oldKid {
		t.Fatal("rotation kept the key")
	}
	// A replica started after the rotation signs with the new key and
	// verifies the old key's tokens.
	b, err := LoadOrCreateSigner(ctx, q, v, testIssuer, testAudience, testTTL)
	if err != nil {
		t.Fatal(err)
	}
	if b.KeyID() != newKid {
		t.Fatalf("a replica started after the rotation signs with %s, want %s", b.KeyID(), newKid)
	}
	if _, err := b.Verify(oldTok, t0.Add(time.Minute)); err != nil {
		t.Fatalf("the old key's token after the rotation: %v", err)
	}
	newTok, _, err := b.Issue(p, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if kid := headerKid(t, newTok); kid != newKid {
		t.Fatalf("a new token has kid %s, want %s", kid, newKid)
	}
	// A replica started before the rotation verifies the new key's tokens
	// (it reads the set when it meets an unknown kid) and signs with the
	// new key within keyReloadInterval.
	if _, err := a.Verify(newTok, t0.Add(time.Minute)); err != nil {
		t.Fatalf("a replica started before the rotation refuses the new key's token: %v", err)
	}
	later, _, err := a.Issue(p, t0.Add(keyReloadInterval+time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if kid := headerKid(t, later); kid != newKid {
		t.Fatalf("a replica started before the rotation still signs with %s", kid)
	}
	if n := len(jwksKids(t, b)); n != 2 {
		t.Fatalf("JWKS after the rotation has %d keys, want 2", n)
	}

	// Once every token of the old key has expired, the old key verifies
	// nothing and the next rotation drops it from the store.
	gone := t0.Add(keyRetention(testTTL) + time.Second)
	for _, k := range b.signingKeys(gone) {
		if k.id == oldKid {
			t.Fatal("the old key still verifies after every token it signed has expired")
		}
	}
	third, err := RotateSigningKey(ctx, q, v, testTTL, gone, false)
	if err != nil {
		t.Fatal(err)
	}
	set, _, err := openKeySet(v, q.values[SettingTokenSigningKey], gone)
	if err != nil {
		t.Fatal(err)
	}
	var kids []string
	for _, k := range set {
		kids = append(kids, k.id)
	}
	if len(kids) != 2 || kids[0] != newKid || kids[1] != third {
		t.Fatalf("stored keys after the second rotation = %v, want [%s %s] (the first key pruned)", kids, newKid, third)
	}

	// A rotation that drops the older keys (one leaked) ends their tokens
	// on every replica within keyReloadInterval.
	at := gone.Add(time.Minute)
	tok, _, err := b.Issue(p, at)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := RotateSigningKey(ctx, q, v, testTTL, at, true); err != nil {
		t.Fatal(err)
	}
	_, err = b.Verify(tok, at.Add(keyReloadInterval+time.Second))
	wantUnauthenticated(t, err, reasonKeyUnknown)
}

func headerKid(t *testing.T, tok string) string {
	t.Helper()
	h, err := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[0])
	if err != nil {
		t.Fatal(err)
	}
	var hd struct {
		Kid string `json:"kid"`
	}
	if err := json.Unmarshal(h, &hd); err != nil {
		t.Fatal(err)
	}
	return hd.Kid
}

func jwksKids(t *testing.T, s *Signer) []string {
	t.Helper()
	keys, err := parseJWKS(s.JWKS())
	if err != nil {
		t.Fatal(err)
	}
	var kids []string
	for kid := range keys {
		kids = append(kids, kid)
	}
	return kids
}
