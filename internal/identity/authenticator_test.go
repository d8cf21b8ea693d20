package identity

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlite"
	"github.com/klique-ai/klique/internal/testclock"
)

// fixture is a tenant with two groups and a member who leads one of them.
type fixture struct {
	st     store.Store
	clock  *testclock.Clock
	signer *Signer
	tenant *model.Tenant
	alice  *model.User
	alpha  *model.Group
	beta   *model.Group
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "klique.db"))
	if err != nil {
		t.Fatal(err)
	}
	var st store.Store = db
	t.Cleanup(func() { _ = st.Close() })
	f := &fixture{st: st, clock: testclock.New(testNow), signer: testSigner(t, 1, testIssuer, testAudience)}
	f.tenant = &model.Tenant{ID: model.NewID(), Name: "default", DisplayName: "Default", CreatedAt: testNow}
	must(t, st.CreateTenant(ctx, f.tenant))
	f.alice = f.user(t, "alice", model.RoleMember)
	f.alpha = f.group(t, "alpha")
	f.beta = f.group(t, "beta")
	must(t, st.PutMembership(ctx, &model.Membership{TenantID: f.tenant.ID, GroupID: f.beta.ID, UserID: f.alice.ID, Role: model.GroupRoleMember, CreatedAt: testNow}))
	must(t, st.PutMembership(ctx, &model.Membership{TenantID: f.tenant.ID, GroupID: f.alpha.ID, UserID: f.alice.ID, Role: model.GroupRoleLead, CreatedAt: testNow}))
	return f
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) user(t *testing.T, name string, role model.Role) *model.User {
	t.Helper()
	u := &model.User{ID: model.NewID(), TenantID: f.tenant.ID, Name: name, DisplayName: strings.ToUpper(name[:1]) + name[1:], Role: role, CreatedAt: testNow, UpdatedAt: testNow}
	must(t, f.st.CreateUser(context.Background(), u))
	return u
}

func (f *fixture) group(t *testing.T, name string) *model.Group {
	t.Helper()
	g := &model.Group{ID: model.NewID(), TenantID: f.tenant.ID, Name: name, CreatedAt: testNow, UpdatedAt: testNow}
	must(t, f.st.CreateGroup(context.Background(), g))
	return g
}

// key creates an API key for u and returns its secret and record.
func (f *fixture) key(t *testing.T, u *model.User, mod func(*model.APIKey)) (string, *model.APIKey) {
	t.Helper()
	secret, prefix, hash, err := NewAPIKey()
	must(t, err)
	k := &model.APIKey{ID: model.NewID(), TenantID: u.TenantID, UserID: u.ID, Name: "test", Prefix: prefix, Hash: hash, CreatedAt: testNow}
	if mod != nil {
		mod(k)
	}
	must(t, f.st.CreateAPIKey(context.Background(), k))
	return secret, k
}

func (f *fixture) auth(oidc *OIDCVerifier) *Authenticator {
	return NewAuthenticator(f.st, f.signer, oidc, f.clock.Now)
}

func grants(p *Principal) []string {
	var out []string
	for _, g := range p.Groups {
		out = append(out, g.GroupName+":"+string(g.Role))
	}
	return out
}

func TestAuthenticateAPIKey(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a := f.auth(nil)
	secret, key := f.key(t, f.alice, nil)

	p, err := a.Authenticate(ctx, secret)
	if err != nil {
		t.Fatal(err)
	}
	if p.UserID != f.alice.ID || p.UserName != "alice" || p.DisplayName != "Alice" || p.TenantID != f.tenant.ID || p.TenantName != "default" ||
		p.Role != model.RoleMember || p.Method != MethodAPIKey || p.CredentialID != key.ID || p.ProjectID != "" || p.Service {
		t.Fatalf("principal = %+v", p)
	}
	if got := grants(p); !slices.Equal(got, []string{"alpha:lead", "beta:member"}) {
		t.Fatalf("groups = %v", got)
	}
	if !p.LeadOf(f.alpha.ID) || p.LeadOf(f.beta.ID) || !p.InGroup(f.beta.ID) {
		t.Fatal("group roles wrong")
	}

	// Last-used is written on first use, then at most once a minute.
	lastUsed := func() time.Time {
		k, err := f.st.GetAPIKey(ctx, f.tenant.ID, key.ID)
		must(t, err)
		if k.LastUsedAt == nil {
			return time.Time{}
		}
		return k.LastUsedAt.UTC()
	}
	if got := lastUsed(); !got.Equal(testNow) {
		t.Fatalf("last used = %v, want %v", got, testNow)
	}
	f.clock.Add(30 * time.Second)
	if _, err := a.Authenticate(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if got := lastUsed(); !got.Equal(testNow) {
		t.Fatalf("last used rewritten within a minute: %v", got)
	}
	f.clock.Add(31 * time.Second)
	if _, err := a.Authenticate(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if got := lastUsed(); !got.Equal(testNow.Add(61 * time.Second)) {
		t.Fatalf("last used = %v, want %v", got, testNow.Add(61*time.Second))
	}
}

func TestAuthenticateAPIKeyRefused(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a := f.auth(nil)

	revoked, rk := f.key(t, f.alice, nil)
	must(t, f.st.RevokeAPIKey(ctx, f.tenant.ID, rk.ID, testNow.Add(-time.Minute)))
	expired, _ := f.key(t, f.alice, func(k *model.APIKey) { e := testNow.Add(-time.Second); k.ExpiresAt = &e })
	bob := f.user(t, "bob", model.RoleTenantAdmin)
	bobKey, _ := f.key(t, bob, nil)
	bob.Disabled = true
	must(t, f.st.UpdateUser(ctx, bob))
	valid, _ := f.key(t, f.alice, nil)

	for _, tc := range []struct {
		name, credential, reason string
	}{
		{"revoked key", revoked, reasonKeyRevoked},
		{"expired key", expired, reasonKeyExpired},
		{"disabled user", bobKey, reasonUserDisabled},
		{"unknown key", "kq_" + strings.Repeat("x", 43), reasonUnknown},
		{"one character changed", valid[:len(valid)-1] + flip(valid[len(valid)-1]), reasonUnknown},
		{"not a key at all", "hunter2", reasonUnknown},
		{"empty", "   ", reasonMissing},
		{"too long", "kq_" + strings.Repeat("x", maxCredentialLen), reasonTooLong},
		{"token of an unknown issuer", signRaw(t, jwt.SigningMethodEdDSA, jwt.MapClaims{"iss": "https://other.test", "sub": f.alice.ID}, "k", f.signer.keys[0].priv), reasonUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := a.Authenticate(ctx, tc.credential)
			if p != nil {
				t.Fatal("principal returned with an error")
			}
			wantUnauthenticated(t, err, tc.reason)
			if strings.Contains(err.Error(), strings.TrimSpace(tc.credential)) && strings.TrimSpace(tc.credential) != "" {
				t.Fatal("error echoes the credential")
			}
		})
	}
	// A key expiring later is fine until it expires.
	later, _ := f.key(t, f.alice, func(k *model.APIKey) { e := testNow.Add(time.Hour); k.ExpiresAt = &e })
	if _, err := a.Authenticate(ctx, later); err != nil {
		t.Fatal(err)
	}
	f.clock.Add(time.Hour)
	_, err := a.Authenticate(ctx, later)
	wantUnauthenticated(t, err, reasonKeyExpired)
}

func flip(c byte) string {
	if c == 'a' {
		return "b"
	}
	return "a"
}

func TestAuthenticateProjectScopedKey(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	proj := &model.Project{ID: model.NewID(), TenantID: f.tenant.ID, Name: "vision-2026", CreatedAt: testNow, UpdatedAt: testNow}
	must(t, f.st.CreateProject(ctx, proj))
	secret, _ := f.key(t, f.alice, func(k *model.APIKey) { k.ProjectID = proj.ID })
	a := f.auth(nil)

	p, err := a.Authenticate(ctx, secret)
	if err != nil {
		t.Fatal(err)
	}
	if p.ProjectID != proj.ID {
		t.Fatalf("project = %q, want %q", p.ProjectID, proj.ID)
	}
	// A token issued from the scoped key keeps the scope.
	tok, _, err := a.IssueToken(p)
	must(t, err)
	p2, err := a.Authenticate(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	if p2.ProjectID != proj.ID || p2.Method != MethodToken {
		t.Fatalf("token principal = %+v", p2)
	}

	// Once the project belongs to a group alice is not in, the token
	// issued from the scoped key identifies no one; the key itself still
	// does (the platform refuses what it tries, saying why).
	proj.GroupID = f.alpha.ID
	must(t, f.st.UpdateProject(ctx, proj))
	if _, err := a.Authenticate(ctx, tok); err != nil {
		t.Fatalf("alice leads alpha, the project's group: %v", err)
	}
	must(t, f.st.DeleteMembership(ctx, f.tenant.ID, f.alpha.ID, f.alice.ID))
	if _, err := a.Authenticate(ctx, secret); err != nil {
		t.Fatalf("the scoped key: %v", err)
	}
	_, err = a.Authenticate(ctx, tok)
	wantUnauthenticated(t, err, reasonScopeLost)
}

// A token ends with the API key it was issued from: revoked, expired or
// gone, the key takes its tokens with it at once. Before, a token passed
// until its own expiry, an hour after the key was revoked.
func TestAnAccessTokenEndsWithItsKey(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a := f.auth(nil)
	issue := func(secret string) string {
		t.Helper()
		p, err := a.Authenticate(ctx, secret)
		must(t, err)
		tok, _, err := a.IssueToken(p)
		must(t, err)
		if _, err := a.Authenticate(ctx, tok); err != nil {
			t.Fatalf("a fresh token: %v", err)
		}
		return tok
	}

	secret, key := f.key(t, f.alice, nil)
	tok := issue(secret)
	must(t, f.st.RevokeAPIKey(ctx, f.tenant.ID, key.ID, f.clock.Now()))
	_, err := a.Authenticate(ctx, tok)
	wantUnauthenticated(t, err, reasonTokenKeyRevoked)

	soon, _ := f.key(t, f.alice, func(k *model.APIKey) { e := testNow.Add(10 * time.Minute); k.ExpiresAt = &e })
	tok = issue(soon)
	f.clock.Add(11 * time.Minute)
	_, err = a.Authenticate(ctx, tok)
	wantUnauthenticated(t, err, reasonTokenKeyExpired)

	// A token that names a key of another user (only a holder of the
	// signing key could make one) finds no key.
	_, bobKey := f.key(t, f.user(t, "bob", model.RoleMember), nil)
	forged, _, err := f.signer.Issue(&Principal{UserID: f.alice.ID, TenantID: f.tenant.ID, Method: MethodAPIKey, CredentialID: bobKey.ID}, f.clock.Now())
	must(t, err)
	_, err = a.Authenticate(ctx, forged)
	wantUnauthenticated(t, err, reasonTokenKeyGone)
	forged, _, err = f.signer.Issue(&Principal{UserID: f.alice.ID, TenantID: f.tenant.ID, Method: MethodAPIKey, CredentialID: "no-such-key"}, f.clock.Now())
	must(t, err)
	_, err = a.Authenticate(ctx, forged)
	wantUnauthenticated(t, err, reasonTokenKeyGone)
}

func TestAuthenticateAccessToken(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a := f.auth(nil)
	secret, _ := f.key(t, f.alice, nil)
	p, err := a.Authenticate(ctx, secret)
	must(t, err)

	tok, expires, err := a.IssueToken(p)
	must(t, err)
	if !expires.Equal(testNow.Add(testTTL)) {
		t.Fatalf("expires = %v", expires)
	}
	p2, err := a.Authenticate(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	if p2.UserID != f.alice.ID || p2.Method != MethodToken || p2.CredentialID == "" || p2.CredentialID == p.CredentialID {
		t.Fatalf("token principal = %+v", p2)
	}
	if got := grants(p2); !slices.Equal(got, []string{"alpha:lead", "beta:member"}) {
		t.Fatalf("groups = %v", got)
	}

	// A membership removed after the token was issued is gone at once.
	must(t, f.st.DeleteMembership(ctx, f.tenant.ID, f.beta.ID, f.alice.ID))
	f.clock.Add(time.Minute)
	p3, err := a.Authenticate(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	if got := grants(p3); !slices.Equal(got, []string{"alpha:lead"}) {
		t.Fatalf("groups after removal = %v", got)
	}

	// So is a role change, and disabling the user.
	f.alice.Role = model.RoleViewer
	must(t, f.st.UpdateUser(ctx, f.alice))
	p4, err := a.Authenticate(ctx, tok)
	must(t, err)
	if p4.CanWrite() {
		t.Fatal("role change not reflected")
	}
	f.alice.Disabled = true
	must(t, f.st.UpdateUser(ctx, f.alice))
	_, err = a.Authenticate(ctx, tok)
	wantUnauthenticated(t, err, reasonUserDisabled)
	f.alice.Disabled = false
	must(t, f.st.UpdateUser(ctx, f.alice))

	// And the token expires.
	f.clock.Add(testTTL)
	_, err = a.Authenticate(ctx, tok)
	wantUnauthenticated(t, err, reasonAccessExpired)

	// A token naming a user of another tenant finds no one.
	other := &model.Tenant{ID: model.NewID(), Name: "other", CreatedAt: testNow}
	must(t, f.st.CreateTenant(ctx, other))
	forged, _, err := f.signer.Issue(&Principal{UserID: f.alice.ID, TenantID: other.ID, Method: MethodOIDC}, f.clock.Now())
	must(t, err)
	_, err = a.Authenticate(ctx, forged)
	wantUnauthenticated(t, err, reasonUserUnknown)
}

// An identity token of the configured issuer needs a provisioner (the
// platform's access domain) to find or create its user; without one the
// sign-in fails as a configuration error, not as a bad credential.
func TestOIDCSignInNeedsAProvisioner(t *testing.T) {
	f := newFixture(t)
	idp := newFakeIdP(t)
	a := f.auth(idp.verifier(t))
	now := f.clock.Now()
	tok := signRaw(t, jwt.SigningMethodRS256, idpClaims(func(c jwt.MapClaims) {
		c["iat"], c["nbf"], c["exp"] = now.Unix(), now.Unix(), now.Add(5*time.Minute).Unix()
	}), "rsa1", idpRSA)
	_, err := a.Authenticate(context.Background(), tok)
	if err == nil || errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), "provisioner") {
		t.Fatalf("err = %v, want a configuration error naming the provisioner", err)
	}
}
