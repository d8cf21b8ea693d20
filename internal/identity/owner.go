package identity

import (
	"context"

	"github.com/klique-ai/klique/internal/store"
)

// LoadPrincipal is the principal of a user as a credential of theirs
// would give it now (unscoped): for checks made on a user's behalf when
// they are not the caller, such as whether a task's owner may still read
// the runs its inputs come from when its worker fetches them. A disabled
// or deleted user is ErrUnauthenticated.
func LoadPrincipal(ctx context.Context, q store.Queries, tenantID, userID string) (*Principal, error) {
	return loadPrincipal(ctx, q, tenantID, userID)
}
