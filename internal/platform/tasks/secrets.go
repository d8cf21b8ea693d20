package tasks

import (
	"context"
	"fmt"
	"strings"
	"unicode"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/runenv"
	"github.com/klique-ai/klique/internal/store"
)

// checkTaskSecrets refuses a task that names a secret no vault of its
// project, group or tenant holds for it.
func checkTaskSecrets(ctx context.Context, q store.Queries, e *estate.Estate, t *model.Task) error {
	held, err := kernel.HeldTenantSecrets(ctx, q, e, t)
	if err != nil {
		return err
	}
	for _, name := range t.Spec.Secrets {
		sec, whose, err := kernel.FindTaskSecret(ctx, q, held, t, name)
		if err != nil {
			return err
		}
		if whose != "" {
			return kernel.Forbidden("secret %s of the tenant's vault is %s, which is never given to a task; put what the task needs in the vault of project %s ('klique secret set NAME --project %s')",
				name, whose, e.Project(t.ProjectID).Name, e.Project(t.ProjectID).Name)
		}
		if sec == nil {
			return kernel.Invalid("secret %s is in none of the vaults of project %s, group %s or the tenant; add it with 'klique secret set %s --project %s'",
				name, e.Project(t.ProjectID).Name, e.GroupName(t.GroupID), name, e.Project(t.ProjectID).Name)
		}
	}
	return nil
}

// credentialProblems lists the parameters and variables of a spec that look
// like credentials, each with a pointer to the vault.
func credentialProblems(spec *model.TaskSpec) []string {
	var ps []string
	for _, k := range kernel.SortedKeys(spec.Parameters) {
		if runenv.LooksLikeCredential(k, spec.Parameters[k]) {
			ps = append(ps, fmt.Sprintf("parameter %s looks like a credential: keep it in a vault ('klique secret set %s --project P') and name it in the task's secrets; parameters are recorded on the task for anyone who can read it", k, envName(k)))
		}
	}
	for _, k := range kernel.SortedKeys(spec.Env) {
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
