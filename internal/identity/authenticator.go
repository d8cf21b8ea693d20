package identity

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
)

// touchInterval is the least time between two last-used updates of one API
// key. Last-used is for people ("was this key used this month?"); a key used
// a hundred times a second must not cost a hundred writes a second.
const touchInterval = time.Minute

// maxTouchEntries bounds the last-touched map; beyond it, entries older
// than touchInterval are dropped.
const maxTouchEntries = 10000

// Provisioner creates and updates the users who sign in through the
// identity provider: the user at a first sign-in, and the user's groups
// from the groups claim at every sign-in. The platform's access domain is
// the provisioner, so that these changes are audited and published like
// every other change to identities.
type Provisioner interface {
	// ProvisionSSOUser returns the local user of an SSO identity, creating
	// it at its first sign-in.
	ProvisionSSOUser(ctx context.Context, tenant *model.Tenant, id *OIDCIdentity, now time.Time) (*model.User, error)
	// SyncSSOGroups mirrors the groups claim into the user's memberships.
	SyncSSOGroups(ctx context.Context, tenantID string, user *model.User, claimed []string, now time.Time) error
}

// Authenticator turns a credential into a Principal. It is the one place
// where that happens; everything else reads the principal from the context.
type Authenticator struct {
	st     store.Store
	signer *Signer
	oidc   *OIDCVerifier
	now    func() time.Time

	mu      sync.Mutex
	touched map[string]time.Time // API key id → last TouchAPIKey
	cache   authCache
	prov    Provisioner
}

// SetProvisioner sets who creates and updates the users of SSO sign-ins.
// Without one, an identity token of the configured issuer is refused.
func (a *Authenticator) SetProvisioner(p Provisioner) {
	a.mu.Lock()
	a.prov = p
	a.mu.Unlock()
}

// NewAuthenticator returns an authenticator over st. signer issues and
// verifies Klique access tokens; oidc may be nil when no external issuer is
// configured; now may be nil for time.Now.
func NewAuthenticator(st store.Store, signer *Signer, oidc *OIDCVerifier, now func() time.Time) *Authenticator {
	if now == nil {
		now = time.Now
	}
	return &Authenticator{st: st, signer: signer, oidc: oidc, now: now, touched: map[string]time.Time{}}
}

// OIDC returns the verifier of the configured identity provider, or nil.
func (a *Authenticator) OIDC() *OIDCVerifier { return a.oidc }

// IssueToken issues an access token for p with the authenticator's signer
// and clock.
func (a *Authenticator) IssueToken(p *Principal) (string, time.Time, error) {
	if a.signer == nil {
		return "", time.Time{}, errors.New("identity: no token signer configured")
	}
	return a.signer.Issue(p, a.now())
}

// Authenticate identifies the holder of credential: an API key, a Klique
// access token, or an identity token of the configured OIDC issuer. Role,
// groups, the user's disabled flag and the API key an access token was
// issued from are always read fresh from the store, so revoking,
// disabling or removing a membership takes effect on the next request, not
// when a token expires.
//
// Errors that mean the credential identifies no one wrap ErrUnauthenticated
// and carry a short reason that never includes the credential. Store or
// identity-provider failures are returned as other errors.
func (a *Authenticator) Authenticate(ctx context.Context, credential string) (*Principal, error) {
	credential = strings.TrimSpace(credential)
	switch {
	case credential == "":
		return nil, unauthenticated(reasonMissing)
	case len(credential) > maxCredentialLen:
		return nil, unauthenticated(reasonTooLong)
	case strings.HasPrefix(credential, APIKeyPrefix) || !looksLikeJWT(credential):
		return a.authenticateAPIKey(ctx, credential)
	}

	// Route by the unverified issuer only; the chosen verifier then checks
	// everything, the issuer included, against its own keys.
	unverified := jwt.MapClaims{}
	if _, _, err := jwt.NewParser().ParseUnverified(credential, unverified); err != nil {
		return nil, unauthenticated(reasonMalformed)
	}
	iss, _ := unverified["iss"].(string)
	switch {
	case a.signer != nil && iss == a.signer.Issuer():
		return a.authenticateToken(ctx, credential)
	case a.oidc != nil && iss == a.oidc.Issuer():
		return a.authenticateOIDC(ctx, credential)
	}
	return nil, unauthenticated(reasonUnknown)
}

func (a *Authenticator) authenticateAPIKey(ctx context.Context, secret string) (*Principal, error) {
	hash := HashAPIKey(secret)
	key, err := a.st.GetAPIKeyByHash(ctx, hash)
	if errors.Is(err, store.ErrNotFound) {
		return nil, unauthenticated(reasonUnknown)
	}
	if err != nil {
		return nil, fmt.Errorf("identity: look up API key: %w", err)
	}
	// The store found the key by hash; comparing again in constant time
	// guards against a driver that matched loosely.
	if subtle.ConstantTimeCompare(key.Hash, hash) != 1 {
		return nil, unauthenticated(reasonUnknown)
	}
	now := a.now()
	if key.RevokedAt != nil {
		return nil, unauthenticated(reasonKeyRevoked)
	}
	if !key.Active(now) {
		return nil, unauthenticated(reasonKeyExpired)
	}
	p, err := loadPrincipal(ctx, a.st, key.TenantID, key.UserID)
	if err != nil {
		return nil, err
	}
	p.Method = MethodAPIKey
	p.CredentialID = key.ID
	p.ProjectID = key.ProjectID
	a.touch(ctx, key.ID, now)
	return p, nil
}

// touch records that a key was used, at most once per touchInterval per key
// and process. It is best-effort: failing to record last-used must not fail
// the request.
func (a *Authenticator) touch(ctx context.Context, keyID string, now time.Time) {
	a.mu.Lock()
	last, ok := a.touched[keyID]
	if ok && now.Sub(last) < touchInterval && !now.Before(last) {
		a.mu.Unlock()
		return
	}
	if len(a.touched) >= maxTouchEntries {
		for id, t := range a.touched {
			if now.Sub(t) >= touchInterval {
				delete(a.touched, id)
			}
		}
	}
	a.touched[keyID] = now
	a.mu.Unlock()
	_ = a.st.TouchAPIKey(ctx, keyID, now)
}

// authenticateToken checks a Klique access token, and then, on every use,
// what it was issued from: the API key must still exist, be unrevoked and
// unexpired and belong to the token's user with the token's project scope;
// the user must be enabled, the tenant must stand and a project scope must
// still be open to the user. So revoking a key, disabling its user or
// taking the user out of the group of its project ends the token at once,
// not when it expires.
func (a *Authenticator) authenticateToken(ctx context.Context, token string) (*Principal, error) {
	now := a.now()
	claims, err := a.signer.Verify(token, now)
	if err != nil {
		return nil, err
	}
	if claims.Via == MethodAPIKey {
		key, err := a.st.GetAPIKey(ctx, claims.TenantID, claims.KeyID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil, unauthenticated(reasonTokenKeyGone)
		case err != nil:
			return nil, fmt.Errorf("identity: look up the API key of an access token: %w", err)
		case key.UserID != claims.Subject || key.ProjectID != claims.ProjectID:
			return nil, unauthenticated(reasonTokenKeyGone)
		case key.RevokedAt != nil:
			return nil, unauthenticated(reasonTokenKeyRevoked)
		case !key.Active(now):
			return nil, unauthenticated(reasonTokenKeyExpired)
		}
	}
	p, err := loadPrincipal(ctx, a.st, claims.TenantID, claims.Subject)
	if err != nil {
		return nil, err
	}
	p.Method = MethodToken
	p.CredentialID = claims.ID
	p.ProjectID = claims.ProjectID
	if err := checkScope(ctx, a.st, p); err != nil {
		return nil, err
	}
	return p, nil
}

// checkScope refuses an access token scoped to a project its user may no
// longer use: the project is gone, or it belongs to a group the user has
// left. The token was issued on the strength of that membership and ends
// with it, as it ends with its key. (The API key itself stays: the
// platform refuses what it tries with a 403 that says why, and it works
// again if the user rejoins the group.) The rule is the platform's
// (kernel.UsesProject), read here with the principal just loaded.
func checkScope(ctx context.Context, q store.Queries, p *Principal) error {
	if p.ProjectID == "" {
		return nil
	}
	pr, err := q.GetProject(ctx, p.TenantID, p.ProjectID)
	if errors.Is(err, store.ErrNotFound) {
		return unauthenticated(reasonScopeLost)
	}
	if err != nil {
		return fmt.Errorf("identity: look up the project of a scoped credential: %w", err)
	}
	if !p.IsAdmin() && pr.GroupID != "" && !p.InGroup(pr.GroupID) {
		return unauthenticated(reasonScopeLost)
	}
	return nil
}

func (a *Authenticator) authenticateOIDC(ctx context.Context, token string) (*Principal, error) {
	now := a.now()
	id, err := a.oidc.Verify(ctx, token, now)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	prov := a.prov
	a.mu.Unlock()
	if prov == nil {
		return nil, errors.New("identity: SSO sign-in has no provisioner")
	}
	cfg := a.oidc.Config()
	tenant, err := a.st.GetTenantByName(ctx, cfg.Tenant)
	if err != nil {
		// A missing SSO tenant is a configuration error of the control
		// plane, not a fault of the person signing in.
		return nil, fmt.Errorf("identity: SSO tenant %q: %w", cfg.Tenant, err)
	}
	user, err := a.st.GetUserByExternalID(ctx, tenant.ID, id.ExternalID())
	switch {
	case errors.Is(err, store.ErrNotFound):
		user, err = prov.ProvisionSSOUser(ctx, tenant, id, now)
		if err != nil {
			return nil, err
		}
	case err != nil:
		return nil, fmt.Errorf("identity: look up SSO user: %w", err)
	}
	if user.Disabled {
		return nil, unauthenticated(reasonUserDisabled)
	}
	if user.ExternalID != "" { // only SSO users follow the identity provider
		if err := prov.SyncSSOGroups(ctx, tenant.ID, user, id.Groups, now); err != nil {
			return nil, err
		}
	}
	p, err := loadPrincipal(ctx, a.st, tenant.ID, user.ID)
	if err != nil {
		return nil, err
	}
	p.Method = MethodOIDC
	p.CredentialID = id.TokenID
	return p, nil
}

// LoadPrincipal reads a user as a principal, with the same checks as a
// credential of theirs (a disabled or unknown user is refused with
// ErrUnauthenticated and the reason): what acts for a user when no request
// does, such as a schedule running as its owner.
func LoadPrincipal(ctx context.Context, q store.Queries, tenantID, userID string) (*Principal, error) {
	return loadPrincipal(ctx, q, tenantID, userID)
}

// loadPrincipal reads the user, tenant and memberships behind a credential.
// It runs on every request, so a disabled user or a removed membership
// takes effect at once.
func loadPrincipal(ctx context.Context, q store.Queries, tenantID, userID string) (*Principal, error) {
	user, err := q.GetUser(ctx, tenantID, userID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, unauthenticated(reasonUserUnknown)
	}
	if err != nil {
		return nil, fmt.Errorf("identity: look up user: %w", err)
	}
	if user.TenantID != tenantID {
		return nil, unauthenticated(reasonUserUnknown)
	}
	if user.Disabled {
		return nil, unauthenticated(reasonUserDisabled)
	}
	tenant, err := q.GetTenant(ctx, tenantID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, unauthenticated(reasonUserUnknown)
	}
	if err != nil {
		return nil, fmt.Errorf("identity: look up tenant: %w", err)
	}
	memberships, err := q.ListMembershipsByUser(ctx, tenantID, userID)
	if err != nil {
		return nil, fmt.Errorf("identity: list memberships: %w", err)
	}
	p := &Principal{
		TenantID:    tenant.ID,
		TenantName:  tenant.Name,
		UserID:      user.ID,
		UserName:    user.Name,
		DisplayName: user.DisplayName,
		Role:        user.Role,
		Service:     user.Service,
		Groups:      make([]GroupGrant, 0, len(memberships)),
		// Read with the user, so the rule costs a call nothing.
		DefaultProjectID: user.DefaultProjectID,
	}
	for _, m := range memberships {
		g, err := q.GetGroup(ctx, tenantID, m.GroupID)
		if errors.Is(err, store.ErrNotFound) {
			continue // deleted since the membership was listed
		}
		if err != nil {
			return nil, fmt.Errorf("identity: look up group: %w", err)
		}
		p.Groups = append(p.Groups, GroupGrant{GroupID: g.ID, GroupName: g.Name, Role: m.Role})
	}
	slices.SortFunc(p.Groups, func(x, y GroupGrant) int { return strings.Compare(x.GroupName, y.GroupName) })
	return p, nil
}
