package access

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// Sign-in through an identity provider (OIDC). The authenticator verifies
// the identity token; the access domain is its identity.Provisioner: it
// creates the local user at a first sign-in and mirrors the groups claim
// into the user's memberships, each change audited (on the sso channel,
// with the user as actor) and published like any other change to
// identities.

// Audit actions written by SSO sign-in.
const (
	AuditUserProvisioned  = "user.provisioned"
	AuditUserGroupsSynced = "user.groups_synced"
)

// ssoActor is the principal of an SSO user acting on its own record.
func ssoActor(u *model.User) *identity.Principal {
	return &identity.Principal{TenantID: u.TenantID, UserID: u.ID, UserName: u.Name}
}

// ProvisionSSOUser creates the local user for a first SSO sign-in. The user
// is always new: an SSO identity is never linked to an existing local user
// by name, since that would let whoever controls a matching account at the
// identity provider take over a local admin. If the name is taken, a
// numeric suffix makes it unique.
func (s *Access) ProvisionSSOUser(ctx context.Context, tenant *model.Tenant, id *identity.OIDCIdentity, now time.Time) (*model.User, error) {
	ctx = identity.WithChannel(ctx, identity.ChannelSSO)
	// Two first sign-ins of one person (or two people whose names sanitise
	// alike) can race; the loser of the race sees a conflict and retries,
	// then finds the winner's user or picks the next free name.
	for attempt := 0; ; attempt++ {
		user, err := kernel.RunAs(ctx, s.k, kernel.System(tenant.ID, "sso"), kernel.Op[*model.User]{
			Name: "provisionSSOUser",
			Body: func(t *kernel.Txn) (*model.User, kernel.Audit, error) { return provisionSSOUser(t, tenant, id, now) },
		})
		if err == nil {
			return user, nil
		}
		if !errors.Is(err, store.ErrConflict) || attempt >= 2 {
			return nil, fmt.Errorf("provision SSO user: %w", err)
		}
	}
}

// provisionSSOUser is ProvisionSSOUser's change: the user of the identity,
// as actor of its own creation; a user made already (by a sign-in that
// raced this one) is answered as it is, writing nothing.
func provisionSSOUser(t *kernel.Txn, tenant *model.Tenant, id *identity.OIDCIdentity, now time.Time) (*model.User, kernel.Audit, error) {
	ctx := t.Ctx
	t.Now = now
	existing, err := t.Q.GetUserByExternalID(ctx, tenant.ID, id.ExternalID())
	if err == nil {
		return existing, kernel.Audit{}, kernel.ErrRollback
	}
	if !errors.Is(err, store.ErrNotFound) {
		return nil, kernel.Audit{}, err
	}
	name, err := freeUserName(ctx, t.Q, tenant.ID, sanitizeUserName(id.Username))
	if err != nil {
		return nil, kernel.Audit{}, err
	}
	u := &model.User{ID: model.NewID(), TenantID: tenant.ID, Name: name, DisplayName: id.DisplayName,
		Email: id.Email, Role: model.RoleMember, ExternalID: id.ExternalID(), CreatedAt: now, UpdatedAt: now}
	if err := t.Q.CreateUser(ctx, u); err != nil {
		return nil, kernel.Audit{}, err
	}
	t.P = ssoActor(u)
	return u, kernel.Audit{Action: AuditUserProvisioned, Kind: "user", ID: u.ID, Name: u.Name,
		Detail: fmt.Sprintf("created at first sign-in through %s", id.Issuer)}, nil
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
	return base + "-" + strings.ReplaceAll(model.NewID(), "-", "")[:8], nil
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
	groups, err := q.ListGroups(ctx, tenantID, model.Page{})
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

// SyncSSOGroups mirrors the groups claim into the memberships of an SSO
// user: it joins the named groups that exist (as member; an existing lead
// stays lead) and leaves the groups no longer named. It writes only when
// something differs, and then in one transaction with an audit entry.
func (s *Access) SyncSSOGroups(ctx context.Context, tenantID string, user *model.User, claimed []string, now time.Time) error {
	plan, err := planGroups(ctx, s.k.Store, tenantID, user.ID, claimed)
	if err != nil {
		return fmt.Errorf("plan SSO group sync: %w", err)
	}
	if plan.empty() {
		return nil
	}
	ctx = identity.WithChannel(ctx, identity.ChannelSSO)
	_, err = kernel.RunAs(ctx, s.k, ssoActor(user), kernel.Op[struct{}]{
		Name: "syncSSOGroups",
		Body: func(t *kernel.Txn) (struct{}, kernel.Audit, error) {
			a, err := syncSSOGroups(t, tenantID, user, claimed, now)
			return struct{}{}, a, err
		},
	})
	if err != nil {
		return fmt.Errorf("sync SSO groups: %w", err)
	}
	return nil
}

// syncSSOGroups is SyncSSOGroups's change: the memberships the claim
// names and no others, with one audit entry; it writes nothing when they
// are so already (a concurrent sign-in of the same user synced them).
func syncSSOGroups(t *kernel.Txn, tenantID string, user *model.User, claimed []string, now time.Time) (kernel.Audit, error) {
	ctx := t.Ctx
	t.Now = now
	// Plan again inside the transaction, so concurrent sign-ins of the
	// same user apply consistent changes.
	plan, err := planGroups(ctx, t.Q, tenantID, user.ID, claimed)
	if err != nil {
		return kernel.Audit{}, err
	}
	if plan.empty() {
		return kernel.Audit{}, kernel.ErrRollback
	}
	var joined, left []string
	for _, g := range plan.join {
		if err := t.Q.PutMembership(ctx, &model.Membership{
			TenantID: tenantID, GroupID: g.ID, UserID: user.ID, Role: model.GroupRoleMember, CreatedAt: now,
		}); err != nil {
			return kernel.Audit{}, err
		}
		joined = append(joined, g.Name)
	}
	for _, m := range plan.leave {
		if err := t.Q.DeleteMembership(ctx, tenantID, m.GroupID, user.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
			return kernel.Audit{}, err
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
	return kernel.Audit{Action: AuditUserGroupsSynced, Kind: "user", ID: user.ID, Name: user.Name,
		Detail: strings.Join(detail, "; ") + " (from the identity provider's groups claim)"}, nil
}
