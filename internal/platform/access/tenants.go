package access

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/klique-ai/klique/internal/estate/basis"
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
	name, adminName = strings.TrimSpace(name), strings.TrimSpace(adminName)
	if adminName == "" {
		adminName = "admin"
	}
	return kernel.Run(ctx, s.k, kernel.Op[*NewTenant]{
		Name: "createTenant", Right: kernel.RightPlatformAdmin, What: "create tenants",
		Check: func(*identity.Principal) error {
			if err := checkTenantName(name); err != nil {
				return err
			}
			return checkUserName(adminName)
		},
		Body: func(t *kernel.Txn) (*NewTenant, kernel.Audit, error) {
			if _, err := t.Q.GetTenantByName(ctx, name); err == nil {
				return nil, kernel.Audit{}, kernel.Conflict("a tenant named %s already exists", kernel.Quote(name))
			}
			nt, err := createTenant(t, name, displayName, adminName, model.RoleTenantAdmin, "")
			if err != nil {
				return nil, kernel.Audit{}, err
			}
			return nt, kernel.Audit{Action: "tenant.created", Kind: "tenant", ID: nt.Tenant.ID, Name: nt.Tenant.Name,
				Detail: "created tenant " + name + " with admin " + adminName}, nil
		},
	})
}

func checkTenantName(name string) error {
	if err := basis.CheckName(name); err != nil {
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
	ctx = identity.WithChannel(ctx, identity.ChannelSystem)
	// No one acts yet: the entry's actor is the system, in the new tenant.
	secret, err := kernel.RunAs(ctx, s.k, nil, kernel.Op[string]{
		Name: "bootstrap",
		Body: func(t *kernel.Txn) (string, kernel.Audit, error) {
			nt, err := createTenant(t, "default", "Default tenant", "admin", model.RolePlatformAdmin, token)
			if err != nil {
				return "", kernel.Audit{}, err
			}
			t.P = &identity.Principal{TenantID: nt.Tenant.ID}
			return nt.Secret, kernel.Audit{Action: "tenant.bootstrapped", Kind: "tenant", ID: nt.Tenant.ID, Name: nt.Tenant.Name,
				Detail: "first start: created tenant default, platform admin admin and its API key"}, nil
		},
	})
	if errors.Is(err, store.ErrConflict) {
		return "", nil // another replica bootstrapped first
	}
	return secret, err
}

// SetDefaultProject sets the project the caller's model calls and tasks are
// for when they name none (projectRef, an id or name, of a project they
// may use; "" clears it). It is the caller's own setting: anyone who may
// use a project may make it theirs, viewers included, and no one sets
// another's. It returns the project (nil when cleared).
func (s *Access) SetDefaultProject(ctx context.Context, projectRef string) (*model.Project, error) {
	var pr *model.Project
	_, err := kernel.Run(ctx, s.k, kernel.Op[*model.User]{
		Name: "setDefaultProject", Right: kernel.RightRead, What: "set a default project",
		Check: func(p *identity.Principal) error {
			if p.ProjectID != "" {
				return kernel.Forbidden("this credential is scoped to one project, which its calls and tasks always use; set your default project with a credential that is not scoped")
			}
			return nil
		},
		Prepare: func(p *identity.Principal) error {
			ref := strings.TrimSpace(projectRef)
			if ref == "" {
				return nil
			}
			e, err := s.k.TenantEstate(ctx, p)
			if err != nil {
				return err
			}
			if pr = e.Project(ref); pr == nil {
				pr = e.ProjectByName(ref)
			}
			if pr == nil || !kernel.UsesProject(p, pr) {
				return kernel.NotFound("no project %s you may use: 'klique get projects' lists yours", kernel.Quote(ref))
			}
			return nil
		},
		Body: func(t *kernel.Txn) (*model.User, kernel.Audit, error) {
			u, err := t.Q.GetUser(ctx, t.P.TenantID, t.P.UserID)
			if err != nil {
				return nil, kernel.Audit{}, err
			}
			u.DefaultProjectID, u.UpdatedAt = "", t.Now
			what := "cleared the default project"
			if pr != nil {
				u.DefaultProjectID, what = pr.ID, "default project "+pr.Name
			}
			if err := t.Q.UpdateUser(ctx, u); err != nil {
				return nil, kernel.Audit{}, err
			}
			// A user.* event: cached credentials, which carry the default,
			// are checked again.
			return u, kernel.Audit{Action: "user.default_project_set", Kind: "user", ID: u.ID, Name: u.Name, Detail: what}, nil
		},
	})
	if err != nil {
		return nil, err
	}
	return pr, nil
}

// DefaultProject is the project the caller's model calls and tasks are for
// when they name none (kernel.DefaultProject), nil when they must say.
func (s *Access) DefaultProject(ctx context.Context) (*model.Project, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	e, err := s.k.TenantEstate(ctx, p)
	if err != nil {
		return nil, err
	}
	return kernel.DefaultProject(e, p), nil
}
