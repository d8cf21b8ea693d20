// Package model holds the domain types of Klique: tenants and their users and
// groups, the allocation model (GPU classes, pools, profiles, resource
// policies, compute resources), projects, tasks and the audit trail.
//
// The types are plain data. Rules about them (who may change what, which
// values are valid) live in the platform service and the estate validator, so
// that every channel shares them.
package model

import (
	"time"

	"github.com/google/uuid"
)

// NewID returns a new object id. Version 7 UUIDs sort by creation time, which
// keeps index locality good in both stores.
func NewID() string { return uuid.Must(uuid.NewV7()).String() }

// Tenant is an isolated part of one control plane: its users, groups,
// projects, allocation model and tasks are invisible to every other tenant.
type Tenant struct {
	ID          string
	Name        string
	DisplayName string
	CreatedAt   time.Time
}

// Role is a user's tenant-wide role.
type Role string

const (
	// RolePlatformAdmin runs the deployment: a tenant admin of its own tenant
	// who may also create tenants.
	RolePlatformAdmin Role = "platform_admin"
	// RoleTenantAdmin manages everything inside one tenant.
	RoleTenantAdmin Role = "tenant_admin"
	// RoleMember uses the compute resources of the groups it belongs to.
	RoleMember Role = "member"
	// RoleViewer reads what a member of its groups reads, and changes nothing
	// but its own API keys.
	RoleViewer Role = "viewer"
)

// Valid reports whether r is a known role.
func (r Role) Valid() bool {
	switch r {
	case RolePlatformAdmin, RoleTenantAdmin, RoleMember, RoleViewer:
		return true
	}
	return false
}

// IsAdmin reports whether r manages its whole tenant.
func (r Role) IsAdmin() bool { return r == RolePlatformAdmin || r == RoleTenantAdmin }

// GroupRole is a user's role inside one group.
type GroupRole string

const (
	// GroupRoleLead manages the group's members and all of its tasks.
	GroupRoleLead GroupRole = "lead"
	// GroupRoleMember belongs to the group.
	GroupRoleMember GroupRole = "member"
)

// Valid reports whether r is a known group role.
func (r GroupRole) Valid() bool { return r == GroupRoleLead || r == GroupRoleMember }

// User is a person or a service user (automation with API keys only).
type User struct {
	ID          string
	TenantID    string
	Name        string
	DisplayName string
	Email       string
	Role        Role
	Service     bool
	// ExternalID is the subject of an external identity provider
	// ("issuer|subject") for users that sign in through SSO.
	ExternalID string
	Disabled   bool
	// DefaultProjectID is the project the user's model calls and tasks are
	// for when they name none ("" when unset; see kernel.DefaultProject).
	DefaultProjectID string
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

// Group is a node of a tenant's organisation tree that resource policies
// govern: a team (research group, business unit, project team: the groups
// users are members of and projects belong to) or a department above teams.
type Group struct {
	ID          string
	TenantID    string
	Name        string
	Description string
	// Kind is team (the zero value: every group of a flat estate) or
	// department.
	Kind GroupKind
	// ParentID is the department the group sits in: for a department its
	// parent department, for a team its department; "" for a group
	// directly under the tenant.
	ParentID  string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// IsDepartment reports whether g is a department rather than a team.
func (g *Group) IsDepartment() bool { return g.Kind == GroupDepartment }

// GroupKind says which level of the organisation tree a group is.
type GroupKind string

const (
	// GroupTeam is a team: members, projects and compute resources. It is
	// the zero value, so that every group written before departments
	// existed is one.
	GroupTeam GroupKind = ""
	// GroupDepartment is a node above teams: it holds teams and other
	// departments, and a policy whose reservation, limit and budget cover
	// the work of everything below it. It has no compute resources,
	// projects or members of its own.
	GroupDepartment GroupKind = "department"
)

// MaxDepartmentDepth is how many levels of departments a tenant's tree may
// have above its teams: enough for division, department, sub-department
// and lab, few enough that every path is read at a glance.
const MaxDepartmentDepth = 4

// String names the kind as the API and the store write it.
func (k GroupKind) String() string {
	if k == GroupTeam {
		return "team"
	}
	return string(k)
}

// ParseGroupKind reads a kind as String writes it.
func ParseGroupKind(s string) (GroupKind, bool) {
	switch s {
	case "team", "":
		return GroupTeam, true
	case string(GroupDepartment):
		return GroupDepartment, true
	}
	return GroupTeam, false
}

// Membership places a user in a group.
type Membership struct {
	TenantID  string
	GroupID   string
	UserID    string
	Role      GroupRole
	CreatedAt time.Time
}

// APIKey is a long-lived credential. Only a hash of the secret is kept; the
// secret itself is shown once, when the key is created.
type APIKey struct {
	ID       string
	TenantID string
	UserID   string
	Name     string
	// Prefix is the first characters of the secret, kept so that a person can
	// tell their keys apart. It is not enough to use the key.
	Prefix string
	// Hash is the SHA-256 of the whole secret.
	Hash []byte
	// ProjectID, when set, scopes the key to one project.
	ProjectID  string
	CreatedAt  time.Time
	ExpiresAt  *time.Time
	LastUsedAt *time.Time
	RevokedAt  *time.Time
}

// Active reports whether the key can be used at now.
func (k *APIKey) Active(now time.Time) bool {
	if k.RevokedAt != nil {
		return false
	}
	return k.ExpiresAt == nil || now.Before(*k.ExpiresAt)
}

// AuditEntry records who did what, when, to which object, from which channel.
type AuditEntry struct {
	ID         string
	TenantID   string
	Seq        int64
	At         time.Time
	ActorID    string
	ActorName  string
	Channel    string
	Action     string
	ObjectKind string
	ObjectID   string
	ObjectName string
	// Detail is a short human-readable account of the change.
	Detail string
}

// Page asks for one page of a list ordered by a unique key (a name, or a
// sequence number for tasks and audit entries). After is the key of the last
// item of the previous page ("" for the first page); Limit is the most items
// to return (0 means no limit).
type Page struct {
	After string
	Limit int
}

// UsageKey names one dimension's object in a usage row of the ledger: the
// dimension ("user", "pool", …), and the object's id and name.
type UsageKey struct {
	Dimension string
	ID        string
	Name      string
}
