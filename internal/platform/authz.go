package platform

import (
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
//   group lead      a member who also manages the group's members and tasks
//   member          enqueues on the compute resources of its groups, sees its
//                   groups' policies, queues and tasks, aborts its own tasks
//   viewer          reads what a member reads; changes only its own API keys
//
// A credential scoped to a project acts only on that project's tasks and
// cannot change the allocation model or identities.

func requireAdmin(p *identity.Principal, what string) error {
	if !p.IsAdmin() {
		return forbidden("only a tenant admin can %s", what)
	}
	if p.ProjectID != "" {
		return forbidden("this credential is scoped to one project and cannot %s; use an unscoped API key", what)
	}
	return nil
}

func requirePlatformAdmin(p *identity.Principal, what string) error {
	if p.Role != model.RolePlatformAdmin {
		return forbidden("only a platform admin can %s", what)
	}
	if p.ProjectID != "" {
		return forbidden("this credential is scoped to one project and cannot %s; use an unscoped API key", what)
	}
	return nil
}

func requireWrite(p *identity.Principal, what string) error {
	if !p.CanWrite() {
		return forbidden("a viewer cannot %s", what)
	}
	return nil
}

// seesGroup reports whether p may see a group and the group's policy,
// compute resources and queues.
func seesGroup(p *identity.Principal, groupID string) bool {
	return p.IsAdmin() || p.InGroup(groupID)
}

// seesTask reports whether p may see a task: admins see all, others their
// own tasks and their groups' tasks; a project-scoped credential only the
// project's.
func seesTask(p *identity.Principal, t *model.Task) bool {
	if p.ProjectID != "" && t.ProjectID != p.ProjectID {
		return false
	}
	return p.IsAdmin() || t.OwnerID == p.UserID || p.InGroup(t.GroupID)
}

// mayAbort reports whether p may stop a task: its owner, a lead of its group,
// or an admin.
func mayAbort(p *identity.Principal, t *model.Task) bool {
	if !p.CanWrite() || !seesTask(p, t) {
		return false
	}
	return p.IsAdmin() || t.OwnerID == p.UserID || p.LeadOf(t.GroupID)
}

// usesProject reports whether p may put work in a project.
func usesProject(p *identity.Principal, pr *model.Project) bool {
	if p.ProjectID != "" && p.ProjectID != pr.ID {
		return false
	}
	return p.IsAdmin() || pr.GroupID == "" || p.InGroup(pr.GroupID)
}

// managesGroup reports whether p may change a group's members.
func managesGroup(p *identity.Principal, groupID string) bool {
	if p.ProjectID != "" || !p.CanWrite() {
		return false
	}
	return p.IsAdmin() || p.LeadOf(groupID)
}

// groupNames lists the caller's groups for messages ("group ml-research",
// "groups a, b").
func groupNames(p *identity.Principal) string {
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

func quote(s string) string { return fmt.Sprintf("'%s'", s) }
