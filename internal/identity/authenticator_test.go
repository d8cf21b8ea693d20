package identity

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlite"
)

// testClock is a settable clock for the authenticator.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fixture is a tenant with two groups and a member who leads one of them.
type fixture struct {
	st     store.Store
	clock  *testClock
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
	f := &fixture{st: st, clock: &testClock{t: testNow}, signer: testSigner(t, 1, testIssuer, testAudience)}
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
	f.clock.Advance(30 * time.Second)
	if _, err := a.Authenticate(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if got := lastUsed(); !got.Equal(testNow) {
		t.Fatalf("last used rewritten within a minute: %v", got)
	}
	f.clock.Advance(31 * time.Second)
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
		{"token of an unknown issuer", signRaw(t, jwt.SigningMethodEdDSA, jwt.MapClaims{"iss": "https://other.test", "sub": f.alice.ID}, "k", f.signer.priv), reasonUnknown},
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
	f.clock.Advance(time.Hour)
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
	f.clock.Advance(time.Minute)
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
	f.clock.Advance(testTTL)
	_, err = a.Authenticate(ctx, tok)
	wantUnauthenticated(t, err, reasonAccessExpired)

	// A token naming a user of another tenant finds no one.
	other := &model.Tenant{ID: model.NewID(), Name: "other", CreatedAt: testNow}
	must(t, f.st.CreateTenant(ctx, other))
	forged, _, err := f.signer.Issue(&Principal{UserID: f.alice.ID, TenantID: other.ID}, f.clock.Now())
	must(t, err)
	_, err = a.Authenticate(ctx, forged)
	wantUnauthenticated(t, err, reasonUserUnknown)
}

// ssoFixture adds an identity provider and the tenant's SSO groups.
type ssoFixture struct {
	*fixture
	idp                   *fakeIdP
	a                     *Authenticator
	research, vision, ops *model.Group
}

func newSSOFixture(t *testing.T) *ssoFixture {
	f := newFixture(t)
	idp := newFakeIdP(t)
	s := &ssoFixture{fixture: f, idp: idp, a: f.auth(idp.verifier(t))}
	s.research = f.group(t, "ml-research")
	s.vision = f.group(t, "vision")
	s.ops = f.group(t, "ops")
	return s
}

// login signs in with an identity token naming groups, at the clock's time.
func (s *ssoFixture) login(t *testing.T, groups ...string) (*Principal, error) {
	t.Helper()
	now := s.clock.Now()
	tok := signRaw(t, jwt.SigningMethodRS256, idpClaims(func(c jwt.MapClaims) {
		c["groups"] = groups
		c["iat"], c["nbf"], c["exp"] = now.Unix(), now.Unix(), now.Add(5*time.Minute).Unix()
	}), "rsa1", idpRSA)
	return s.a.Authenticate(context.Background(), tok)
}

func (s *ssoFixture) audit(t *testing.T, userID string) []string {
	t.Helper()
	entries, err := s.st.ListAudit(context.Background(), s.tenant.ID, store.AuditFilter{ObjectID: userID}, store.Page{})
	must(t, err)
	var out []string
	for _, e := range entries {
		if e.Channel != "sso" || e.ObjectKind != "user" || e.ActorID != userID {
			t.Errorf("audit entry %+v", e)
		}
		out = append(out, e.Action)
	}
	slices.Sort(out)
	return out
}

func TestAuthenticateOIDCProvisioning(t *testing.T) {
	s := newSSOFixture(t)
	ctx := context.Background()
	// A local admin whose name matches the IdP's username: it must not be
	// taken over by the SSO identity.
	local := s.user(t, "jane.doe", model.RoleTenantAdmin)
	must(t, s.st.PutMembership(ctx, &model.Membership{TenantID: s.tenant.ID, GroupID: s.ops.ID, UserID: local.ID, Role: model.GroupRoleLead, CreatedAt: testNow}))

	p, err := s.login(t, "ml-research", "vision", "does-not-exist")
	if err != nil {
		t.Fatal(err)
	}
	if p.UserID == local.ID || p.Role != model.RoleMember || p.Method != MethodOIDC || p.CredentialID != "idp-jti-1" {
		t.Fatalf("principal = %+v", p)
	}
	if p.UserName != "jane.doe-2" || p.DisplayName != "Jane Doe" || p.TenantID != s.tenant.ID {
		t.Fatalf("principal = %+v", p)
	}
	if got := grants(p); !slices.Equal(got, []string{"ml-research:member", "vision:member"}) {
		t.Fatalf("groups = %v", got)
	}
	u, err := s.st.GetUser(ctx, s.tenant.ID, p.UserID)
	must(t, err)
	if u.ExternalID != idpIssuer+"|f3a1-subject" || u.Email != "jane@example.com" || u.Role != model.RoleMember || u.Service {
		t.Fatalf("user = %+v", u)
	}
	if got := s.audit(t, p.UserID); !slices.Equal(got, []string{"user.groups_synced", "user.provisioned"}) {
		t.Fatalf("audit = %v", got)
	}

	// The local admin is untouched.
	l, err := s.st.GetUser(ctx, s.tenant.ID, local.ID)
	must(t, err)
	if l.ExternalID != "" || l.Role != model.RoleTenantAdmin {
		t.Fatalf("local user changed: %+v", l)
	}
	ms, err := s.st.ListMembershipsByUser(ctx, s.tenant.ID, local.ID)
	must(t, err)
	if len(ms) != 1 || ms[0].GroupID != s.ops.ID || ms[0].Role != model.GroupRoleLead {
		t.Fatalf("local memberships changed: %+v", ms)
	}

	// Signing in again finds the same user.
	s.clock.Advance(time.Minute)
	p2, err := s.login(t, "ml-research", "vision")
	must(t, err)
	if p2.UserID != p.UserID {
		t.Fatal("second sign-in made another user")
	}
	if got := s.audit(t, p.UserID); len(got) != 2 {
		t.Fatalf("unchanged sign-in wrote audit entries: %v", got)
	}
}

func TestAuthenticateOIDCGroupSync(t *testing.T) {
	s := newSSOFixture(t)
	ctx := context.Background()
	p, err := s.login(t, "ml-research", "vision")
	must(t, err)

	// An admin makes the user lead of vision; the IdP then moves them from
	// ml-research to ops.
	must(t, s.st.PutMembership(ctx, &model.Membership{TenantID: s.tenant.ID, GroupID: s.vision.ID, UserID: p.UserID, Role: model.GroupRoleLead, CreatedAt: testNow}))
	s.clock.Advance(time.Minute)
	p2, err := s.login(t, "vision", "ops")
	must(t, err)
	if got := grants(p2); !slices.Equal(got, []string{"ops:member", "vision:lead"}) {
		t.Fatalf("groups = %v", got)
	}
	if got := s.audit(t, p.UserID); !slices.Equal(got, []string{"user.groups_synced", "user.groups_synced", "user.provisioned"}) {
		t.Fatalf("audit = %v", got)
	}
	entries, err := s.st.ListAudit(ctx, s.tenant.ID, store.AuditFilter{ObjectID: p.UserID}, store.Page{Limit: 1})
	must(t, err)
	if len(entries) != 1 || !strings.Contains(entries[0].Detail, "joined ops") || !strings.Contains(entries[0].Detail, "left ml-research") {
		t.Fatalf("latest audit = %+v", entries)
	}

	// No groups at all: every membership goes.
	s.clock.Advance(time.Minute)
	p3, err := s.login(t)
	must(t, err)
	if len(p3.Groups) != 0 {
		t.Fatalf("groups = %v", grants(p3))
	}

	// A disabled SSO user cannot sign in, and nothing is synced.
	u, err := s.st.GetUser(ctx, s.tenant.ID, p.UserID)
	must(t, err)
	u.Disabled = true
	must(t, s.st.UpdateUser(ctx, u))
	s.clock.Advance(time.Minute)
	_, err = s.login(t, "vision")
	wantUnauthenticated(t, err, reasonUserDisabled)
	ms, err := s.st.ListMembershipsByUser(ctx, s.tenant.ID, p.UserID)
	must(t, err)
	if len(ms) != 0 {
		t.Fatal("disabled user's groups were synced")
	}
}

func TestSanitizeUserName(t *testing.T) {
	for in, want := range map[string]string{
		"Jane.Doe":               "jane.doe",
		"jane@example.com":       "jane",
		"Jöhn  Smith":            "j-hn-smith",
		"--weird__name--":        "weird__name",
		"":                       "user",
		"@@@":                    "user",
		"../../etc/passwd":       "etc-passwd",
		strings.Repeat("a", 100): strings.Repeat("a", 64),
	} {
		if got := sanitizeUserName(in); got != want {
			t.Errorf("sanitizeUserName(%q) = %q, want %q", in, got, want)
		}
	}
}
