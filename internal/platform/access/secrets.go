package access

import (
	"context"
	"errors"
	"fmt"

	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/runenv"
	"github.com/klique-ai/klique/internal/store"
)

// Secrets live in vaults of a tenant, a group or a project. A task names the
// secrets it needs; the worker that runs it fetches the values at start and
// injects them as environment variables. Values are sealed at rest, never
// returned through GraphQL after being set, never stored on tasks, and cut
// out of the logs of the tasks that use them.

// MaxSecretBytes bounds one secret's value.
const MaxSecretBytes = 64 << 10

// SecretInfo describes a secret without its value.
type SecretInfo struct {
	Scope     string
	ScopeID   string
	ScopeName string
	Name      string
	UpdatedBy string
	UpdatedAt string
}

// secretScope resolves a scope ("tenant", "group", "project") and a
// reference to the scope's id and name, and checks that the caller may
// change its secrets: admins any; a group lead their group's and the
// projects restricted to their group.
func (s *Access) secretScope(ctx context.Context, p *identity.Principal, scope, ref string, change bool) (string, string, error) {
	e, err := s.k.Estate(ctx)
	if err != nil {
		return "", "", err
	}
	// Leading a group gives no write a role does not: a viewer who leads
	// one reads its secrets' names and no more. A key scoped to a project
	// changes that project's secrets only.
	if change && !p.CanWrite() {
		return "", "", kernel.Forbidden("a viewer cannot change secrets")
	}
	if change && p.ProjectID != "" && scope != model.ScopeProject {
		return "", "", kernel.Forbidden("a credential scoped to a project can change that project's secrets only")
	}
	switch scope {
	case model.ScopeTenant:
		if change && !p.IsAdmin() {
			return "", "", kernel.Forbidden("only a tenant admin can change the tenant's secrets")
		}
		return p.TenantID, p.TenantName, nil
	case model.ScopeGroup:
		g, err := kernel.FindGroup(e, ref)
		if err != nil {
			return "", "", err
		}
		if change && !p.IsAdmin() && !p.LeadOf(g.ID) {
			return "", "", kernel.Forbidden("only a tenant admin or a lead of group %s can change its secrets", g.Name)
		}
		return g.ID, g.Name, nil
	case model.ScopeProject:
		pr, err := kernel.FindProject(e, ref)
		if err != nil {
			return "", "", err
		}
		if !kernel.UsesProject(p, pr) {
			return "", "", kernel.NotFound("no project %s", kernel.Quote(ref))
		}
		if change && !p.IsAdmin() && (pr.GroupID == "" || !p.LeadOf(pr.GroupID)) {
			return "", "", kernel.Forbidden("only a tenant admin or a lead of the project's group can change the secrets of project %s", pr.Name)
		}
		return pr.ID, pr.Name, nil
	}
	return "", "", kernel.Invalid("secret scope %q is not known: use tenant, group or project", scope)
}

// SetSecret puts a value in a vault. The value is sealed before it is
// stored and never read back through the API.
func (s *Access) SetSecret(ctx context.Context, scope, ref, name, value string) (*SecretInfo, error) {
	var info *SecretInfo
	var sealed []byte
	return kernel.Run(ctx, s.k, kernel.Op[*SecretInfo]{
		Name: "setSecret", Right: kernel.RightRead, What: "change secrets",
		Check: func(p *identity.Principal) error {
			if p.ProjectID != "" {
				return kernel.Forbidden("a credential scoped to a project cannot change secrets; use an unscoped key")
			}
			if !runenv.ValidName(name) {
				return kernel.Invalid("secret name %q must be letters, digits and '_', not starting with a digit: it becomes an environment variable", name)
			}
			if value == "" || len(value) > MaxSecretBytes {
				return kernel.Invalid("a secret's value must be 1 to %d bytes", MaxSecretBytes)
			}
			if s.k.Vault == nil {
				return kernel.NewError(kernel.CodeInternal, "this server has no vault key configured; set KLIQUE_VAULT_KEY")
			}
			return nil
		},
		Prepare: func(p *identity.Principal) error {
			scopeID, scopeName, err := s.secretScope(ctx, p, scope, ref, true)
			if err != nil {
				return err
			}
			if sealed, err = s.k.Vault.Seal([]byte(value), kernel.SecretContext(p.TenantID, scope, scopeID, name)); err != nil {
				return s.k.Internal(ctx, err)
			}
			info = &SecretInfo{Scope: scope, ScopeID: scopeID, ScopeName: scopeName, Name: name, UpdatedBy: p.UserName}
			return nil
		},
		Body: func(t *kernel.Txn) (*SecretInfo, kernel.Audit, error) {
			if err := t.Q.PutSecret(ctx, &model.Secret{TenantID: t.P.TenantID, Scope: scope, ScopeID: info.ScopeID, Name: name,
				Ciphertext: sealed, UpdatedBy: t.P.UserName, CreatedAt: t.Now, UpdatedAt: t.Now}); err != nil {
				return nil, kernel.Audit{}, err
			}
			info.UpdatedAt = t.Now.Format("2006-01-02T15:04:05Z")
			return info, kernel.Audit{Action: "secret.set", Kind: "secret", ID: scope + "/" + info.ScopeID + "/" + name, Name: name,
				Detail: fmt.Sprintf("set secret %s of %s %s", name, scope, info.ScopeName)}, nil
		},
	})
}

// DeleteSecret removes a secret from a vault.
func (s *Access) DeleteSecret(ctx context.Context, scope, ref, name string) error {
	var scopeID, scopeName string
	_, err := kernel.Run(ctx, s.k, kernel.Op[struct{}]{
		Name: "deleteSecret", Right: kernel.RightRead, What: "change secrets",
		Check: func(p *identity.Principal) error {
			if p.ProjectID != "" {
				return kernel.Forbidden("a credential scoped to a project cannot change secrets; use an unscoped key")
			}
			return nil
		},
		Prepare: func(p *identity.Principal) (err error) {
			scopeID, scopeName, err = s.secretScope(ctx, p, scope, ref, true)
			return err
		},
		Body: func(t *kernel.Txn) (struct{}, kernel.Audit, error) {
			if err := t.Q.DeleteSecret(ctx, t.P.TenantID, scope, scopeID, name); errors.Is(err, store.ErrNotFound) {
				return struct{}{}, kernel.Audit{}, kernel.NotFound("%s %s has no secret %s", scope, scopeName, name)
			} else if err != nil {
				return struct{}{}, kernel.Audit{}, err
			}
			return struct{}{}, kernel.Audit{Action: "secret.deleted", Kind: "secret", ID: scope + "/" + scopeID + "/" + name, Name: name,
				Detail: fmt.Sprintf("deleted secret %s of %s %s", name, scope, scopeName)}, nil
		},
	})
	return err
}

// Secrets lists the secrets of a scope by name, without their values.
func (s *Access) Secrets(ctx context.Context, scope, ref string) ([]*SecretInfo, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	scopeID, scopeName, err := s.secretScope(ctx, p, scope, ref, false)
	if err != nil {
		return nil, err
	}
	if scope == model.ScopeGroup && !kernel.SeesGroup(p, scopeID) {
		return nil, kernel.NotFound("no group %s", kernel.Quote(ref))
	}
	list, err := s.k.Store.ListSecrets(ctx, p.TenantID, scope, scopeID)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	out := make([]*SecretInfo, 0, len(list))
	for _, sec := range list {
		out = append(out, &SecretInfo{Scope: scope, ScopeID: scopeID, ScopeName: scopeName, Name: sec.Name,
			UpdatedBy: sec.UpdatedBy, UpdatedAt: sec.UpdatedAt.Format("2006-01-02T15:04:05Z")})
	}
	return out, nil
}
