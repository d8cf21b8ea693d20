package access

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// Me is the caller as the platform sees them.
type Me struct {
	User        *model.User
	Tenant      *model.Tenant
	Memberships []*model.Membership
	// ProjectID is the project the caller's credential is scoped to, if any.
	ProjectID string
}

// Me returns the caller's user, tenant and groups.
func (s *Access) Me(ctx context.Context) (*Me, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	u, err := s.k.Store.GetUser(ctx, p.TenantID, p.UserID)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	t, err := s.k.Store.GetTenant(ctx, p.TenantID)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	ms, err := s.k.Store.ListMembershipsByUser(ctx, p.TenantID, p.UserID)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	return &Me{User: u, Tenant: t, Memberships: ms, ProjectID: p.ProjectID}, nil
}

// Tenant returns the caller's tenant. No operation returns another tenant to
// anyone but a platform admin.
func (s *Access) Tenant(ctx context.Context, id string) (*model.Tenant, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if id != p.TenantID && p.Role != model.RolePlatformAdmin {
		return nil, kernel.NotFound("no tenant %s", kernel.Quote(id))
	}
	t, err := s.k.Store.GetTenant(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, kernel.NotFound("no tenant %s", kernel.Quote(id))
	}
	return t, s.k.Internal(ctx, err)
}

// Tenants lists every tenant, for platform admins.
func (s *Access) Tenants(ctx context.Context) ([]*model.Tenant, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := kernel.RequirePlatformAdmin(p, "list tenants"); err != nil {
		return nil, err
	}
	ts, err := s.k.Store.ListTenants(ctx)
	return ts, s.k.Internal(ctx, err)
}

// NewTenant is a tenant created with its first admin and that admin's key.
type NewTenant struct {
	Tenant *model.Tenant
	Admin  *model.User
	APIKey *model.APIKey
	// Secret is the admin's API key, shown once.
	Secret string
}

// CreateTenant creates a tenant with its first tenant admin and an API key
// for that admin. Only a platform admin may do this.
func (s *Access) CreateTenant(ctx context.Context, name, displayName, adminName string) (*NewTenant, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := kernel.RequirePlatformAdmin(p, "create tenants"); err != nil {
		return nil, err
	}
	name, adminName = strings.TrimSpace(name), strings.TrimSpace(adminName)
	if err := checkTenantName(name); err != nil {
		return nil, err
	}
	if adminName == "" {
		adminName = "admin"
	}
	if err := checkUserName(adminName); err != nil {
		return nil, err
	}
	var out *NewTenant
	err = s.k.Write(ctx, p, func(t *kernel.Txn) error {
		if _, err := t.Q.GetTenantByName(ctx, name); err == nil {
			return kernel.Conflict("a tenant named %s already exists", kernel.Quote(name))
		}
		nt, err := createTenant(t, name, displayName, adminName, model.RoleTenantAdmin, "")
		if err != nil {
			return err
		}
		out = nt
		t.Record("tenant.created", "tenant", nt.Tenant.ID, nt.Tenant.Name, "", "created tenant "+name+" with admin "+adminName)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func checkTenantName(name string) error {
	if err := estate.CheckName(name); err != nil {
		return kernel.Invalid("tenant %v", err)
	}
	return nil
}

// createTenant writes a tenant, its admin user and an API key for the admin.
// secret, when set, is the key to store (from KLIQUE_BOOTSTRAP_TOKEN).
func createTenant(t *kernel.Txn, name, displayName, adminName string, role model.Role, secret string) (*NewTenant, error) {
	tenant := &model.Tenant{ID: model.NewID(), Name: name, DisplayName: displayName, CreatedAt: t.Now}
	if err := t.Q.CreateTenant(t.Ctx, tenant); err != nil {
		return nil, fmt.Errorf("create tenant %s: %w", name, err)
	}
	admin := &model.User{ID: model.NewID(), TenantID: tenant.ID, Name: adminName, DisplayName: "Administrator",
		Role: role, CreatedAt: t.Now, UpdatedAt: t.Now}
	if err := t.Q.CreateUser(t.Ctx, admin); err != nil {
		return nil, fmt.Errorf("create admin of tenant %s: %w", name, err)
	}
	key, secret, err := newAPIKey(tenant.ID, admin.ID, "bootstrap", "", nil, secret, t.Now)
	if err != nil {
		return nil, err
	}
	if err := t.Q.CreateAPIKey(t.Ctx, key); err != nil {
		return nil, fmt.Errorf("create admin key of tenant %s: %w", name, err)
	}
	return &NewTenant{Tenant: tenant, Admin: admin, APIKey: key, Secret: secret}, nil
}

// newAPIKey makes a key record; given is an operator-chosen secret or "".
func newAPIKey(tenantID, userID, name, projectID string, expires *time.Time, given string, now time.Time) (*model.APIKey, string, error) {
	secret, prefix, hash := given, "", []byte(nil)
	if given == "" {
		var err error
		if secret, prefix, hash, err = identity.NewAPIKey(); err != nil {
			return nil, "", err
		}
	} else {
		prefix, hash = given[:min(10, len(given))], identity.HashAPIKey(given)
	}
	return &model.APIKey{ID: model.NewID(), TenantID: tenantID, UserID: userID, Name: name, Prefix: prefix, Hash: hash,
		ProjectID: projectID, CreatedAt: now, ExpiresAt: expires}, secret, nil
}

// Bootstrap prepares an empty store on first start: tenant "default", a
// platform admin named "admin" and an API key for it. It returns the key, or
// "" when the store already had a tenant. token, when set, is used as the key
// instead of a generated one.
func (s *Access) Bootstrap(ctx context.Context, token string) (string, error) {
	if token != "" {
		if err := identity.ValidateBootstrapKey(token); err != nil {
			return "", fmt.Errorf("KLIQUE_BOOTSTRAP_TOKEN: %w", err)
		}
	}
	tenants, err := s.k.Store.ListTenants(ctx)
	if err != nil {
		return "", fmt.Errorf("bootstrap: %w", err)
	}
	if len(tenants) > 0 {
		return "", nil
	}
	var secret string
	ctx = identity.WithChannel(ctx, identity.ChannelSystem)
	err = s.k.Write(ctx, nil, func(t *kernel.Txn) error {
		nt, err := createTenant(t, "default", "Default tenant", "admin", model.RolePlatformAdmin, token)
		if err != nil {
			return err
		}
		secret = nt.Secret
		t.P = &identity.Principal{TenantID: nt.Tenant.ID}
		t.Record("tenant.bootstrapped", "tenant", nt.Tenant.ID, nt.Tenant.Name, "", "first start: created tenant default, platform admin admin and its API key")
		return nil
	})
	if errors.Is(err, store.ErrConflict) {
		return "", nil // another replica bootstrapped first
	}
	return secret, err
}

// IssueToken exchanges the caller's credential for a short-lived access
// token (what `klique login` does).
func (s *Access) IssueToken(ctx context.Context) (string, time.Time, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return "", time.Time{}, err
	}
	if p.Method == identity.MethodToken {
		return "", time.Time{}, kernel.Forbidden("an access token cannot be exchanged for another one; sign in again with your API key or through SSO")
	}
	if s.auth == nil {
		return "", time.Time{}, errors.New("no authenticator configured")
	}
	tok, exp, err := s.auth.IssueToken(p)
	return tok, exp, s.k.Internal(ctx, err)
}

// UserInput creates or changes a user. Groups only on create: membership
// changes go through SetGroupMember.
type UserInput struct {
	Name        *string
	DisplayName *string
	Email       *string
	Role        *model.Role
	Service     *bool
	Disabled    *bool
	Groups      []GroupGrantInput
}

// GroupGrantInput puts a new user in a group.
type GroupGrantInput struct {
	Group string
	Role  model.GroupRole
}

func checkUserName(name string) error {
	if err := estate.CheckName(name); err != nil {
		return kernel.Invalid("user %v", err)
	}
	if strings.ContainsAny(name, " \t/\\@") {
		return kernel.Invalid("user name %q must not hold spaces, '/', '\\' or '@'", name)
	}
	return nil
}

// CreateUser adds a user (or a service user for automation) to the caller's
// tenant, optionally in groups.
func (s *Access) CreateUser(ctx context.Context, in UserInput) (*model.User, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := kernel.RequireAdmin(p, "create users"); err != nil {
		return nil, err
	}
	if in.Name == nil {
		return nil, kernel.Invalid("a user needs a name")
	}
	u := &model.User{ID: model.NewID(), TenantID: p.TenantID, Name: strings.TrimSpace(*in.Name), Role: model.RoleMember}
	if err := checkUserName(u.Name); err != nil {
		return nil, err
	}
	if err := applyUser(p, u, in); err != nil {
		return nil, err
	}
	err = s.k.Write(ctx, p, func(t *kernel.Txn) error {
		u.CreatedAt, u.UpdatedAt = t.Now, t.Now
		if _, err := t.Q.GetUserByName(ctx, p.TenantID, u.Name); err == nil {
			return kernel.Conflict("a user named %s already exists", kernel.Quote(u.Name))
		}
		if err := t.Q.CreateUser(ctx, u); err != nil {
			return err
		}
		t.Record("user.created", "user", u.ID, u.Name, "", fmt.Sprintf("created %s with role %s", u.Name, u.Role))
		for _, gi := range in.Groups {
			if err := s.putMember(t, gi.Group, u, gi.Role); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return u, nil
}

func applyUser(p *identity.Principal, u *model.User, in UserInput) error {
	kernel.SetString(&u.DisplayName, in.DisplayName)
	kernel.SetString(&u.Email, in.Email)
	if len(u.DisplayName) > estate.MaxNameLength || len(u.Email) > 254 {
		return kernel.Invalid("display name or email of %s is too long", u.Name)
	}
	if in.Role != nil {
		if !in.Role.Valid() {
			return kernel.Invalid("role %q is not known: use tenant_admin, member or viewer", *in.Role)
		}
		if *in.Role == model.RolePlatformAdmin && p.Role != model.RolePlatformAdmin {
			return kernel.Forbidden("only a platform admin can make another platform admin")
		}
		u.Role = *in.Role
	}
	if in.Service != nil {
		u.Service = *in.Service
	}
	if in.Disabled != nil {
		u.Disabled = *in.Disabled
	}
	return nil
}

// UpdateUser changes a user's name, contact, role or disabled flag. An admin
// cannot demote or disable themselves, so a tenant is never left without the
// admin who made the mistake.
func (s *Access) UpdateUser(ctx context.Context, ref string, in UserInput) (*model.User, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := kernel.RequireAdmin(p, "change users"); err != nil {
		return nil, err
	}
	var u *model.User
	err = s.k.Write(ctx, p, func(t *kernel.Txn) error {
		if u, err = kernel.FindUser(ctx, t.Q, p.TenantID, ref); err != nil {
			return err
		}
		if u.ID == p.UserID && ((in.Role != nil && *in.Role != u.Role) || (in.Disabled != nil && *in.Disabled)) {
			return kernel.Forbidden("you cannot change your own role or disable yourself; ask another admin")
		}
		if u.Role == model.RolePlatformAdmin && p.Role != model.RolePlatformAdmin {
			return kernel.Forbidden("only a platform admin can change a platform admin")
		}
		before := *u
		if in.Name != nil {
			name := strings.TrimSpace(*in.Name)
			if err := checkUserName(name); err != nil {
				return err
			}
			if other, err := t.Q.GetUserByName(ctx, p.TenantID, name); err == nil && other.ID != u.ID {
				return kernel.Conflict("a user named %s already exists", kernel.Quote(name))
			}
			u.Name = name
		}
		if err := applyUser(p, u, in); err != nil {
			return err
		}
		u.UpdatedAt = t.Now
		if err := t.Q.UpdateUser(ctx, u); err != nil {
			return err
		}
		t.Record("user.updated", "user", u.ID, u.Name, "", describeUserChange(&before, u))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return u, nil
}

func describeUserChange(a, b *model.User) string {
	var parts []string
	if a.Name != b.Name {
		parts = append(parts, "name "+a.Name+" -> "+b.Name)
	}
	if a.Role != b.Role {
		parts = append(parts, fmt.Sprintf("role %s -> %s", a.Role, b.Role))
	}
	if a.Disabled != b.Disabled {
		parts = append(parts, fmt.Sprintf("disabled %v -> %v", a.Disabled, b.Disabled))
	}
	if a.DisplayName != b.DisplayName || a.Email != b.Email {
		parts = append(parts, "contact details")
	}
	if len(parts) == 0 {
		return "no change"
	}
	return "changed " + strings.Join(parts, ", ")
}

// Users lists the users the caller may see, by name, one page at a time.
func (s *Access) Users(ctx context.Context, page model.Page) ([]*model.User, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if p.IsAdmin() {
		us, err := s.k.Store.ListUsers(ctx, p.TenantID, page)
		return us, s.k.Internal(ctx, err)
	}
	seen := map[string]bool{p.UserID: true}
	for _, g := range p.Groups {
		ms, err := s.k.Store.ListMembershipsByGroup(ctx, p.TenantID, g.GroupID)
		if err != nil {
			return nil, s.k.Internal(ctx, err)
		}
		for _, m := range ms {
			seen[m.UserID] = true
		}
	}
	var out []*model.User
	for id := range seen {
		u, err := s.k.Store.GetUser(ctx, p.TenantID, id)
		if err != nil {
			return nil, s.k.Internal(ctx, err)
		}
		if u.Name > page.After {
			out = append(out, u)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if page.Limit > 0 && len(out) > page.Limit {
		out = out[:page.Limit]
	}
	return out, nil
}

// Groups lists the groups the caller may see, by name.
func (s *Access) Groups(ctx context.Context) ([]*model.Group, error) {
	e, err := s.k.Estate(ctx)
	if err != nil {
		return nil, err
	}
	gs := append([]*model.Group(nil), e.Groups...)
	sort.Slice(gs, func(i, j int) bool { return gs[i].Name < gs[j].Name })
	return gs, nil
}

// GroupMembers lists a group's memberships, for admins and its members.
func (s *Access) GroupMembers(ctx context.Context, groupRef string) ([]*model.Membership, error) {
	e, err := s.k.Estate(ctx)
	if err != nil {
		return nil, err
	}
	g, err := kernel.FindGroup(e, groupRef)
	if err != nil {
		return nil, err
	}
	ms, err := s.k.Store.ListMembershipsByGroup(ctx, g.TenantID, g.ID)
	return ms, s.k.Internal(ctx, err)
}

// UserMemberships lists the groups of a user the caller may see, keeping
// only the groups the caller may see too.
func (s *Access) UserMemberships(ctx context.Context, userID string) ([]*model.Membership, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if ok, err := s.k.SeesUser(ctx, p, userID); err != nil || !ok {
		return nil, s.k.Internal(ctx, err)
	}
	ms, err := s.k.Store.ListMembershipsByUser(ctx, p.TenantID, userID)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	out := ms[:0]
	for _, m := range ms {
		if kernel.SeesGroup(p, m.GroupID) || userID == p.UserID {
			out = append(out, m)
		}
	}
	return out, nil
}

// SetGroupMember puts a user in a group with a role, or changes their role.
// Admins may do this for any group; a group lead for their own group, and
// only to add members (not leads).
func (s *Access) SetGroupMember(ctx context.Context, groupRef, userRef string, role model.GroupRole) (*model.Membership, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if role == "" {
		role = model.GroupRoleMember
	}
	if !role.Valid() {
		return nil, kernel.Invalid("group role %q is not known: use lead or member", role)
	}
	var m *model.Membership
	err = s.k.Write(ctx, p, func(t *kernel.Txn) error {
		u, err := kernel.FindUser(ctx, t.Q, p.TenantID, userRef)
		if err != nil {
			return err
		}
		m, err = s.putMemberChecked(t, groupRef, u, role)
		return err
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (s *Access) putMember(t *kernel.Txn, groupRef string, u *model.User, role model.GroupRole) error {
	_, err := s.putMemberChecked(t, groupRef, u, role)
	return err
}

func (s *Access) putMemberChecked(t *kernel.Txn, groupRef string, u *model.User, role model.GroupRole) (*model.Membership, error) {
	p := t.P
	g, err := t.Q.GetGroup(t.Ctx, p.TenantID, groupRef)
	if errors.Is(err, store.ErrNotFound) {
		g, err = t.Q.GetGroupByName(t.Ctx, p.TenantID, groupRef)
	}
	if errors.Is(err, store.ErrNotFound) || (err == nil && !kernel.SeesGroup(p, g.ID)) {
		return nil, kernel.NotFound("no group %s", kernel.Quote(groupRef))
	}
	if err != nil {
		return nil, err
	}
	if role == "" {
		role = model.GroupRoleMember
	}
	if !role.Valid() {
		return nil, kernel.Invalid("group role %q is not known: use lead or member", role)
	}
	if !kernel.ManagesGroup(p, g.ID) {
		return nil, kernel.Forbidden("only a tenant admin or a lead of group %s can change its members", g.Name)
	}
	if role == model.GroupRoleLead && !p.IsAdmin() {
		return nil, kernel.Forbidden("only a tenant admin can make a group lead")
	}
	if !p.IsAdmin() {
		lead, err := kernel.LeadOf(t.Ctx, t.Q, p.TenantID, g.ID, u.ID)
		if err != nil {
			return nil, err
		}
		if lead && u.ID != p.UserID {
			return nil, kernel.Forbidden("%s leads %s: only a tenant admin can change a lead's role", u.Name, g.Name)
		}
	}
	m := &model.Membership{TenantID: p.TenantID, GroupID: g.ID, UserID: u.ID, Role: role, CreatedAt: t.Now}
	if err := t.Q.PutMembership(t.Ctx, m); err != nil {
		return nil, err
	}
	t.Record("group.member_set", "group", g.ID, g.Name, g.ID, fmt.Sprintf("%s is %s of %s", u.Name, role, g.Name))
	return m, nil
}

// RemoveGroupMember takes a user out of a group.
func (s *Access) RemoveGroupMember(ctx context.Context, groupRef, userRef string) error {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return err
	}
	return s.k.Write(ctx, p, func(t *kernel.Txn) error {
		g, err := t.Q.GetGroup(ctx, p.TenantID, groupRef)
		if errors.Is(err, store.ErrNotFound) {
			g, err = t.Q.GetGroupByName(ctx, p.TenantID, groupRef)
		}
		if errors.Is(err, store.ErrNotFound) || (err == nil && !kernel.SeesGroup(p, g.ID)) {
			return kernel.NotFound("no group %s", kernel.Quote(groupRef))
		}
		if err != nil {
			return err
		}
		if !kernel.ManagesGroup(p, g.ID) {
			return kernel.Forbidden("only a tenant admin or a lead of group %s can change its members", g.Name)
		}
		u, err := kernel.FindUser(ctx, t.Q, p.TenantID, userRef)
		if err != nil {
			return err
		}
		if !p.IsAdmin() && u.ID != p.UserID {
			lead, err := kernel.LeadOf(ctx, t.Q, p.TenantID, g.ID, u.ID)
			if err != nil {
				return err
			}
			if lead {
				return kernel.Forbidden("%s leads %s: only a tenant admin can remove a lead", u.Name, g.Name)
			}
		}
		if err := t.Q.DeleteMembership(ctx, p.TenantID, g.ID, u.ID); errors.Is(err, store.ErrNotFound) {
			return kernel.NotFound("%s is not a member of %s", u.Name, g.Name)
		} else if err != nil {
			return err
		}
		t.Record("group.member_removed", "group", g.ID, g.Name, g.ID, fmt.Sprintf("%s left %s", u.Name, g.Name))
		return nil
	})
}

// APIKeyInput creates an API key.
type APIKeyInput struct {
	Name string
	// User is whose key it is: the caller when empty; another user only for
	// admins (service users for automation).
	User string
	// Project scopes the key to one project.
	Project   string
	ExpiresAt *time.Time
}

// CreateAPIKey makes an API key and returns it with its secret, which is
// shown this once and never again.
func (s *Access) CreateAPIKey(ctx context.Context, in APIKeyInput) (*model.APIKey, string, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, "", err
	}
	if p.ProjectID != "" {
		return nil, "", kernel.Forbidden("a credential scoped to a project cannot create API keys; use an unscoped key")
	}
	name := strings.TrimSpace(in.Name)
	if name == "" {
		name = "api key"
	}
	if err := estate.CheckName(name); err != nil {
		return nil, "", kernel.Invalid("API key %v", err)
	}
	var key *model.APIKey
	var secret string
	err = s.k.Write(ctx, p, func(t *kernel.Txn) error {
		owner := p.UserID
		ownerName := p.UserName
		if in.User != "" {
			u, err := kernel.FindUser(ctx, t.Q, p.TenantID, in.User)
			if err != nil {
				return err
			}
			if u.ID != p.UserID && !p.IsAdmin() {
				return kernel.Forbidden("only a tenant admin can create API keys for other users")
			}
			if u.Disabled {
				return kernel.Invalid("user %s is disabled", u.Name)
			}
			owner, ownerName = u.ID, u.Name
		}
		projectID := ""
		if in.Project != "" {
			e, err := kernel.LoadEstate(ctx, t.Q, p.TenantID)
			if err != nil {
				return err
			}
			pr, err := kernel.FindProject(e, in.Project)
			if err == nil && !kernel.UsesProject(p, pr) {
				// A project the caller may not use is one they may not
				// know of either.
				err = kernel.NotFound("no project %s", kernel.Quote(in.Project))
			}
			if err != nil {
				return err
			}
			if pr.GroupID != "" && owner != p.UserID {
				if ok, err := kernel.UserInGroup(ctx, t.Q, p.TenantID, owner, pr.GroupID); err != nil {
					return err
				} else if !ok {
					return kernel.Invalid("user %s is not in group %s, which project %s belongs to; a key scoped to it would be of no use", ownerName, e.GroupName(pr.GroupID), kernel.Quote(pr.Name))
				}
			}
			projectID = pr.ID
		}
		if in.ExpiresAt != nil && !in.ExpiresAt.After(t.Now) {
			return kernel.Invalid("the expiry time %s is in the past", in.ExpiresAt.Format(time.RFC3339))
		}
		key, secret, err = newAPIKey(p.TenantID, owner, name, projectID, in.ExpiresAt, "", t.Now)
		if err != nil {
			return err
		}
		if err := t.Q.CreateAPIKey(ctx, key); err != nil {
			return err
		}
		t.Record("api_key.created", "api_key", key.ID, key.Name, "", fmt.Sprintf("key %s… for %s", key.Prefix, ownerName))
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return key, secret, nil
}

// APIKeys lists the caller's keys, or a user's keys for admins.
func (s *Access) APIKeys(ctx context.Context, userRef string) ([]*model.APIKey, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	userID := p.UserID
	if userRef != "" {
		u, err := kernel.FindUser(ctx, s.k.Store, p.TenantID, userRef)
		if err != nil {
			return nil, s.k.Internal(ctx, err)
		}
		if u.ID != p.UserID && !p.IsAdmin() {
			return nil, kernel.Forbidden("only a tenant admin can list other users' API keys")
		}
		userID = u.ID
	}
	ks, err := s.k.Store.ListAPIKeys(ctx, p.TenantID, userID)
	return ks, s.k.Internal(ctx, err)
}

// RevokeAPIKey revokes a key of the caller's (or any, for admins). It stops
// working at once.
func (s *Access) RevokeAPIKey(ctx context.Context, id string) (*model.APIKey, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if p.ProjectID != "" {
		return nil, kernel.Forbidden("a credential scoped to a project cannot revoke API keys; use an unscoped key")
	}
	var key *model.APIKey
	err = s.k.Write(ctx, p, func(t *kernel.Txn) error {
		k, err := t.Q.GetAPIKey(ctx, p.TenantID, id)
		if errors.Is(err, store.ErrNotFound) || (err == nil && k.UserID != p.UserID && !p.IsAdmin()) {
			return kernel.NotFound("no API key %s", kernel.Quote(id))
		}
		if err != nil {
			return err
		}
		if k.RevokedAt != nil {
			key = k
			return nil
		}
		if err := t.Q.RevokeAPIKey(ctx, p.TenantID, k.ID, t.Now); err != nil {
			return err
		}
		now := t.Now
		k.RevokedAt = &now
		key = k
		t.Record("api_key.revoked", "api_key", k.ID, k.Name, "", "revoked key "+k.Prefix+"…")
		return nil
	})
	if err != nil {
		return nil, err
	}
	return key, nil
}

// AuditFilter narrows the audit trail. Actor is a user id or name.
type AuditFilter struct {
	Actor      string
	ObjectKind string
	ObjectID   string
	Since      time.Time
	Until      time.Time
}

// AuditLog returns the tenant's audit trail, newest first, for admins.
// Page.After is the Seq of the last entry of the previous page.
func (s *Access) AuditLog(ctx context.Context, f AuditFilter, page model.Page) ([]*model.AuditEntry, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := kernel.RequireAdmin(p, "read the audit trail"); err != nil {
		return nil, err
	}
	sf := store.AuditFilter{ObjectKind: f.ObjectKind, ObjectID: f.ObjectID, Since: f.Since, Until: f.Until}
	if f.Actor != "" {
		u, err := kernel.FindUser(ctx, s.k.Store, p.TenantID, f.Actor)
		if err != nil {
			return nil, s.k.Internal(ctx, err)
		}
		sf.ActorID = u.ID
	}
	es, err := s.k.Store.ListAudit(ctx, p.TenantID, sf, page)
	return es, s.k.Internal(ctx, err)
}
