package identity

import (
	"context"

	"github.com/klique-ai/klique/internal/store"
)

// LoadPrincipal is the principal of a user as a credential of theirs
// would give it now (unscoped: their role and groups as they are now).
// The control plane acts as the owner of work it starts on their behalf
// (a pipeline's steps, a study's trials, a schedule's runs) and checks on
// their behalf when they are not the caller (whether a task's owner may
// still read the runs its inputs come from), so every rule that applies
// to them applies, and a disabled or deleted user is ErrUnauthenticated.
func LoadPrincipal(ctx context.Context, q store.Queries, tenantID, userID string) (*Principal, error) {
	return loadPrincipal(ctx, q, tenantID, userID)
}
