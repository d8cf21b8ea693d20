package kernel

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
)

// The access rules, in one place. Tenant isolation comes first and is not a
// rule here but a property of every query: the store is always asked with the
// caller's tenant id, so another tenant's objects are simply not found, and
// their names never appear in an error.
//
//   platform admin  everything a tenant admin does, plus creating tenants
//   tenant admin    the allocation model, users, groups, projects, every task
//   department head a lead of a department: changes the policies below it
//                   within its share, sees their queues and usage (not task
//                   contents), orders their queues (heads.go)
//   group lead      a member who also manages the group's members and tasks
//   member          enqueues on the compute resources of its groups, sees its
//                   groups' policies, queues and tasks, aborts its own tasks
//   viewer          reads what a member reads; changes only its own API keys
//
// A credential scoped to a project acts only on that project's tasks and
// cannot change the allocation model or identities.

// Caller returns the principal of the request, or UNAUTHENTICATED.
func Caller(ctx context.Context) (*identity.Principal, error) {
	p, ok := identity.PrincipalFrom(ctx)
	if !ok || p == nil {
		return nil, Unauthenticated("sign in first: send an API key or access token as 'Authorization: Bearer <credential>'")
	}
	return p, nil
}

// RequireAdmin refuses all but an unscoped tenant admin.
func RequireAdmin(p *identity.Principal, what string) error {
	if !p.IsAdmin() {
		return Forbidden("only a tenant admin can %s", what)
	}
	if p.ProjectID != "" {
		return Forbidden("this credential is scoped to one project and cannot %s; use an unscoped API key", what)
	}
	return nil
}

// RequirePlatformAdmin refuses all but an unscoped platform admin.
func RequirePlatformAdmin(p *identity.Principal, what string) error {
	if p.Role != model.RolePlatformAdmin {
		return Forbidden("only a platform admin can %s", what)
	}
	if p.ProjectID != "" {
		return Forbidden("this credential is scoped to one project and cannot %s; use an unscoped API key", what)
	}
	return nil
}

// RequireWrite refuses viewers.
func RequireWrite(p *identity.Principal, what string) error {
	if !p.CanWrite() {
		return Forbidden("a viewer cannot %s", what)
	}
	return nil
}

// SeesGroup reports whether p may see a group and the group's policy,
// compute resources and queues.
func SeesGroup(p *identity.Principal, groupID string) bool {
	return p.IsAdmin() || p.InGroup(groupID)
}

// SeesTask reports whether p may see a task: admins see all, others their
// own tasks and their groups' tasks; a project-scoped credential only the
// project's.
func SeesTask(p *identity.Principal, t *model.Task) bool {
	if p.ProjectID != "" && t.ProjectID != p.ProjectID {
		return false
	}
	return p.IsAdmin() || t.OwnerID == p.UserID || p.InGroup(t.GroupID)
}

// MayAbort reports whether p may stop a task: its owner, a lead of its group,
// or an admin.
func MayAbort(p *identity.Principal, t *model.Task) bool {
	if !p.CanWrite() || !SeesTask(p, t) {
		return false
	}
	return p.IsAdmin() || t.OwnerID == p.UserID || p.LeadOf(t.GroupID)
}

// UsesProject reports whether p may put work in a project.
func UsesProject(p *identity.Principal, pr *model.Project) bool {
	if p.ProjectID != "" && p.ProjectID != pr.ID {
		return false
	}
	return p.IsAdmin() || pr.GroupID == "" || p.InGroup(pr.GroupID)
}

// ManagesGroup reports whether p may change a group's members.
func ManagesGroup(p *identity.Principal, groupID string) bool {
	if p.ProjectID != "" || !p.CanWrite() {
		return false
	}
	return p.IsAdmin() || p.LeadOf(groupID)
}

// GroupNames lists the caller's groups for messages ("group ml-research",
// "groups a, b").
func GroupNames(p *identity.Principal) string {
	var names []string
	for _, g := range p.Groups {
		names = append(names, g.GroupName)
	}
	sort.Strings(names)
	switch len(names) {
	case 0:
		return "you (you are in no group; ask an admin to add you to one)"
	case 1:
		return "group " + names[0]
	}
	return "groups " + strings.Join(names, ", ")
}

// Quote puts a name a person typed in quotes for a message.
func Quote(s string) string { return fmt.Sprintf("'%s'", s) }
