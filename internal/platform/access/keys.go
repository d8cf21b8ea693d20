package access

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/estate/basis"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// newAPIKey makes a key record; given is an operator-chosen secret or "".
func newAPIKey(tenantID, userID, name, projectID string, expires *time.Time, given string, now time.Time) (*model.APIKey, string, error) {
	secret, prefix, hash := given, "", []byte(nil)
	if given == "" {
		var err error
		if secret, prefix, hash, err = identity.NewAPIKey(); err != nil {
			return nil, "", err
		}
	} else {
		prefix, hash = given[:min(10, len(given))], identity.HashAPIKey(given)
	}
	return &model.APIKey{ID: model.NewID(), TenantID: tenantID, UserID: userID, Name: name, Prefix: prefix, Hash: hash,
		ProjectID: projectID, CreatedAt: now, ExpiresAt: expires}, secret, nil
}

// APIKeyInput creates an API key.
type APIKeyInput struct {
	Name string
	// User is whose key it is: the caller when empty; another user only for
	// admins (service users for automation).
	User string
	// Project scopes the key to one project.
	Project   string
	ExpiresAt *time.Time
}

// CreateAPIKey makes an API key and returns it with its secret, which is
// shown this once and never again.
func (s *Access) CreateAPIKey(ctx context.Context, in APIKeyInput) (*model.APIKey, string, error) {
	name := strings.TrimSpace(in.Name)
	if name == "" {
		name = "api key"
	}
	var secret string
	key, err := kernel.Run(ctx, s.k, kernel.Op[*model.APIKey]{
		Name: "createAPIKey", Right: kernel.RightRead, What: "create API keys",
		Check: func(p *identity.Principal) error {
			if p.ProjectID != "" {
				return kernel.Forbidden("a credential scoped to a project cannot create API keys; use an unscoped key")
			}
			if err := basis.CheckName(name); err != nil {
				return kernel.Invalid("API key %v", err)
			}
			return nil
		},
		Body: func(t *kernel.Txn) (*model.APIKey, kernel.Audit, error) {
			p := t.P
			owner := p.UserID
			ownerName := p.UserName
			if in.User != "" {
				u, err := kernel.FindUser(ctx, t.Q, p.TenantID, in.User)
				if err != nil {
					return nil, kernel.Audit{}, err
				}
				if u.ID != p.UserID && !p.IsAdmin() {
					return nil, kernel.Audit{}, kernel.Forbidden("only a tenant admin can create API keys for other users")
				}
				if u.Disabled {
					return nil, kernel.Audit{}, kernel.Invalid("user %s is disabled", u.Name)
				}
				owner, ownerName = u.ID, u.Name
			}
			projectID := ""
			if in.Project != "" {
				e, err := kernel.LoadEstate(ctx, t.Q, p.TenantID)
				if err != nil {
					return nil, kernel.Audit{}, err
				}
				pr, err := kernel.FindProject(e, in.Project)
				if err == nil && !kernel.UsesProject(p, pr) {
					// A project the caller may not use is one they may not
					// know of either.
					err = kernel.NotFound("no project %s", kernel.Quote(in.Project))
				}
				if err != nil {
					return nil, kernel.Audit{}, err
				}
				if pr.GroupID != "" && owner != p.UserID {
					if ok, err := kernel.UserInGroup(ctx, t.Q, p.TenantID, owner, pr.GroupID); err != nil {
						return nil, kernel.Audit{}, err
					} else if !ok {
						return nil, kernel.Audit{}, kernel.Invalid("user %s is not in group %s, which project %s belongs to; a key scoped to it would be of no use", ownerName, e.GroupName(pr.GroupID), kernel.Quote(pr.Name))
					}
				}
				projectID = pr.ID
			}
			if in.ExpiresAt != nil && !in.ExpiresAt.After(t.Now) {
				return nil, kernel.Audit{}, kernel.Invalid("the expiry time %s is in the past", in.ExpiresAt.Format(time.RFC3339))
			}
			key, sec, err := newAPIKey(p.TenantID, owner, name, projectID, in.ExpiresAt, "", t.Now)
			if err != nil {
				return nil, kernel.Audit{}, err
			}
			if err := t.Q.CreateAPIKey(ctx, key); err != nil {
				return nil, kernel.Audit{}, err
			}
			secret = sec
			return key, kernel.Audit{Action: "api_key.created", Kind: "api_key", ID: key.ID, Name: key.Name,
				Detail: fmt.Sprintf("key %s… for %s", key.Prefix, ownerName)}, nil
		},
	})
	if err != nil {
		return nil, "", err
	}
	return key, secret, nil
}

// APIKeys lists the caller's keys, or a user's keys for admins.
func (s *Access) APIKeys(ctx context.Context, userRef string) ([]*model.APIKey, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	userID := p.UserID
	if userRef != "" {
		u, err := kernel.FindUser(ctx, s.k.Store, p.TenantID, userRef)
		if err != nil {
			return nil, s.k.Internal(ctx, err)
		}
		if u.ID != p.UserID && !p.IsAdmin() {
			return nil, kernel.Forbidden("only a tenant admin can list other users' API keys")
		}
		userID = u.ID
	}
	ks, err := s.k.Store.ListAPIKeys(ctx, p.TenantID, userID)
	return ks, s.k.Internal(ctx, err)
}

// RevokeAPIKey revokes a key of the caller's (or any, for admins). It stops
// working at once. A key revoked already is answered as it is.
func (s *Access) RevokeAPIKey(ctx context.Context, id string) (*model.APIKey, error) {
	return kernel.Run(ctx, s.k, kernel.Op[*model.APIKey]{
		Name: "revokeAPIKey", Right: kernel.RightRead, What: "revoke API keys",
		Check: func(p *identity.Principal) error {
			if p.ProjectID != "" {
				return kernel.Forbidden("a credential scoped to a project cannot revoke API keys; use an unscoped key")
			}
			return nil
		},
		Body: func(t *kernel.Txn) (*model.APIKey, kernel.Audit, error) {
			p := t.P
			k, err := t.Q.GetAPIKey(ctx, p.TenantID, id)
			if errors.Is(err, store.ErrNotFound) || (err == nil && k.UserID != p.UserID && !p.IsAdmin()) {
				return nil, kernel.Audit{}, kernel.NotFound("no API key %s", kernel.Quote(id))
			}
			if err != nil {
				return nil, kernel.Audit{}, err
			}
			if k.RevokedAt != nil {
				return k, kernel.Audit{}, kernel.ErrRollback
			}
			if err := t.Q.RevokeAPIKey(ctx, p.TenantID, k.ID, t.Now); err != nil {
				return nil, kernel.Audit{}, err
			}
			now := t.Now
			k.RevokedAt = &now
			return k, kernel.Audit{Action: "api_key.revoked", Kind: "api_key", ID: k.ID, Name: k.Name, Detail: "revoked key " + k.Prefix + "…"}, nil
		},
	})
}

// IssueToken exchanges the caller's credential for a short-lived access
// token (what `klique login` does).
func (s *Access) IssueToken(ctx context.Context) (string, time.Time, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return "", time.Time{}, err
	}
	if p.Method == identity.MethodToken {
		return "", time.Time{}, kernel.Forbidden("an access token cannot be exchanged for another one; sign in again with your API key or through SSO")
	}
	if s.auth == nil {
		return "", time.Time{}, errors.New("no authenticator configured")
	}
	tok, exp, err := s.auth.IssueToken(p)
	return tok, exp, s.k.Internal(ctx, err)
}
