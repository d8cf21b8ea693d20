package identity

import (
	"context"

	"github.com/klique-ai/klique/internal/store"
)

// OwnerPrincipal is a user as the control plane acts for them, with no
// credential: the owner of a study, pipeline or schedule whose work a
// controller starts. It is read as a request's principal is (the user,
// their tenant and memberships, now), so work started for an owner who
// was disabled or removed from a group is refused as their own request
// would be; a missing or disabled user is an unauthenticated error.
func OwnerPrincipal(ctx context.Context, q store.Queries, tenantID, userID string) (*Principal, error) {
	return loadPrincipal(ctx, q, tenantID, userID)
}
