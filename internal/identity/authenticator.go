package identity

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"strconv"
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

// Audit actions written by SSO sign-in.
const (
	AuditUserProvisioned  = "user.provisioned"
	AuditUserGroupsSynced = "user.groups_synced"
)

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
// groups and the user's disabled flag are always read fresh from the store,
// so revoking, disabling or removing a membership takes effect on the next
// request, not when a token expires.
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

func (a *Authenticator) authenticateToken(ctx context.Context, token string) (*Principal, error) {
	claims, err := a.signer.Verify(token, a.now())
	if err != nil {
		return nil, err
	}
	p, err := loadPrincipal(ctx, a.st, claims.TenantID, claims.Subject)
	if err != nil {
		return nil, err
	}
	p.Method = MethodToken
	p.CredentialID = claims.ID
	p.ProjectID = claims.ProjectID
	return p, nil
}

func (a *Authenticator) authenticateOIDC(ctx context.Context, token string) (*Principal, error) {
	now := a.now()
	id, err := a.oidc.Verify(ctx, token, now)
	if err != nil {
		return nil, err
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
		user, err = a.provision(ctx, tenant, id, now)
		if err != nil {
			return nil, err
		}
	case err != nil:
		return nil, fmt.Errorf("identity: look up SSO user: %w", err)
	}
	if user.Disabled {
		return nil, unauthenticated(reasonUserDisabled)
	}
	if err := a.syncGroups(ctx, tenant.ID, user, id.Groups, now); err != nil {
		return nil, err
	}
	p, err := loadPrincipal(ctx, a.st, tenant.ID, user.ID)
	if err != nil {
		return nil, err
	}
	p.Method = MethodOIDC
	p.CredentialID = id.TokenID
	return p, nil
}

// provision creates the local user for a first SSO sign-in. The user is
// always new: an SSO identity is never linked to an existing local user by
// name, since that would let whoever controls a matching account at the
// identity provider take over a local admin. If the name is taken, a
// numeric suffix makes it unique.
func (a *Authenticator) provision(ctx context.Context, tenant *model.Tenant, id *OIDCIdentity, now time.Time) (*model.User, error) {
	var user *model.User
	// Two first sign-ins of one person (or two people whose names sanitise
	// alike) can race; the loser of the race sees a conflict and retries,
	// then finds the winner's user or picks the next free name.
	for attempt := 0; ; attempt++ {
		err := a.st.InTx(ctx, func(q store.Queries) error {
			existing, err := q.GetUserByExternalID(ctx, tenant.ID, id.ExternalID())
			if err == nil {
				user = existing
				return nil
			}
			if !errors.Is(err, store.ErrNotFound) {
				return err
			}
			name, err := freeUserName(ctx, q, tenant.ID, sanitizeUserName(id.Username))
			if err != nil {
				return err
			}
			u := &model.User{
				ID:          model.NewID(),
				TenantID:    tenant.ID,
				Name:        name,
				DisplayName: id.DisplayName,
				Email:       id.Email,
				Role:        model.RoleMember,
				ExternalID:  id.ExternalID(),
				CreatedAt:   now,
				UpdatedAt:   now,
			}
			if err := q.CreateUser(ctx, u); err != nil {
				return err
			}
			if err := q.InsertAudit(ctx, &model.AuditEntry{
				ID:         model.NewID(),
				TenantID:   tenant.ID,
				At:         now,
				ActorID:    u.ID,
				ActorName:  u.Name,
				Channel:    string(ChannelSSO),
				Action:     AuditUserProvisioned,
				ObjectKind: "user",
				ObjectID:   u.ID,
				ObjectName: u.Name,
				Detail:     fmt.Sprintf("created at first sign-in through %s", id.Issuer),
			}); err != nil {
				return err
			}
			user = u
			return nil
		})
		if err == nil {
			return user, nil
		}
		if !errors.Is(err, store.ErrConflict) || attempt >= 2 {
			return nil, fmt.Errorf("identity: provision SSO user: %w", err)
		}
	}
}

// sanitizeUserName turns an identity provider's username into a Klique user
// name of [a-z0-9._-]: lower case, the local part of an e-mail address,
// other characters replaced by '-', at most 64 characters.
func sanitizeUserName(s string) string {
	if at := strings.IndexByte(s, '@'); at > 0 {
		s = s[:at]
	}
	s = strings.ToLower(s)
	var b strings.Builder
	dash := false
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
		if !ok {
			r = '-'
		}
		if r == '-' {
			if dash {
				continue
			}
			dash = true
		} else {
			dash = false
		}
		b.WriteRune(r)
		if b.Len() >= 64 {
			break
		}
	}
	name := strings.Trim(b.String(), "-._")
	if name == "" {
		return "user"
	}
	return name
}

// freeUserName returns base, or base-2, base-3, ... whichever is not taken.
func freeUserName(ctx context.Context, q store.Queries, tenantID, base string) (string, error) {
	for i := 1; i <= 1000; i++ {
		name := base
		if i > 1 {
			name = base + "-" + strconv.Itoa(i)
		}
		_, err := q.GetUserByName(ctx, tenantID, name)
		if errors.Is(err, store.ErrNotFound) {
			return name, nil
		}
		if err != nil {
			return "", err
		}
	}
	suffix, err := randomID()
	if err != nil {
		return "", err
	}
	return base + "-" + suffix[:8], nil
}

// groupChange is what an SSO sign-in changes in a user's memberships.
type groupChange struct {
	join  []*model.Group
	leave []*model.Membership
	names map[string]string // group id → name, for the audit detail
}

func (c *groupChange) empty() bool { return len(c.join) == 0 && len(c.leave) == 0 }

// planGroups compares the user's memberships with the groups named in the
// claim. Named groups that do not exist in the tenant are ignored: the
// identity provider may list groups Klique does not know about, and SSO
// never creates groups.
func planGroups(ctx context.Context, q store.Queries, tenantID, userID string, claimed []string) (*groupChange, error) {
	groups, err := q.ListGroups(ctx, tenantID, store.Page{})
	if err != nil {
		return nil, err
	}
	byName := make(map[string]*model.Group, len(groups))
	names := make(map[string]string, len(groups))
	for _, g := range groups {
		byName[g.Name] = g
		names[g.ID] = g.Name
	}
	want := map[string]*model.Group{}
	for _, n := range claimed {
		if g, ok := byName[n]; ok {
			want[g.ID] = g
		}
	}
	current, err := q.ListMembershipsByUser(ctx, tenantID, userID)
	if err != nil {
		return nil, err
	}
	c := &groupChange{names: names}
	have := map[string]bool{}
	for _, m := range current {
		have[m.GroupID] = true
		if want[m.GroupID] == nil {
			c.leave = append(c.leave, m)
		}
	}
	for id, g := range want {
		if !have[id] {
			c.join = append(c.join, g)
		}
	}
	slices.SortFunc(c.join, func(x, y *model.Group) int { return strings.Compare(x.Name, y.Name) })
	return c, nil
}

// syncGroups mirrors the groups claim into the memberships of an SSO user:
// it joins the named groups that exist (as member; an existing lead stays
// lead) and leaves the groups no longer named. It writes only when
// something differs, and then in one transaction with an audit entry.
func (a *Authenticator) syncGroups(ctx context.Context, tenantID string, user *model.User, claimed []string, now time.Time) error {
	if user.ExternalID == "" {
		return nil // only SSO users follow the identity provider
	}
	plan, err := planGroups(ctx, a.st, tenantID, user.ID, claimed)
	if err != nil {
		return fmt.Errorf("identity: plan SSO group sync: %w", err)
	}
	if plan.empty() {
		return nil
	}
	err = a.st.InTx(ctx, func(q store.Queries) error {
		// Plan again inside the transaction, so concurrent sign-ins of the
		// same user apply consistent changes.
		plan, err := planGroups(ctx, q, tenantID, user.ID, claimed)
		if err != nil || plan.empty() {
			return err
		}
		var joined, left []string
		for _, g := range plan.join {
			if err := q.PutMembership(ctx, &model.Membership{
				TenantID: tenantID, GroupID: g.ID, UserID: user.ID, Role: model.GroupRoleMember, CreatedAt: now,
			}); err != nil {
				return err
			}
			joined = append(joined, g.Name)
		}
		for _, m := range plan.leave {
			if err := q.DeleteMembership(ctx, tenantID, m.GroupID, user.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			left = append(left, plan.names[m.GroupID])
		}
		var detail []string
		if len(joined) > 0 {
			detail = append(detail, "joined "+strings.Join(joined, ", "))
		}
		if len(left) > 0 {
			detail = append(detail, "left "+strings.Join(left, ", "))
		}
		return q.InsertAudit(ctx, &model.AuditEntry{
			ID:         model.NewID(),
			TenantID:   tenantID,
			At:         now,
			ActorID:    user.ID,
			ActorName:  user.Name,
			Channel:    string(ChannelSSO),
			Action:     AuditUserGroupsSynced,
			ObjectKind: "user",
			ObjectID:   user.ID,
			ObjectName: user.Name,
			Detail:     strings.Join(detail, "; ") + " (from the identity provider's groups claim)",
		})
	})
	if err != nil {
		return fmt.Errorf("identity: sync SSO groups: %w", err)
	}
	return nil
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
