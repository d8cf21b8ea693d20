package kernel

import (
	"context"
	"errors"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
)

func SecretContext(tenantID, scope, scopeID, name string) string {
	return tenantID + "|" + scope + "|" + scopeID + "|" + name
}

// FindTaskSecret finds the secret a task names: in its project's vault,
// then its group's, then the tenant's. A tenant secret the platform holds
// for itself (see heldTenantSecrets) is not the task's: held says whose it
// is, and no secret is returned.
func FindTaskSecret(ctx context.Context, q store.Queries, held map[string]string, t *model.Task, name string) (*model.Secret, string, error) {
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

// HeldTenantSecrets are the tenant secrets the platform holds for its own
// use, each with whose it is: the keys of LLM providers, which never leave
// the gateway, and autoscalers' cloud credentials. Such a secret is never
// given to a task: any member can enqueue one, and its code could print
// the value in a form no log redaction recognises. Nil when the task names
// no secret.
func HeldTenantSecrets(ctx context.Context, q store.Queries, e *estate.Estate, t *model.Task) (map[string]string, error) {
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
