package platform

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
func (s *Service) Me(ctx context.Context) (*Me, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	u, err := s.store.GetUser(ctx, p.TenantID, p.UserID)
	if err != nil {
		return nil, s.internal(ctx, err)
	}
	t, err := s.store.GetTenant(ctx, p.TenantID)
	if err != nil {
		return nil, s.internal(ctx, err)
	}
	ms, err := s.store.ListMembershipsByUser(ctx, p.TenantID, p.UserID)
	if err != nil {
		return nil, s.internal(ctx, err)
	}
	return &Me{User: u, Tenant: t, Memberships: ms, ProjectID: p.ProjectID}, nil
}

// Tenant returns the caller's tenant. No operation returns another tenant to
// anyone but a platform admin.
func (s *Service) Tenant(ctx context.Context, id string) (*model.Tenant, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if id != p.TenantID && p.Role != model.RolePlatformAdmin {
		return nil, notFound("no tenant %s", quote(id))
	}
	t, err := s.store.GetTenant(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("no tenant %s", quote(id))
	}
	return t, s.internal(ctx, err)
}

// Tenants lists every tenant, for platform admins.
func (s *Service) Tenants(ctx context.Context) ([]*model.Tenant, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := requirePlatformAdmin(p, "list tenants"); err != nil {
		return nil, err
	}
	ts, err := s.store.ListTenants(ctx)
	return ts, s.internal(ctx, err)
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
func (s *Service) CreateTenant(ctx context.Context, name, displayName, adminName string) (*NewTenant, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := requirePlatformAdmin(p, "create tenants"); err != nil {
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
	err = s.write(ctx, p, func(t *txn) error {
		if _, err := t.q.GetTenantByName(ctx, name); err == nil {
			return conflict("a tenant named %s already exists", quote(name))
		}
		nt, err := createTenant(t, name, displayName, adminName, model.RoleTenantAdmin, "")
		if err != nil {
			return err
		}
		out = nt
		return t.record("tenant.created", "tenant", nt.Tenant.ID, nt.Tenant.Name, "", "created tenant "+name+" with admin "+adminName)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func checkTenantName(name string) error {
	if err := estate.CheckName(name); err != nil {
		return invalid("tenant %v", err)
	}
	return nil
}

// createTenant writes a tenant, its admin user and an API key for the admin.
// secret, when set, is the key to store (from KLIQUE_BOOTSTRAP_TOKEN).
func createTenant(t *txn, name, displayName, adminName string, role model.Role, secret string) (*NewTenant, error) {
	tenant := &model.Tenant{ID: model.NewID(), Name: name, DisplayName: displayName, CreatedAt: t.now}
	if err := t.q.CreateTenant(t.ctx, tenant); err != nil {
		return nil, fmt.Errorf("create tenant %s: %w", name, err)
	}
	admin := &model.User{ID: model.NewID(), TenantID: tenant.ID, Name: adminName, DisplayName: "Administrator",
		Role: role, CreatedAt: t.now, UpdatedAt: t.now}
	if err := t.q.CreateUser(t.ctx, admin); err != nil {
		return nil, fmt.Errorf("create admin of tenant %s: %w", name, err)
	}
	key, secret, err := newAPIKey(tenant.ID, admin.ID, "bootstrap", "", nil, secret, t.now)
	if err != nil {
		return nil, err
	}
	if err := t.q.CreateAPIKey(t.ctx, key); err != nil {
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
func (s *Service) Bootstrap(ctx context.Context, token string) (string, error) {
	if token != "" {
		if err := identity.ValidateBootstrapKey(token); err != nil {
			return "", fmt.Errorf("KLIQUE_BOOTSTRAP_TOKEN: %w", err)
		}
	}
	tenants, err := s.store.ListTenants(ctx)
	if err != nil {
		return "", fmt.Errorf("bootstrap: %w", err)
	}
	if len(tenants) > 0 {
		return "", nil
	}
	var secret string
	ctx = identity.WithChannel(ctx, identity.ChannelSystem)
	err = s.write(ctx, nil, func(t *txn) error {
		nt, err := createTenant(t, "default", "Default tenant", "admin", model.RolePlatformAdmin, token)
		if err != nil {
			return err
		}
		secret = nt.Secret
		t.p = &identity.Principal{TenantID: nt.Tenant.ID}
		return t.record("tenant.bootstrapped", "tenant", nt.Tenant.ID, nt.Tenant.Name, "", "first start: created tenant default, platform admin admin and its API key")
	})
	if errors.Is(err, store.ErrConflict) {
		return "", nil // another replica bootstrapped first
	}
	return secret, err
}

// IssueToken exchanges the caller's credential for a short-lived access
// token (what `klique login` does).
func (s *Service) IssueToken(ctx context.Context) (string, time.Time, error) {
	p, err := caller(ctx)
	if err != nil {
		return "", time.Time{}, err
	}
	if p.Method == identity.MethodToken {
		return "", time.Time{}, forbidden("an access token cannot be exchanged for another one; sign in again with your API key or through SSO")
	}
	if s.auth == nil {
		return "", time.Time{}, errors.New("no authenticator configured")
	}
	tok, exp, err := s.auth.IssueToken(p)
	return tok, exp, s.internal(ctx, err)
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
		return invalid("user %v", err)
	}
	if strings.ContainsAny(name, " \t/\\@") {
		return invalid("user name %q must not hold spaces, '/', '\\' or '@'", name)
	}
	return nil
}

// CreateUser adds a user (or a service user for automation) to the caller's
// tenant, optionally in groups.
func (s *Service) CreateUser(ctx context.Context, in UserInput) (*model.User, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := requireAdmin(p, "create users"); err != nil {
		return nil, err
	}
	if in.Name == nil {
		return nil, invalid("a user needs a name")
	}
	u := &model.User{ID: model.NewID(), TenantID: p.TenantID, Name: strings.TrimSpace(*in.Name), Role: model.RoleMember}
	if err := checkUserName(u.Name); err != nil {
		return nil, err
	}
	if err := applyUser(p, u, in); err != nil {
		return nil, err
	}
	err = s.write(ctx, p, func(t *txn) error {
		u.CreatedAt, u.UpdatedAt = t.now, t.now
		if _, err := t.q.GetUserByName(ctx, p.TenantID, u.Name); err == nil {
			return conflict("a user named %s already exists", quote(u.Name))
		}
		if err := t.q.CreateUser(ctx, u); err != nil {
			return err
		}
		if err := t.record("user.created", "user", u.ID, u.Name, "", fmt.Sprintf("created %s with role %s", u.Name, u.Role)); err != nil {
			return err
		}
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
	setString(&u.DisplayName, in.DisplayName)
	setString(&u.Email, in.Email)
	if len(u.DisplayName) > estate.MaxNameLength || len(u.Email) > 254 {
		return invalid("display name or email of %s is too long", u.Name)
	}
	if in.Role != nil {
		if !in.Role.Valid() {
			return invalid("role %q is not known: use tenant_admin, member or viewer", *in.Role)
		}
		if *in.Role == model.RolePlatformAdmin && p.Role != model.RolePlatformAdmin {
			return forbidden("only a platform admin can make another platform admin")
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
func (s *Service) UpdateUser(ctx context.Context, ref string, in UserInput) (*model.User, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := requireAdmin(p, "change users"); err != nil {
		return nil, err
	}
	var u *model.User
	err = s.write(ctx, p, func(t *txn) error {
		if u, err = findUser(ctx, t.q, p.TenantID, ref); err != nil {
			return err
		}
		if u.ID == p.UserID && ((in.Role != nil && *in.Role != u.Role) || (in.Disabled != nil && *in.Disabled)) {
			return forbidden("you cannot change your own role or disable yourself; ask another admin")
		}
		if u.Role == model.RolePlatformAdmin && p.Role != model.RolePlatformAdmin {
			return forbidden("only a platform admin can change a platform admin")
		}
		before := *u
		if in.Name != nil {
			name := strings.TrimSpace(*in.Name)
			if err := checkUserName(name); err != nil {
				return err
			}
			if other, err := t.q.GetUserByName(ctx, p.TenantID, name); err == nil && other.ID != u.ID {
				return conflict("a user named %s already exists", quote(name))
			}
			u.Name = name
		}
		if err := applyUser(p, u, in); err != nil {
			return err
		}
		u.UpdatedAt = t.now
		if err := t.q.UpdateUser(ctx, u); err != nil {
			return err
		}
		return t.record("user.updated", "user", u.ID, u.Name, "", describeUserChange(&before, u))
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

func findUser(ctx context.Context, q store.Queries, tenantID, ref string) (*model.User, error) {
	u, err := q.GetUser(ctx, tenantID, ref)
	if errors.Is(err, store.ErrNotFound) {
		u, err = q.GetUserByName(ctx, tenantID, ref)
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("no user %s", quote(ref))
	}
	return u, err
}

// User returns a user the caller may see: themselves, members of their
// groups, or anyone for admins.
func (s *Service) User(ctx context.Context, ref string) (*model.User, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	u, err := findUser(ctx, s.store, p.TenantID, ref)
	if err != nil {
		return nil, s.internal(ctx, err)
	}
	ok, err := s.seesUser(ctx, p, u.ID)
	if err != nil {
		return nil, s.internal(ctx, err)
	}
	if !ok {
		return nil, notFound("no user %s", quote(ref))
	}
	return u, nil
}

func (s *Service) seesUser(ctx context.Context, p *identity.Principal, userID string) (bool, error) {
	if p.IsAdmin() || userID == p.UserID {
		return true, nil
	}
	ms, err := s.store.ListMembershipsByUser(ctx, p.TenantID, userID)
	if err != nil {
		return false, err
	}
	for _, m := range ms {
		if p.InGroup(m.GroupID) {
			return true, nil
		}
	}
	return false, nil
}

// Users lists the users the caller may see, by name, one page at a time.
func (s *Service) Users(ctx context.Context, page store.Page) ([]*model.User, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if p.IsAdmin() {
		us, err := s.store.ListUsers(ctx, p.TenantID, page)
		return us, s.internal(ctx, err)
	}
	seen := map[string]bool{p.UserID: true}
	for _, g := range p.Groups {
		ms, err := s.store.ListMembershipsByGroup(ctx, p.TenantID, g.GroupID)
		if err != nil {
			return nil, s.internal(ctx, err)
		}
		for _, m := range ms {
			seen[m.UserID] = true
		}
	}
	var out []*model.User
	for id := range seen {
		u, err := s.store.GetUser(ctx, p.TenantID, id)
		if err != nil {
			return nil, s.internal(ctx, err)
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
func (s *Service) Groups(ctx context.Context) ([]*model.Group, error) {
	e, err := s.Estate(ctx)
	if err != nil {
		return nil, err
	}
	gs := append([]*model.Group(nil), e.Groups...)
	sort.Slice(gs, func(i, j int) bool { return gs[i].Name < gs[j].Name })
	return gs, nil
}

// GroupMembers lists a group's memberships, for admins and its members.
func (s *Service) GroupMembers(ctx context.Context, groupRef string) ([]*model.Membership, error) {
	g, err := s.Group(ctx, groupRef)
	if err != nil {
		return nil, err
	}
	ms, err := s.store.ListMembershipsByGroup(ctx, g.TenantID, g.ID)
	return ms, s.internal(ctx, err)
}

// UserMemberships lists the groups of a user the caller may see, keeping
// only the groups the caller may see too.
func (s *Service) UserMemberships(ctx context.Context, userID string) ([]*model.Membership, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if ok, err := s.seesUser(ctx, p, userID); err != nil || !ok {
		return nil, s.internal(ctx, err)
	}
	ms, err := s.store.ListMembershipsByUser(ctx, p.TenantID, userID)
	if err != nil {
		return nil, s.internal(ctx, err)
	}
	out := ms[:0]
	for _, m := range ms {
		if seesGroup(p, m.GroupID) || userID == p.UserID {
			out = append(out, m)
		}
	}
	return out, nil
}

// SetGroupMember puts a user in a group with a role, or changes their role.
// Admins may do this for any group; a group lead for their own group, and
// only to add members (not leads).
func (s *Service) SetGroupMember(ctx context.Context, groupRef, userRef string, role model.GroupRole) (*model.Membership, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if role == "" {
		role = model.GroupRoleMember
	}
	if !role.Valid() {
		return nil, invalid("group role %q is not known: use lead or member", role)
	}
	var m *model.Membership
	err = s.write(ctx, p, func(t *txn) error {
		u, err := findUser(ctx, t.q, p.TenantID, userRef)
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

func (s *Service) putMember(t *txn, groupRef string, u *model.User, role model.GroupRole) error {
	_, err := s.putMemberChecked(t, groupRef, u, role)
	return err
}

func (s *Service) putMemberChecked(t *txn, groupRef string, u *model.User, role model.GroupRole) (*model.Membership, error) {
	p := t.p
	g, err := t.q.GetGroup(t.ctx, p.TenantID, groupRef)
	if errors.Is(err, store.ErrNotFound) {
		g, err = t.q.GetGroupByName(t.ctx, p.TenantID, groupRef)
	}
	if errors.Is(err, store.ErrNotFound) || (err == nil && !seesGroup(p, g.ID)) {
		return nil, notFound("no group %s", quote(groupRef))
	}
	if err != nil {
		return nil, err
	}
	if role == "" {
		role = model.GroupRoleMember
	}
	if !role.Valid() {
		return nil, invalid("group role %q is not known: use lead or member", role)
	}
	if !managesGroup(p, g.ID) {
		return nil, forbidden("only a tenant admin or a lead of group %s can change its members", g.Name)
	}
	if role == model.GroupRoleLead && !p.IsAdmin() {
		return nil, forbidden("only a tenant admin can make a group lead")
	}
	if !p.IsAdmin() {
		lead, err := leadOf(t.ctx, t.q, p.TenantID, g.ID, u.ID)
		if err != nil {
			return nil, err
		}
		if lead && u.ID != p.UserID {
			return nil, forbidden("%s leads %s: only a tenant admin can change a lead's role", u.Name, g.Name)
		}
	}
	m := &model.Membership{TenantID: p.TenantID, GroupID: g.ID, UserID: u.ID, Role: role, CreatedAt: t.now}
	if err := t.q.PutMembership(t.ctx, m); err != nil {
		return nil, err
	}
	return m, t.record("group.member_set", "group", g.ID, g.Name, g.ID, fmt.Sprintf("%s is %s of %s", u.Name, role, g.Name))
}

// RemoveGroupMember takes a user out of a group.
func (s *Service) RemoveGroupMember(ctx context.Context, groupRef, userRef string) error {
	p, err := caller(ctx)
	if err != nil {
		return err
	}
	return s.write(ctx, p, func(t *txn) error {
		g, err := t.q.GetGroup(ctx, p.TenantID, groupRef)
		if errors.Is(err, store.ErrNotFound) {
			g, err = t.q.GetGroupByName(ctx, p.TenantID, groupRef)
		}
		if errors.Is(err, store.ErrNotFound) || (err == nil && !seesGroup(p, g.ID)) {
			return notFound("no group %s", quote(groupRef))
		}
		if err != nil {
			return err
		}
		if !managesGroup(p, g.ID) {
			return forbidden("only a tenant admin or a lead of group %s can change its members", g.Name)
		}
		u, err := findUser(ctx, t.q, p.TenantID, userRef)
		if err != nil {
			return err
		}
		if !p.IsAdmin() && u.ID != p.UserID {
			lead, err := leadOf(ctx, t.q, p.TenantID, g.ID, u.ID)
			if err != nil {
				return err
			}
			if lead {
				return forbidden("%s leads %s: only a tenant admin can remove a lead", u.Name, g.Name)
			}
		}
		if err := t.q.DeleteMembership(ctx, p.TenantID, g.ID, u.ID); errors.Is(err, store.ErrNotFound) {
			return notFound("%s is not a member of %s", u.Name, g.Name)
		} else if err != nil {
			return err
		}
		return t.record("group.member_removed", "group", g.ID, g.Name, g.ID, fmt.Sprintf("%s left %s", u.Name, g.Name))
	})
}

// leadOf reports whether a user leads a group now: leads add members, and
// only admins make, demote or remove leads.
func leadOf(ctx context.Context, q store.Queries, tenantID, groupID, userID string) (bool, error) {
	ms, err := q.ListMembershipsByUser(ctx, tenantID, userID)
	if err != nil {
		return false, err
	}
	for _, m := range ms {
		if m.GroupID == groupID {
			return m.Role == model.GroupRoleLead, nil
		}
	}
	return false, nil
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
func (s *Service) CreateAPIKey(ctx context.Context, in APIKeyInput) (*model.APIKey, string, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, "", err
	}
	if p.ProjectID != "" {
		return nil, "", forbidden("a credential scoped to a project cannot create API keys; use an unscoped key")
	}
	name := strings.TrimSpace(in.Name)
	if name == "" {
		name = "api key"
	}
	if err := estate.CheckName(name); err != nil {
		return nil, "", invalid("API key %v", err)
	}
	var key *model.APIKey
	var secret string
	err = s.write(ctx, p, func(t *txn) error {
		owner := p.UserID
		ownerName := p.UserName
		if in.User != "" {
			u, err := findUser(ctx, t.q, p.TenantID, in.User)
			if err != nil {
				return err
			}
			if u.ID != p.UserID && !p.IsAdmin() {
				return forbidden("only a tenant admin can create API keys for other users")
			}
			if u.Disabled {
				return invalid("user %s is disabled", u.Name)
			}
			owner, ownerName = u.ID, u.Name
		}
		projectID := ""
		if in.Project != "" {
			e, err := loadEstate(ctx, t.q, p.TenantID)
			if err != nil {
				return err
			}
			pr, err := findProject(e, in.Project)
			if err == nil && !usesProject(p, pr) {
				// A project the caller may not use is one they may not
				// know of either.
				err = notFound("no project %s", quote(in.Project))
			}
			if err != nil {
				return err
			}
			if pr.GroupID != "" && owner != p.UserID {
				if ok, err := userInGroup(ctx, t.q, p.TenantID, owner, pr.GroupID); err != nil {
					return err
				} else if !ok {
					return invalid("user %s is not in group %s, which project %s belongs to; a key scoped to it would be of no use", ownerName, e.GroupName(pr.GroupID), quote(pr.Name))
				}
			}
			projectID = pr.ID
		}
		if in.ExpiresAt != nil && !in.ExpiresAt.After(t.now) {
			return invalid("the expiry time %s is in the past", in.ExpiresAt.Format(time.RFC3339))
		}
		key, secret, err = newAPIKey(p.TenantID, owner, name, projectID, in.ExpiresAt, "", t.now)
		if err != nil {
			return err
		}
		if err := t.q.CreateAPIKey(ctx, key); err != nil {
			return err
		}
		return t.record("api_key.created", "api_key", key.ID, key.Name, "", fmt.Sprintf("key %s… for %s", key.Prefix, ownerName))
	})
	if err != nil {
		return nil, "", err
	}
	return key, secret, nil
}

// APIKeys lists the caller's keys, or a user's keys for admins.
func (s *Service) APIKeys(ctx context.Context, userRef string) ([]*model.APIKey, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	userID := p.UserID
	if userRef != "" {
		u, err := findUser(ctx, s.store, p.TenantID, userRef)
		if err != nil {
			return nil, s.internal(ctx, err)
		}
		if u.ID != p.UserID && !p.IsAdmin() {
			return nil, forbidden("only a tenant admin can list other users' API keys")
		}
		userID = u.ID
	}
	ks, err := s.store.ListAPIKeys(ctx, p.TenantID, userID)
	return ks, s.internal(ctx, err)
}

// RevokeAPIKey revokes a key of the caller's (or any, for admins). It stops
// working at once.
func (s *Service) RevokeAPIKey(ctx context.Context, id string) (*model.APIKey, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if p.ProjectID != "" {
		return nil, forbidden("a credential scoped to a project cannot revoke API keys; use an unscoped key")
	}
	var key *model.APIKey
	err = s.write(ctx, p, func(t *txn) error {
		k, err := t.q.GetAPIKey(ctx, p.TenantID, id)
		if errors.Is(err, store.ErrNotFound) || (err == nil && k.UserID != p.UserID && !p.IsAdmin()) {
			return notFound("no API key %s", quote(id))
		}
		if err != nil {
			return err
		}
		if k.RevokedAt != nil {
			key = k
			return nil
		}
		if err := t.q.RevokeAPIKey(ctx, p.TenantID, k.ID, t.now); err != nil {
			return err
		}
		now := t.now
		k.RevokedAt = &now
		key = k
		return t.record("api_key.revoked", "api_key", k.ID, k.Name, "", "revoked key "+k.Prefix+"…")
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
func (s *Service) AuditLog(ctx context.Context, f AuditFilter, page store.Page) ([]*model.AuditEntry, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := requireAdmin(p, "read the audit trail"); err != nil {
		return nil, err
	}
	sf := store.AuditFilter{ObjectKind: f.ObjectKind, ObjectID: f.ObjectID, Since: f.Since, Until: f.Until}
	if f.Actor != "" {
		u, err := findUser(ctx, s.store, p.TenantID, f.Actor)
		if err != nil {
			return nil, s.internal(ctx, err)
		}
		sf.ActorID = u.ID
	}
	es, err := s.store.ListAudit(ctx, p.TenantID, sf, page)
	return es, s.internal(ctx, err)
}

// userInGroup reports whether a user is a member of a group. Admins count
// as members of every group, as they may use every project.
func userInGroup(ctx context.Context, q store.Queries, tenantID, userID, groupID string) (bool, error) {
	u, err := q.GetUser(ctx, tenantID, userID)
	if err != nil {
		return false, err
	}
	if u.Role.IsAdmin() {
		return true, nil
	}
	ms, err := q.ListMembershipsByUser(ctx, tenantID, userID)
	if err != nil {
		return false, err
	}
	for _, m := range ms {
		if m.GroupID == groupID {
			return true, nil
		}
	}
	return false, nil
}
