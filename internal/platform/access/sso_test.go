package access

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlite"
)

const (
	idpIssuer   = "https://idp.example.com/realms/lab"
	idpAudience = "klique-client"
)

var t0 = time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)

// ssoWorld is a tenant with three groups, an identity provider that signs
// identity tokens, and the authenticator with the access domain as its
// provisioner.
type ssoWorld struct {
	st                    store.Store
	bus                   *events.Bus
	auth                  *identity.Authenticator
	key                   *rsa.PrivateKey
	tenant                *model.Tenant
	research, vision, ops *model.Group

	mu  sync.Mutex
	now time.Time
}

func (w *ssoWorld) clock() time.Time { w.mu.Lock(); defer w.mu.Unlock(); return w.now }
func (w *ssoWorld) advance(d time.Duration) {
	w.mu.Lock()
	w.now = w.now.Add(d)
	w.mu.Unlock()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func newSSOWorld(t *testing.T) *ssoWorld {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "k.db"))
	must(t, err)
	t.Cleanup(func() { _ = st.Close() })
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	must(t, err)
	b64 := base64.RawURLEncoding.EncodeToString
	jwks := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(map[string]any{"keys": []map[string]string{{"kty": "RSA", "kid": "rsa1", "use": "sig",
			"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes())}}})
	}))
	t.Cleanup(jwks.Close)
	v, err := identity.NewOIDCVerifier(identity.OIDCConfig{Issuer: idpIssuer, JWKSURL: jwks.URL + "/certs", Audience: idpAudience, Tenant: "default"}, jwks.Client())
	must(t, err)
	w := &ssoWorld{st: st, bus: events.NewBus(), key: key, now: t0}
	w.auth = identity.NewAuthenticator(st, nil, v, w.clock)
	k := kernel.New(kernel.Options{Store: st, Events: w.bus, Now: w.clock})
	New(k, w.auth)
	w.tenant = &model.Tenant{ID: model.NewID(), Name: "default", CreatedAt: t0}
	must(t, st.CreateTenant(ctx, w.tenant))
	group := func(name string) *model.Group {
		g := &model.Group{ID: model.NewID(), TenantID: w.tenant.ID, Name: name, CreatedAt: t0, UpdatedAt: t0}
		must(t, st.CreateGroup(ctx, g))
		return g
	}
	w.research, w.vision, w.ops = group("ml-research"), group("vision"), group("ops")
	return w
}

// login signs in with an identity token naming groups, at the clock's time.
func (w *ssoWorld) login(t *testing.T, groups ...string) (*identity.Principal, error) {
	t.Helper()
	now := w.clock()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{
		"iss": idpIssuer, "aud": []string{idpAudience}, "sub": "f3a1-subject", "preferred_username": "Jane.Doe",
		"email": "jane@example.com", "name": "Jane Doe", "groups": groups, "jti": "idp-jti-1",
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(),
	})
	tok.Header["kid"] = "rsa1"
	signed, err := tok.SignedString(w.key)
	must(t, err)
	return w.auth.Authenticate(context.Background(), signed)
}

// audit lists the actions of the user's audit entries, sorted; each must
// be on the sso channel with the user as actor.
func (w *ssoWorld) audit(t *testing.T, userID string) []string {
	t.Helper()
	entries, err := w.st.ListAudit(context.Background(), w.tenant.ID, store.AuditFilter{ObjectID: userID}, store.Page{})
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

func grants(p *identity.Principal) []string {
	var out []string
	for _, g := range p.Groups {
		out = append(out, g.GroupName+":"+string(g.Role))
	}
	return out
}

// kinds drains the events published so far.
func kinds(sub *events.Subscription) []string {
	var out []string
	for {
		select {
		case e := <-sub.C:
			out = append(out, e.Kind)
		default:
			return out
		}
	}
}

// TestAuthenticateOIDCProvisioning: a first SSO sign-in creates a new user
// (never the local one of the same name), writes its audit entries and
// tells the bus; a second sign-in finds the same user and writes nothing.
func TestAuthenticateOIDCProvisioning(t *testing.T) {
	w := newSSOWorld(t)
	ctx := context.Background()
	sub := w.bus.Subscribe(64, func(events.Event) bool { return true })
	defer sub.Close()
	// A local admin whose name matches the IdP's username: it must not be
	// taken over by the SSO identity.
	local := &model.User{ID: model.NewID(), TenantID: w.tenant.ID, Name: "jane.doe", Role: model.RoleTenantAdmin, CreatedAt: t0, UpdatedAt: t0}
	must(t, w.st.CreateUser(ctx, local))
	must(t, w.st.PutMembership(ctx, &model.Membership{TenantID: w.tenant.ID, GroupID: w.ops.ID, UserID: local.ID, Role: model.GroupRoleLead, CreatedAt: t0}))

	p, err := w.login(t, "ml-research", "vision", "does-not-exist")
	must(t, err)
	if p.UserID == local.ID || p.Role != model.RoleMember || p.Method != identity.MethodOIDC || p.CredentialID != "idp-jti-1" {
		t.Fatalf("principal = %+v", p)
	}
	if p.UserName != "jane.doe-2" || p.DisplayName != "Jane Doe" || p.TenantID != w.tenant.ID {
		t.Fatalf("principal = %+v", p)
	}
	if got := grants(p); !slices.Equal(got, []string{"ml-research:member", "vision:member"}) {
		t.Fatalf("groups = %v", got)
	}
	u, err := w.st.GetUser(ctx, w.tenant.ID, p.UserID)
	must(t, err)
	if u.ExternalID != idpIssuer+"|f3a1-subject" || u.Email != "jane@example.com" || u.Role != model.RoleMember || u.Service {
		t.Fatalf("user = %+v", u)
	}
	if got := w.audit(t, p.UserID); !slices.Equal(got, []string{"user.groups_synced", "user.provisioned"}) {
		t.Fatalf("audit = %v", got)
	}
	// Provisioning goes through the kernel like any change to identities:
	// its events reach the bus (live subscribers re-check on them).
	if got := kinds(sub); !slices.Equal(got, []string{"user.provisioned", "user.groups_synced"}) {
		t.Fatalf("events = %v", got)
	}

	// The local admin is untouched.
	l, err := w.st.GetUser(ctx, w.tenant.ID, local.ID)
	must(t, err)
	if l.ExternalID != "" || l.Role != model.RoleTenantAdmin {
		t.Fatalf("local user changed: %+v", l)
	}
	ms, err := w.st.ListMembershipsByUser(ctx, w.tenant.ID, local.ID)
	must(t, err)
	if len(ms) != 1 || ms[0].GroupID != w.ops.ID || ms[0].Role != model.GroupRoleLead {
		t.Fatalf("local memberships changed: %+v", ms)
	}

	// Signing in again finds the same user, and writes nothing.
	w.advance(time.Minute)
	p2, err := w.login(t, "ml-research", "vision")
	must(t, err)
	if p2.UserID != p.UserID {
		t.Fatal("second sign-in made another user")
	}
	if got := w.audit(t, p.UserID); len(got) != 2 {
		t.Fatalf("unchanged sign-in wrote audit entries: %v", got)
	}
	if got := kinds(sub); len(got) != 0 {
		t.Fatalf("unchanged sign-in published %v", got)
	}
}

// TestAuthenticateOIDCGroupSync: every sign-in mirrors the groups claim
// into the user's memberships, keeping a lead a lead.
func TestAuthenticateOIDCGroupSync(t *testing.T) {
	w := newSSOWorld(t)
	ctx := context.Background()
	p, err := w.login(t, "ml-research", "vision")
	must(t, err)

	// An admin makes the user lead of vision; the IdP then moves them from
	// ml-research to ops.
	must(t, w.st.PutMembership(ctx, &model.Membership{TenantID: w.tenant.ID, GroupID: w.vision.ID, UserID: p.UserID, Role: model.GroupRoleLead, CreatedAt: t0}))
	w.advance(time.Minute)
	p2, err := w.login(t, "vision", "ops")
	must(t, err)
	if got := grants(p2); !slices.Equal(got, []string{"ops:member", "vision:lead"}) {
		t.Fatalf("groups = %v", got)
	}
	if got := w.audit(t, p.UserID); !slices.Equal(got, []string{"user.groups_synced", "user.groups_synced", "user.provisioned"}) {
		t.Fatalf("audit = %v", got)
	}
	entries, err := w.st.ListAudit(ctx, w.tenant.ID, store.AuditFilter{ObjectID: p.UserID}, store.Page{Limit: 1})
	must(t, err)
	if len(entries) != 1 || !strings.Contains(entries[0].Detail, "joined ops") || !strings.Contains(entries[0].Detail, "left ml-research") {
		t.Fatalf("latest audit = %+v", entries)
	}

	// No groups at all: every membership goes.
	w.advance(time.Minute)
	p3, err := w.login(t)
	must(t, err)
	if len(p3.Groups) != 0 {
		t.Fatalf("groups = %v", grants(p3))
	}

	// A disabled SSO user cannot sign in, and nothing is synced.
	u, err := w.st.GetUser(ctx, w.tenant.ID, p.UserID)
	must(t, err)
	u.Disabled = true
	must(t, w.st.UpdateUser(ctx, u))
	w.advance(time.Minute)
	if _, err = w.login(t, "vision"); !errors.Is(err, identity.ErrUnauthenticated) {
		t.Fatalf("disabled user signed in: %v", err)
	}
	ms, err := w.st.ListMembershipsByUser(ctx, w.tenant.ID, p.UserID)
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
