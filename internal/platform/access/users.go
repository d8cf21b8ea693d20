package access

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/klique-ai/klique/internal/estate/basis"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
)

// UserInput creates or changes a user. Groups only on create: membership
// changes go through SetGroupMember.
type UserInput struct {
	Name        *string
	DisplayName *string
	Email       *string
	Role        *model.Role
	Service     *bool
	Disabled    *bool
	Groups      []GroupGrantInput
}

// GroupGrantInput puts a new user in a group.
type GroupGrantInput struct {
	Group string
	Role  model.GroupRole
}

func checkUserName(name string) error {
	if err := basis.CheckName(name); err != nil {
		return kernel.Invalid("user %v", err)
	}
	if strings.ContainsAny(name, " \t/\\@") {
		return kernel.Invalid("user name %q must not hold spaces, '/', '\\' or '@'", name)
	}
	return nil
}

// CreateUser adds a user (or a service user for automation) to the caller's
// tenant, optionally in groups. Its audit entries are the user's creation
// and one per group it joins, each a fact of its own object.
func (s *Access) CreateUser(ctx context.Context, in UserInput) (*model.User, error) {
	var u *model.User
	return kernel.Run(ctx, s.k, kernel.Op[*model.User]{
		Name: "createUser", Right: kernel.RightAdmin, What: "create users",
		Check: func(p *identity.Principal) error {
			if in.Name == nil {
				return kernel.Invalid("a user needs a name")
			}
			u = &model.User{ID: model.NewID(), TenantID: p.TenantID, Name: strings.TrimSpace(*in.Name), Role: model.RoleMember}
			if err := checkUserName(u.Name); err != nil {
				return err
			}
			return applyUser(p, u, in)
		},
		Body: func(t *kernel.Txn) (*model.User, kernel.Audit, error) {
			u.CreatedAt, u.UpdatedAt = t.Now, t.Now
			if _, err := t.Q.GetUserByName(ctx, u.TenantID, u.Name); err == nil {
				return nil, kernel.Audit{}, kernel.Conflict("a user named %s already exists", kernel.Quote(u.Name))
			}
			if err := t.Q.CreateUser(ctx, u); err != nil {
				return nil, kernel.Audit{}, err
			}
			entries := []kernel.Audit{{Action: "user.created", Kind: "user", ID: u.ID, Name: u.Name,
				Detail: fmt.Sprintf("created %s with role %s", u.Name, u.Role)}}
			for _, gi := range in.Groups {
				_, a, err := s.putMemberChecked(t, gi.Group, u, gi.Role)
				if err != nil {
					return nil, kernel.Audit{}, err
				}
				entries = append(entries, a)
			}
			return u, kernel.Entries(entries...), nil
		},
	})
}

func applyUser(p *identity.Principal, u *model.User, in UserInput) error {
	kernel.SetString(&u.DisplayName, in.DisplayName)
	kernel.SetString(&u.Email, in.Email)
	if len(u.DisplayName) > basis.MaxNameLength || len(u.Email) > 254 {
		return kernel.Invalid("display name or email of %s is too long", u.Name)
	}
	if in.Role != nil {
		if !in.Role.Valid() {
			return kernel.Invalid("role %q is not known: use tenant_admin, member or viewer", *in.Role)
		}
		if *in.Role == model.RolePlatformAdmin && p.Role != model.RolePlatformAdmin {
			return kernel.Forbidden("only a platform admin can make another platform admin")
		}
		u.Role = *in.Role
	}
	if in.Service != nil {
		u.Service = *in.Service
	}
	if in.Disabled != nil {
		u.Disabled = *in.Disabled
	}
	return nil
}

// UpdateUser changes a user's name, contact, role or disabled flag. An admin
// cannot demote or disable themselves, so a tenant is never left without the
// admin who made the mistake.
func (s *Access) UpdateUser(ctx context.Context, ref string, in UserInput) (*model.User, error) {
	return kernel.Run(ctx, s.k, kernel.Op[*model.User]{
		Name: "updateUser", Right: kernel.RightAdmin, What: "change users",
		Body: func(t *kernel.Txn) (*model.User, kernel.Audit, error) {
			p := t.P
			u, err := kernel.FindUser(ctx, t.Q, p.TenantID, ref)
			if err != nil {
				return nil, kernel.Audit{}, err
			}
			if u.ID == p.UserID && ((in.Role != nil && *in.Role != u.Role) || (in.Disabled != nil && *in.Disabled)) {
				return nil, kernel.Audit{}, kernel.Forbidden("you cannot change your own role or disable yourself; ask another admin")
			}
			if u.Role == model.RolePlatformAdmin && p.Role != model.RolePlatformAdmin {
				return nil, kernel.Audit{}, kernel.Forbidden("only a platform admin can change a platform admin")
			}
			before := *u
			if in.Name != nil {
				name := strings.TrimSpace(*in.Name)
				if err := checkUserName(name); err != nil {
					return nil, kernel.Audit{}, err
				}
				if other, err := t.Q.GetUserByName(ctx, p.TenantID, name); err == nil && other.ID != u.ID {
					return nil, kernel.Audit{}, kernel.Conflict("a user named %s already exists", kernel.Quote(name))
				}
				u.Name = name
			}
			if err := applyUser(p, u, in); err != nil {
				return nil, kernel.Audit{}, err
			}
			u.UpdatedAt = t.Now
			if err := t.Q.UpdateUser(ctx, u); err != nil {
				return nil, kernel.Audit{}, err
			}
			return u, kernel.Audit{Action: "user.updated", Kind: "user", ID: u.ID, Name: u.Name, Detail: describeUserChange(&before, u)}, nil
		},
	})
}

func describeUserChange(a, b *model.User) string {
	var parts []string
	if a.Name != b.Name {
		parts = append(parts, "name "+a.Name+" -> "+b.Name)
	}
	if a.Role != b.Role {
		parts = append(parts, fmt.Sprintf("role %s -> %s", a.Role, b.Role))
	}
	if a.Disabled != b.Disabled {
		parts = append(parts, fmt.Sprintf("disabled %v -> %v", a.Disabled, b.Disabled))
	}
	if a.DisplayName != b.DisplayName || a.Email != b.Email {
		parts = append(parts, "contact details")
	}
	if len(parts) == 0 {
		return "no change"
	}
	return "changed " + strings.Join(parts, ", ")
}

// Users lists the users the caller may see, by name, one page at a time.
func (s *Access) Users(ctx context.Context, page model.Page) ([]*model.User, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if p.IsAdmin() {
		us, err := s.k.Store.ListUsers(ctx, p.TenantID, page)
		return us, s.k.Internal(ctx, err)
	}
	seen := map[string]bool{p.UserID: true}
	for _, g := range p.Groups {
		ms, err := s.k.Store.ListMembershipsByGroup(ctx, p.TenantID, g.GroupID)
		if err != nil {
			return nil, s.k.Internal(ctx, err)
		}
		for _, m := range ms {
			seen[m.UserID] = true
		}
	}
	var out []*model.User
	for id := range seen {
		u, err := s.k.Store.GetUser(ctx, p.TenantID, id)
		if err != nil {
			return nil, s.k.Internal(ctx, err)
		}
		if u.Name > page.After {
			out = append(out, u)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if page.Limit > 0 && len(out) > page.Limit {
		out = out[:page.Limit]
	}
	return out, nil
}
