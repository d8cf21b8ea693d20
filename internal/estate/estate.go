// Package estate holds a tenant's whole allocation model (GPU classes, pools,
// profiles, groups, resource policies, compute resources and projects) as one
// value, and the rules that make it valid.
//
// The value also holds the LLM gateway's configuration (Estate.Gateway),
// changed, validated, diffed and versioned with the rest. Its rules and its
// section of the estate file are package llmconf's, which Normalize,
// Validate, Diff, Apply and Export call for that part; what every part
// shares (the name rule, Problem, the file's Number) is package basis's.
//
// Every change to the allocation model, whether it comes from one GraphQL
// mutation or from a whole estate file, is made the same way: the platform
// service loads the current Estate, changes a copy, normalises and validates
// the copy as a whole, and writes the difference. So a rule lives here once
// and holds for every channel, and bad input changes nothing.
package estate

import (
	"sort"

	"github.com/klique-ai/klique/internal/estate/appconf"
	"github.com/klique-ai/klique/internal/estate/llmconf"
	"github.com/klique-ai/klique/internal/model"
)

// Estate is one tenant's allocation model at one moment.
type Estate struct {
	GPUClasses       []*model.GPUClass
	Pools            []*model.Pool
	Profiles         []*model.Profile
	Groups           []*model.Group
	Policies         []*model.ResourcePolicy
	ComputeResources []*model.ComputeResource
	Projects         []*model.Project
	// Gateway is the LLM gateway's configuration, changed and versioned
	// with the rest.
	Gateway model.Gateway
	// Apps is the tenant's part of the app catalogue (package appconf),
	// changed and versioned with the rest.
	Apps model.AppCatalogue
}

// Clone returns a deep copy, so that a change can be tried without touching
// the original.
func (e *Estate) Clone() *Estate {
	c := &Estate{}
	for _, v := range e.GPUClasses {
		x := *v
		c.GPUClasses = append(c.GPUClasses, &x)
	}
	for _, v := range e.Pools {
		x := *v
		x.Labels = cloneMap(v.Labels)
		x.ProfileOrder = append([]string(nil), v.ProfileOrder...)
		c.Pools = append(c.Pools, &x)
	}
	for _, v := range e.Profiles {
		x := *v
		x.Pools = append([]string(nil), v.Pools...)
		x.QueuingOrder = append([]string(nil), v.QueuingOrder...)
		c.Profiles = append(c.Profiles, &x)
	}
	for _, v := range e.Groups {
		x := *v
		c.Groups = append(c.Groups, &x)
	}
	for _, v := range e.Policies {
		x := *v
		if v.Budget != nil {
			b := *v.Budget
			x.Budget = &b
		}
		c.Policies = append(c.Policies, &x)
	}
	for _, v := range e.ComputeResources {
		x := *v
		x.Env = cloneMap(v.Env)
		x.Mounts = append([]string(nil), v.Mounts...)
		c.ComputeResources = append(c.ComputeResources, &x)
	}
	for _, v := range e.Projects {
		x := *v
		c.Projects = append(c.Projects, &x)
	}
	c.Gateway = llmconf.Clone(&e.Gateway)
	c.Apps = appconf.Clone(&e.Apps)
	return c
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// Lookups by id and by name. They scan: an estate has at most a few thousand
// objects and is changed by people, so clarity wins over an index.

// GPUClass returns the class with id, or nil.
func (e *Estate) GPUClass(id string) *model.GPUClass {
	for _, v := range e.GPUClasses {
		if v.ID == id {
			return v
		}
	}
	return nil
}

// GPUClassByName returns the class named name, or nil.
func (e *Estate) GPUClassByName(name string) *model.GPUClass {
	for _, v := range e.GPUClasses {
		if v.Name == name {
			return v
		}
	}
	return nil
}

// Pool returns the pool with id, or nil.
func (e *Estate) Pool(id string) *model.Pool {
	for _, v := range e.Pools {
		if v.ID == id {
			return v
		}
	}
	return nil
}

// PoolByName returns the pool named name, or nil.
func (e *Estate) PoolByName(name string) *model.Pool {
	for _, v := range e.Pools {
		if v.Name == name {
			return v
		}
	}
	return nil
}

// Profile returns the profile with id, or nil.
func (e *Estate) Profile(id string) *model.Profile {
	for _, v := range e.Profiles {
		if v.ID == id {
			return v
		}
	}
	return nil
}

// ProfileByName returns the profile named name, or nil.
func (e *Estate) ProfileByName(name string) *model.Profile {
	for _, v := range e.Profiles {
		if v.Name == name {
			return v
		}
	}
	return nil
}

// Group returns the group with id, or nil.
func (e *Estate) Group(id string) *model.Group {
	for _, v := range e.Groups {
		if v.ID == id {
			return v
		}
	}
	return nil
}

// GroupByName returns the group named name, or nil.
func (e *Estate) GroupByName(name string) *model.Group {
	for _, v := range e.Groups {
		if v.Name == name {
			return v
		}
	}
	return nil
}

// Policy returns the policy with id, or nil.
func (e *Estate) Policy(id string) *model.ResourcePolicy {
	for _, v := range e.Policies {
		if v.ID == id {
			return v
		}
	}
	return nil
}

// PolicyOfGroup returns the policy of the group with id groupID, or nil.
func (e *Estate) PolicyOfGroup(groupID string) *model.ResourcePolicy {
	for _, v := range e.Policies {
		if v.GroupID == groupID {
			return v
		}
	}
	return nil
}

// ComputeResource returns the compute resource with id, or nil.
func (e *Estate) ComputeResource(id string) *model.ComputeResource {
	for _, v := range e.ComputeResources {
		if v.ID == id {
			return v
		}
	}
	return nil
}

// ComputeResourceOf returns the compute resource joining policy and profile,
// or nil.
func (e *Estate) ComputeResourceOf(policyID, profileID string) *model.ComputeResource {
	for _, v := range e.ComputeResources {
		if v.PolicyID == policyID && v.ProfileID == profileID {
			return v
		}
	}
	return nil
}

// Project returns the project with id, or nil.
func (e *Estate) Project(id string) *model.Project {
	for _, v := range e.Projects {
		if v.ID == id {
			return v
		}
	}
	return nil
}

// ProjectByName returns the project named name, or nil.
func (e *Estate) ProjectByName(name string) *model.Project {
	for _, v := range e.Projects {
		if v.Name == name {
			return v
		}
	}
	return nil
}

// GroupName returns the name of the group with id, or the id if unknown.
func (e *Estate) GroupName(id string) string {
	if g := e.Group(id); g != nil {
		return g.Name
	}
	return id
}

// PolicyGroupName returns the name of the group a policy belongs to.
func (e *Estate) PolicyGroupName(policyID string) string {
	if p := e.Policy(policyID); p != nil {
		return e.GroupName(p.GroupID)
	}
	return policyID
}

// ProfilesOnPool returns the profiles linked to a pool in its execution
// priority order: the pool's ProfileOrder first, then any other linked
// profile by name.
func (e *Estate) ProfilesOnPool(poolID string) []*model.Profile {
	var linked []*model.Profile
	for _, pr := range e.Profiles {
		if contains(pr.Pools, poolID) {
			linked = append(linked, pr)
		}
	}
	pool := e.Pool(poolID)
	var order []string
	if pool != nil {
		order = pool.ProfileOrder
	}
	return orderBy(linked, order, func(p *model.Profile) string { return p.ID }, func(p *model.Profile) string { return p.Name })
}

// ComputeResourcesOfProfile returns the compute resources on a profile in its
// queuing priority order: the profile's QueuingOrder (policy ids) first, then
// the others by group name.
func (e *Estate) ComputeResourcesOfProfile(profileID string) []*model.ComputeResource {
	var crs []*model.ComputeResource
	for _, cr := range e.ComputeResources {
		if cr.ProfileID == profileID {
			crs = append(crs, cr)
		}
	}
	var order []string
	if pr := e.Profile(profileID); pr != nil {
		order = pr.QueuingOrder
	}
	return orderBy(crs, order, func(c *model.ComputeResource) string { return c.PolicyID },
		func(c *model.ComputeResource) string { return e.PolicyGroupName(c.PolicyID) })
}

// ComputeResourcesOfPolicy returns a policy's compute resources by name.
func (e *Estate) ComputeResourcesOfPolicy(policyID string) []*model.ComputeResource {
	var crs []*model.ComputeResource
	for _, cr := range e.ComputeResources {
		if cr.PolicyID == policyID {
			crs = append(crs, cr)
		}
	}
	sort.SliceStable(crs, func(i, j int) bool { return crs[i].Name < crs[j].Name })
	return crs
}

// PoolsOfGroup returns the ids of every pool a group's compute resources can
// place work on; for a department, those of every team below it.
func (e *Estate) PoolsOfGroup(groupID string) []string {
	seen := map[string]bool{}
	var out []string
	e.poolsOfGroup(groupID, seen, map[string]bool{groupID: true}, &out)
	return out
}

func (e *Estate) poolsOfGroup(groupID string, seen, visited map[string]bool, out *[]string) {
	if g := e.Group(groupID); g != nil && g.IsDepartment() {
		for _, c := range e.Children(groupID) {
			if !visited[c.ID] {
				visited[c.ID] = true
				e.poolsOfGroup(c.ID, seen, visited, out)
			}
		}
		return
	}
	pol := e.PolicyOfGroup(groupID)
	if pol == nil {
		return
	}
	for _, cr := range e.ComputeResourcesOfPolicy(pol.ID) {
		if pr := e.Profile(cr.ProfileID); pr != nil {
			for _, id := range pr.Pools {
				if !seen[id] {
					seen[id] = true
					*out = append(*out, id)
				}
			}
		}
	}
}

// orderBy puts items named in order first (in that order), then the rest
// sorted by name. Entries of order that match no item are ignored.
func orderBy[T any](items []T, order []string, key func(T) string, name func(T) string) []T {
	rank := make(map[string]int, len(order))
	for i, k := range order {
		if _, dup := rank[k]; !dup {
			rank[k] = i
		}
	}
	out := append([]T(nil), items...)
	sort.SliceStable(out, func(i, j int) bool {
		ri, iok := rank[key(out[i])]
		rj, jok := rank[key(out[j])]
		switch {
		case iok && jok:
			return ri < rj
		case iok != jok:
			return iok
		}
		return name(out[i]) < name(out[j])
	})
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Normalize drops order entries that no longer point at anything: profiles
// unlinked from a pool, policies disconnected from a profile, deleted
// objects. Names given explicitly are checked when they are resolved; stale
// ids left behind by other changes are simply removed. It also makes the
// gateway's defaults explicit and sorts its objects by key, and writes a
// policy's default weight as 0 (model.ResourcePolicy.Weight).
func (e *Estate) Normalize() {
	for _, p := range e.Policies {
		if p.Weight == model.DefaultWeight {
			p.Weight = 0
		}
	}
	llmconf.Normalize(&e.Gateway)
	appconf.Normalize(&e.Apps)
	for _, p := range e.Pools {
		var keep []string
		for _, id := range p.ProfileOrder {
			if pr := e.Profile(id); pr != nil && contains(pr.Pools, p.ID) && !contains(keep, id) {
				keep = append(keep, id)
			}
		}
		p.ProfileOrder = keep
	}
	for _, pr := range e.Profiles {
		var keep []string
		for _, id := range pr.QueuingOrder {
			if e.ComputeResourceOf(id, pr.ID) != nil && !contains(keep, id) {
				keep = append(keep, id)
			}
		}
		pr.QueuingOrder = keep
	}
}

// FollowRenames carries the renames of groups and projects from cur to e
// into the gateway's configuration, which names them: an alias rule of
// group "vision" follows the group when it becomes "computer-vision". It is
// a method of the estate because telling a rename from a deletion and a
// creation takes the ids of both estates' groups and projects.
func (e *Estate) FollowRenames(cur *Estate) {
	groups, projects := map[string]string{}, map[string]string{}
	for _, g := range cur.Groups {
		if n := e.Group(g.ID); n != nil && n.Name != g.Name {
			groups[g.Name] = n.Name
		}
	}
	for _, p := range cur.Projects {
		if n := e.Project(p.ID); n != nil && n.Name != p.Name {
			projects[p.Name] = n.Name
		}
	}
	llmconf.Rename(&e.Gateway, groups, projects)
	for from, to := range groups {
		appconf.RenameGroup(&e.Apps, from, to)
	}
}
