package access

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// Groups lists the groups (teams) the caller may see, by name; the
// departments above them are Allocation.Departments'.
func (s *Access) Groups(ctx context.Context) ([]*model.Group, error) {
	e, err := s.k.Estate(ctx)
	if err != nil {
		return nil, err
	}
	var gs []*model.Group
	for _, g := range e.Groups {
		if !g.IsDepartment() {
			gs = append(gs, g)
		}
	}
	sort.Slice(gs, func(i, j int) bool { return gs[i].Name < gs[j].Name })
	return gs, nil
}

// GroupMembers lists a group's memberships, for admins and its members.
func (s *Access) GroupMembers(ctx context.Context, groupRef string) ([]*model.Membership, error) {
	e, err := s.k.Estate(ctx)
	if err != nil {
		return nil, err
	}
	g, err := kernel.FindGroup(e, groupRef)
	if err != nil {
		return nil, err
	}
	ms, err := s.k.Store.ListMembershipsByGroup(ctx, g.TenantID, g.ID)
	return ms, s.k.Internal(ctx, err)
}

// UserMemberships lists the groups of a user the caller may see, keeping
// only the groups the caller may see too.
func (s *Access) UserMemberships(ctx context.Context, userID string) ([]*model.Membership, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if ok, err := s.k.SeesUser(ctx, p, userID); err != nil || !ok {
		return nil, s.k.Internal(ctx, err)
	}
	ms, err := s.k.Store.ListMembershipsByUser(ctx, p.TenantID, userID)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	out := ms[:0]
	for _, m := range ms {
		if kernel.SeesGroup(p, m.GroupID) || userID == p.UserID {
			out = append(out, m)
		}
	}
	return out, nil
}

// SetGroupMember puts a user in a group with a role, or changes their role.
// Admins may do this for any group; a group lead for their own group, and
// only to add members (not leads).
func (s *Access) SetGroupMember(ctx context.Context, groupRef, userRef string, role model.GroupRole) (*model.Membership, error) {
	return kernel.Run(ctx, s.k, kernel.Op[*model.Membership]{
		Name: "setGroupMember", Right: kernel.RightRead, What: "change groups' members",
		Body: func(t *kernel.Txn) (*model.Membership, kernel.Audit, error) {
			u, err := kernel.FindUser(ctx, t.Q, t.P.TenantID, userRef)
			if err != nil {
				return nil, kernel.Audit{}, err
			}
			return s.putMemberChecked(t, groupRef, u, role)
		},
	})
}

// putMemberChecked puts u in a group with a role when the caller of t may,
// and returns the membership and its audit entry.
func (s *Access) putMemberChecked(t *kernel.Txn, groupRef string, u *model.User, role model.GroupRole) (*model.Membership, kernel.Audit, error) {
	p := t.P
	if role == "" {
		role = model.GroupRoleMember
	}
	if !role.Valid() {
		return nil, kernel.Audit{}, kernel.Invalid("group role %q is not known: use lead or member", role)
	}
	g, err := managedGroup(t, groupRef)
	if err != nil {
		return nil, kernel.Audit{}, err
	}
	if role == model.GroupRoleLead && !p.IsAdmin() {
		return nil, kernel.Audit{}, kernel.Forbidden("only a tenant admin can make a group lead")
	}
	if !p.IsAdmin() {
		lead, err := kernel.LeadOf(t.Ctx, t.Q, p.TenantID, g.ID, u.ID)
		if err != nil {
			return nil, kernel.Audit{}, err
		}
		if lead && u.ID != p.UserID {
			return nil, kernel.Audit{}, kernel.Forbidden("%s leads %s: only a tenant admin can change a lead's role", u.Name, g.Name)
		}
	}
	m := &model.Membership{TenantID: p.TenantID, GroupID: g.ID, UserID: u.ID, Role: role, CreatedAt: t.Now}
	if err := t.Q.PutMembership(t.Ctx, m); err != nil {
		return nil, kernel.Audit{}, err
	}
	return m, kernel.Audit{Action: "group.member_set", Kind: "group", ID: g.ID, Name: g.Name, GroupID: g.ID,
		Detail: fmt.Sprintf("%s is %s of %s", u.Name, role, g.Name)}, nil
}

// RemoveGroupMember takes a user out of a group.
func (s *Access) RemoveGroupMember(ctx context.Context, groupRef, userRef string) error {
	_, err := kernel.Run(ctx, s.k, kernel.Op[struct{}]{
		Name: "removeGroupMember", Right: kernel.RightRead, What: "change groups' members",
		Body: func(t *kernel.Txn) (struct{}, kernel.Audit, error) {
			p := t.P
			g, err := managedGroup(t, groupRef)
			if err != nil {
				return struct{}{}, kernel.Audit{}, err
			}
			u, err := kernel.FindUser(ctx, t.Q, p.TenantID, userRef)
			if err != nil {
				return struct{}{}, kernel.Audit{}, err
			}
			if !p.IsAdmin() && u.ID != p.UserID {
				lead, err := kernel.LeadOf(ctx, t.Q, p.TenantID, g.ID, u.ID)
				if err != nil {
					return struct{}{}, kernel.Audit{}, err
				}
				if lead {
					return struct{}{}, kernel.Audit{}, kernel.Forbidden("%s leads %s: only a tenant admin can remove a lead", u.Name, g.Name)
				}
			}
			if err := t.Q.DeleteMembership(ctx, p.TenantID, g.ID, u.ID); errors.Is(err, store.ErrNotFound) {
				return struct{}{}, kernel.Audit{}, kernel.NotFound("%s is not a member of %s", u.Name, g.Name)
			} else if err != nil {
				return struct{}{}, kernel.Audit{}, err
			}
			return struct{}{}, kernel.Audit{Action: "group.member_removed", Kind: "group", ID: g.ID, Name: g.Name, GroupID: g.ID,
				Detail: fmt.Sprintf("%s left %s", u.Name, g.Name)}, nil
		},
	})
	return err
}

// managedGroup finds, in the transaction, a group by id or name that the
// caller may see and whose members the caller may change.
func managedGroup(t *kernel.Txn, ref string) (*model.Group, error) {
	p := t.P
	g, err := t.Q.GetGroup(t.Ctx, p.TenantID, ref)
	if errors.Is(err, store.ErrNotFound) {
		g, err = t.Q.GetGroupByName(t.Ctx, p.TenantID, ref)
	}
	if errors.Is(err, store.ErrNotFound) || (err == nil && !kernel.SeesGroup(p, g.ID)) {
		return nil, kernel.NotFound("no group %s", kernel.Quote(ref))
	}
	if err != nil {
		return nil, err
	}
	if !kernel.ManagesGroup(p, g.ID) {
		return nil, kernel.Forbidden("only a tenant admin or a lead of group %s can change its members", g.Name)
	}
	return g, nil
}
