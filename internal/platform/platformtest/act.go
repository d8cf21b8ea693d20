package platformtest

import (
	"context"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
)

// SignIn authenticates an API key secret the way the HTTP layer does and
// returns a context carrying the principal, on the CLI channel. The
// channel is set-up, not the one under test: a test of a channel's own
// rules sets its channel on the context itself.
func (b *Bundle) SignIn(t testing.TB, secret string) context.Context {
	t.Helper()
	p, err := b.Auth.Authenticate(context.Background(), secret)
	if err != nil {
		t.Fatalf("platformtest: authenticate: %v", err)
	}
	return identity.WithChannel(identity.WithPrincipal(context.Background(), p), identity.ChannelCLI)
}

// CreateUser creates a user with role, as the admin, in the given groups:
// "ml-research" makes them a member of it, "lead:ml-research" its lead.
func (b *Bundle) CreateUser(t testing.TB, name string, role model.Role, groups ...string) *model.User {
	t.Helper()
	in := platform.UserInput{Name: &name, Role: &role}
	for _, g := range groups {
		gr := model.GroupRoleMember
		if rest, ok := strings.CutPrefix(g, "lead:"); ok {
			g, gr = rest, model.GroupRoleLead
		}
		in.Groups = append(in.Groups, platform.GroupGrantInput{Group: g, Role: gr})
	}
	u, err := b.Svc.CreateUser(b.Admin, in)
	if err != nil {
		t.Fatalf("platformtest: create user %s: %v", name, err)
	}
	return u
}

// User creates a user as CreateUser does and returns a context acting as
// them through an API key of their own: the usual way for a test to get a
// second actor.
func (b *Bundle) User(t testing.TB, name string, role model.Role, groups ...string) context.Context {
	t.Helper()
	b.CreateUser(t, name, role, groups...)
	return b.Key(t, name, "")
}

// CreateKey creates an API key for an existing user, scoped to project
// when it is set, and returns its secret, for tests that present it
// themselves (an HTTP or MCP client).
func (b *Bundle) CreateKey(t testing.TB, user, project string) string {
	t.Helper()
	_, secret, err := b.Svc.CreateAPIKey(b.Admin, platform.APIKeyInput{Name: "test key", User: user, Project: project})
	if err != nil {
		t.Fatalf("platformtest: create API key for %s: %v", user, err)
	}
	return secret
}

// Key creates an API key as CreateKey does and returns a context acting
// through it.
func (b *Bundle) Key(t testing.TB, user, project string) context.Context {
	t.Helper()
	return b.SignIn(t, b.CreateKey(t, user, project))
}

// Apply applies an estate document as the admin.
func (b *Bundle) Apply(t testing.TB, doc []byte) *platform.EstateResult {
	t.Helper()
	res, err := b.Svc.ApplyEstate(b.Admin, doc, false)
	if err != nil {
		t.Fatalf("platformtest: apply estate: %v (code %s)", err, platform.ErrorCode(err))
	}
	return res
}

// ApplyExample applies examples/estate.yaml as the admin: the estate most
// tests act in (groups ml-research and vision, their compute resources and
// projects).
func (b *Bundle) ApplyExample(t testing.TB) *platform.EstateResult {
	t.Helper()
	return b.Apply(t, ExampleEstate(t))
}

// AuditLog is the tenant's whole audit trail, newest first, as the admin
// reads it.
func (b *Bundle) AuditLog(t testing.TB) []*model.AuditEntry {
	t.Helper()
	es, err := b.Svc.AuditLog(b.Admin, platform.AuditFilter{}, platform.Page{})
	if err != nil {
		t.Fatalf("platformtest: audit log: %v", err)
	}
	return es
}
