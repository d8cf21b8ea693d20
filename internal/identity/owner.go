package identity

import (
	"context"

	"github.com/klique-ai/klique/internal/store"
)

// LoadUserPrincipal returns a user's principal as their own credential
// would give it (their role and groups as they are now). The control plane
// acts as the owner of work it starts on their behalf (a pipeline's steps),
// so every rule that applies to them applies to that work, and a user who
// has lost access is refused as they would be.
func LoadUserPrincipal(ctx context.Context, q store.Queries, tenantID, userID string) (*Principal, error) {
	return loadPrincipal(ctx, q, tenantID, userID)
}
