// Package access is the access domain of the platform service: tenants,
// users and their groups, API keys and access tokens, the first start,
// the vaults of secrets, the audit trail and the record of agents' tool
// calls, and the users and memberships that sign-in through an identity
// provider creates.
package access

import (
	"context"

	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
)

// Access is the access domain.
type Access struct {
	k    *kernel.Kernel
	auth *identity.Authenticator
}

// New returns the access domain over a kernel; auth issues access tokens
// and drops its cached checks after every identity change, and the
// domain creates and updates the users who sign in through SSO.
func New(k *kernel.Kernel, auth *identity.Authenticator) *Access {
	s := &Access{k: k, auth: auth}
	if auth != nil {
		k.OnIdentityChange(auth.Invalidate)
		auth.SetProvisioner(s)
	}
	return s
}

// User returns a user the caller may see: themselves, members of their
// groups, or anyone for admins.
func (s *Access) User(ctx context.Context, ref string) (*model.User, error) {
	return s.k.User(ctx, ref)
}
