package platform

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
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
func (s *Service) secretScope(ctx context.Context, p *identity.Principal, scope, ref string, change bool) (string, string, error) {
	e, err := s.Estate(ctx)
	if err != nil {
		return "", "", err
	}
	// Leading a group gives no write a role does not: a viewer who leads
	// one reads its secrets' names and no more. A key scoped to a project
	// changes that project's secrets only.
	if change && !p.CanWrite() {
		return "", "", forbidden("a viewer cannot change secrets")
	}
	if change && p.ProjectID != "" && scope != model.ScopeProject {
		return "", "", forbidden("a credential scoped to a project can change that project's secrets only")
	}
	switch scope {
	case model.ScopeTenant:
		if change && !p.IsAdmin() {
			return "", "", forbidden("only a tenant admin can change the tenant's secrets")
		}
		return p.TenantID, p.TenantName, nil
	case model.ScopeGroup:
		g, err := findGroup(e, ref)
		if err != nil {
			return "", "", err
		}
		if change && !p.IsAdmin() && !p.LeadOf(g.ID) {
			return "", "", forbidden("only a tenant admin or a lead of group %s can change its secrets", g.Name)
		}
		return g.ID, g.Name, nil
	case model.ScopeProject:
		pr, err := findProject(e, ref)
		if err != nil {
			return "", "", err
		}
		if !usesProject(p, pr) {
			return "", "", notFound("no project %s", quote(ref))
		}
		if change && !p.IsAdmin() && (pr.GroupID == "" || !p.LeadOf(pr.GroupID)) {
			return "", "", forbidden("only a tenant admin or a lead of the project's group can change the secrets of project %s", pr.Name)
		}
		return pr.ID, pr.Name, nil
	}
	return "", "", invalid("secret scope %q is not known: use tenant, group or project", scope)
}

func secretContext(tenantID, scope, scopeID, name string) string {
	return tenantID + "|" + scope + "|" + scopeID + "|" + name
}

// SetSecret puts a value in a vault. The value is sealed before it is
// stored and never read back through the API.
func (s *Service) SetSecret(ctx context.Context, scope, ref, name, value string) (*SecretInfo, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if p.ProjectID != "" {
		return nil, forbidden("a credential scoped to a project cannot change secrets; use an unscoped key")
	}
	if !runenv.ValidName(name) {
		return nil, invalid("secret name %q must be letters, digits and '_', not starting with a digit: it becomes an environment variable", name)
	}
	if value == "" || len(value) > MaxSecretBytes {
		return nil, invalid("a secret's value must be 1 to %d bytes", MaxSecretBytes)
	}
	if s.vault == nil {
		return nil, newError(CodeInternal, "this server has no vault key configured; set KLIQUE_VAULT_KEY")
	}
	scopeID, scopeName, err := s.secretScope(ctx, p, scope, ref, true)
	if err != nil {
		return nil, err
	}
	sealed, err := s.vault.Seal([]byte(value), secretContext(p.TenantID, scope, scopeID, name))
	if err != nil {
		return nil, s.internal(ctx, err)
	}
	info := &SecretInfo{Scope: scope, ScopeID: scopeID, ScopeName: scopeName, Name: name, UpdatedBy: p.UserName}
	err = s.write(ctx, p, func(t *txn) error {
		if err := t.q.PutSecret(ctx, &model.Secret{TenantID: p.TenantID, Scope: scope, ScopeID: scopeID, Name: name,
			Ciphertext: sealed, UpdatedBy: p.UserName, CreatedAt: t.now, UpdatedAt: t.now}); err != nil {
			return err
		}
		info.UpdatedAt = t.now.Format("2006-01-02T15:04:05Z")
		return t.record("secret.set", "secret", scope+"/"+scopeID+"/"+name, name, "", fmt.Sprintf("set secret %s of %s %s", name, scope, scopeName))
	})
	if err != nil {
		return nil, err
	}
	return info, nil
}

// DeleteSecret removes a secret from a vault.
func (s *Service) DeleteSecret(ctx context.Context, scope, ref, name string) error {
	p, err := caller(ctx)
	if err != nil {
		return err
	}
	if p.ProjectID != "" {
		return forbidden("a credential scoped to a project cannot change secrets; use an unscoped key")
	}
	scopeID, scopeName, err := s.secretScope(ctx, p, scope, ref, true)
	if err != nil {
		return err
	}
	return s.write(ctx, p, func(t *txn) error {
		if err := t.q.DeleteSecret(ctx, p.TenantID, scope, scopeID, name); errors.Is(err, store.ErrNotFound) {
			return notFound("%s %s has no secret %s", scope, scopeName, name)
		} else if err != nil {
			return err
		}
		return t.record("secret.deleted", "secret", scope+"/"+scopeID+"/"+name, name, "", fmt.Sprintf("deleted secret %s of %s %s", name, scope, scopeName))
	})
}

// Secrets lists the secrets of a scope by name, without their values.
func (s *Service) Secrets(ctx context.Context, scope, ref string) ([]*SecretInfo, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	scopeID, scopeName, err := s.secretScope(ctx, p, scope, ref, false)
	if err != nil {
		return nil, err
	}
	if scope == model.ScopeGroup && !seesGroup(p, scopeID) {
		return nil, notFound("no group %s", quote(ref))
	}
	list, err := s.store.ListSecrets(ctx, p.TenantID, scope, scopeID)
	if err != nil {
		return nil, s.internal(ctx, err)
	}
	out := make([]*SecretInfo, 0, len(list))
	for _, sec := range list {
		out = append(out, &SecretInfo{Scope: scope, ScopeID: scopeID, ScopeName: scopeName, Name: sec.Name,
			UpdatedBy: sec.UpdatedBy, UpdatedAt: sec.UpdatedAt.Format("2006-01-02T15:04:05Z")})
	}
	return out, nil
}

// findTaskSecret finds the secret a task names: in its project's vault,
// then its group's, then the tenant's. A tenant secret the platform holds
// for itself (see heldTenantSecrets) is not the task's: held says whose it
// is, and no secret is returned.
func findTaskSecret(ctx context.Context, q store.Queries, held map[string]string, t *model.Task, name string) (*model.Secret, string, error) {
	for _, sc := range [][2]string{{model.ScopeProject, t.ProjectID}, {model.ScopeGroup, t.GroupID}, {model.ScopeTenant, t.TenantID}} {
		if sc[1] == "" {
			continue
		}
		sec, err := q.GetSecret(ctx, t.TenantID, sc[0], sc[1], name)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		if whose := held[name]; sc[0] == model.ScopeTenant && whose != "" {
			return nil, whose, nil
		}
		return sec, "", nil
	}
	return nil, "", nil
}

// heldTenantSecrets are the tenant secrets the platform holds for its own
// use, each with whose it is: the keys of LLM providers, which never leave
// the gateway, and autoscalers' cloud credentials. Such a secret is never
// given to a task: any member can enqueue one, and its code could print
// the value in a form no log redaction recognises. Nil when the task names
// no secret.
func heldTenantSecrets(ctx context.Context, q store.Queries, e *estate.Estate, t *model.Task) (map[string]string, error) {
	if len(t.Spec.Secrets) == 0 {
		return nil, nil
	}
	held := map[string]string{}
	for _, pr := range e.Gateway.Providers {
		if pr.KeySecret != "" {
			held[pr.KeySecret] = "the key of LLM provider " + pr.Name
		}
	}
	as, err := q.ListAutoscalers(ctx, t.TenantID)
	if err != nil {
		return nil, err
	}
	for _, a := range as {
		for _, name := range a.Spec.CredentialSecrets {
			held[name] = "the cloud credentials of autoscaler " + a.Name
		}
	}
	return held, nil
}

// checkTaskSecrets refuses a task that names a secret no vault of its
// project, group or tenant holds for it.
func checkTaskSecrets(ctx context.Context, q store.Queries, e *estate.Estate, t *model.Task) error {
	held, err := heldTenantSecrets(ctx, q, e, t)
	if err != nil {
		return err
	}
	for _, name := range t.Spec.Secrets {
		sec, whose, err := findTaskSecret(ctx, q, held, t, name)
		if err != nil {
			return err
		}
		if whose != "" {
			return forbidden("secret %s of the tenant's vault is %s, which is never given to a task; put what the task needs in the vault of project %s ('klique secret set NAME --project %s')",
				name, whose, e.Project(t.ProjectID).Name, e.Project(t.ProjectID).Name)
		}
		if sec == nil {
			return invalid("secret %s is in none of the vaults of project %s, group %s or the tenant; add it with 'klique secret set %s --project %s'",
				name, e.Project(t.ProjectID).Name, e.GroupName(t.GroupID), name, e.Project(t.ProjectID).Name)
		}
	}
	return nil
}

// credentialProblems lists the parameters and variables of a spec that look
// like credentials, each with a pointer to the vault.
func credentialProblems(spec *model.TaskSpec) []string {
	var ps []string
	for _, k := range sortedKeys(spec.Parameters) {
		if runenv.LooksLikeCredential(k, spec.Parameters[k]) {
			ps = append(ps, fmt.Sprintf("parameter %s looks like a credential: keep it in a vault ('klique secret set %s --project P') and name it in the task's secrets; parameters are recorded on the task for anyone who can read it", k, envName(k)))
		}
	}
	for _, k := range sortedKeys(spec.Env) {
		if runenv.LooksLikeCredential(k, spec.Env[k]) {
			ps = append(ps, fmt.Sprintf("environment variable %s looks like a credential: keep it in a vault ('klique secret set %s --project P') and name it in the task's secrets", k, k))
		}
	}
	return ps
}

func envName(k string) string {
	return strings.ToUpper(strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return r
		}
		return '_'
	}, k))
}
