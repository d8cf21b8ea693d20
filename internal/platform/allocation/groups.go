package allocation

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/estate/basis"
	"github.com/klique-ai/klique/internal/estate/llmconf"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
)

// Groups, their resource policies and compute resources, and projects:
// each change described on a copy of the estate; kernel.ChangeEstate does
// the rest (validation of the whole, the audit entry, the version).

// CreateGroup adds a group.
func (s *Allocation) CreateGroup(ctx context.Context, in GroupInput) (*kernel.EstateResult, error) {
	return s.k.ChangeCallerEstate(ctx, "create groups", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		if err := kernel.RequireName("group", in.Name); err != nil {
			return "", err
		}
		if next.GroupByName(strings.TrimSpace(*in.Name)) != nil {
			return "", kernel.Conflict("a group named %s already exists", kernel.Quote(*in.Name))
		}
		g := &model.Group{ID: model.NewID(), TenantID: t.P.TenantID, CreatedAt: t.Now}
		kernel.SetString(&g.Name, in.Name)
		kernel.SetString(&g.Description, in.Description)
		if err := placeGroup(next, g, in.Department); err != nil {
			return "", err
		}
		next.Groups = append(next.Groups, g)
		return g.ID, nil
	})
}

// UpdateGroup renames or describes a group.
func (s *Allocation) UpdateGroup(ctx context.Context, ref string, in GroupInput) (*kernel.EstateResult, error) {
	return s.k.ChangeCallerEstate(ctx, "change groups", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		g, err := kernel.FindGroup(next, ref)
		if err != nil {
			return "", err
		}
		kernel.SetString(&g.Name, in.Name)
		kernel.SetString(&g.Description, in.Description)
		return g.ID, placeGroup(next, g, in.Department)
	})
}

// placeGroup puts a group in the department ref names ("" for directly
// under the tenant); nil leaves it where it is.
func placeGroup(e *estate.Estate, g *model.Group, ref *string) error {
	if ref == nil {
		return nil
	}
	if strings.TrimSpace(*ref) == "" {
		g.ParentID = ""
		return nil
	}
	d, err := kernel.FindGroup(e, strings.TrimSpace(*ref))
	if err != nil || !d.IsDepartment() {
		return kernel.Invalid("group %s: no department %s; name a department (klique get departments lists them), or none for the top of the tree",
			g.Name, kernel.Quote(*ref))
	}
	g.ParentID = d.ID
	return nil
}

// DeleteGroup removes a group without a policy or projects. Its memberships
// go with it.
func (s *Allocation) DeleteGroup(ctx context.Context, ref string) (*kernel.EstateResult, error) {
	return s.k.ChangeCallerEstate(ctx, "delete groups", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		g, err := kernel.FindGroup(next, ref)
		if err != nil {
			return "", err
		}
		kind := "group"
		if g.IsDepartment() {
			kind = "department"
		}
		if kids := next.Children(g.ID); len(kids) > 0 {
			var names []string
			for _, c := range kids {
				names = append(names, c.Name)
			}
			return "", kernel.Conflict("department %s still holds %s; move them to another department (or to the top) or delete them first",
				g.Name, strings.Join(names, ", "))
		}
		if next.PolicyOfGroup(g.ID) != nil {
			return "", kernel.Conflict("%s %s has a resource policy; delete the policy first", kind, g.Name)
		}
		var projects []string
		for _, pr := range next.Projects {
			if pr.GroupID == g.ID {
				projects = append(projects, pr.Name)
			}
		}
		if len(projects) > 0 {
			return "", kernel.Conflict("group %s owns projects %s; move or delete them first", g.Name, strings.Join(projects, ", "))
		}
		if refs := llmconf.GroupReferences(&next.Gateway, g.Name); len(refs) > 0 {
			return "", kernel.Conflict("group %s is named by the gateway's %s; change them first", g.Name, strings.Join(refs, ", "))
		}
		next.Groups = kernel.Remove(next.Groups, g)
		return g.ID, nil
	})
}

// CreatePolicy gives a group its resource policy.
func (s *Allocation) CreatePolicy(ctx context.Context, in PolicyInput) (*kernel.EstateResult, error) {
	return s.k.ChangeCallerEstate(ctx, "create resource policies", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		if in.Group == nil {
			return "", kernel.Invalid("a resource policy needs the group it belongs to")
		}
		g, err := kernel.FindGroup(next, *in.Group)
		if err != nil {
			return "", kernel.Invalid("%v", err)
		}
		if next.PolicyOfGroup(g.ID) != nil {
			return "", kernel.Conflict("group %s already has a resource policy; change that one", g.Name)
		}
		if in.LimitGPUs == nil {
			return "", kernel.Invalid("a resource policy needs a limit: the most GPUs the group may hold at once")
		}
		pol := &model.ResourcePolicy{ID: model.NewID(), TenantID: t.P.TenantID, GroupID: g.ID, CreatedAt: t.Now,
			LowWatermark: model.DefaultLowWatermark, AlertThresholdPercent: model.DefaultAlertThresholdPercent}
		next.Policies = append(next.Policies, pol)
		return pol.ID, applyPolicy(next, pol, in)
	})
}

// UpdatePolicy changes a group's resource policy: an admin's any, a
// department head's below the department (headUpdatePolicy). Anyone else
// is refused as before there were heads: only an admin changes policies.
func (s *Allocation) UpdatePolicy(ctx context.Context, ref string, in PolicyInput) (*kernel.EstateResult, error) {
	if s.headsAny(ctx) {
		return s.headUpdatePolicy(ctx, ref, in)
	}
	return s.k.ChangeCallerEstate(ctx, "change resource policies", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		pol, err := kernel.FindPolicy(next, ref)
		if err != nil {
			return "", err
		}
		if in.Group != nil {
			if g, err := kernel.FindGroup(next, *in.Group); err != nil || g.ID != pol.GroupID {
				return "", kernel.Invalid("a resource policy cannot move to another group; delete it and create one for the other group")
			}
		}
		return pol.ID, applyPolicy(next, pol, in)
	})
}

func applyPolicy(e *estate.Estate, pol *model.ResourcePolicy, in PolicyInput) error {
	kernel.SetInt(&pol.ReservationGPUs, in.ReservationGPUs)
	kernel.SetInt(&pol.LimitGPUs, in.LimitGPUs)
	if in.ClearTimeBudget && in.TimeBudget != nil {
		return kernel.Invalid("give a time budget or clear it, not both")
	}
	if in.ClearTimeBudget {
		pol.Budget = nil
	}
	if b := in.TimeBudget; b != nil {
		h, err := basis.ScaleDecimal("time budget hours", b.Hours, 3)
		if err != nil {
			return kernel.Invalid("resource policy of group %s: %v", e.GroupName(pol.GroupID), err)
		}
		pol.Budget = &model.TimeBudget{MilliHours: h, Period: b.Period}
	}
	if in.LowWatermarkMinutes != nil {
		pol.LowWatermark = time.Duration(*in.LowWatermarkMinutes) * time.Minute
	}
	kernel.SetInt(&pol.AlertThresholdPercent, in.AlertThresholdPercent)
	if in.Weight != nil {
		if *in.Weight < 1 {
			return kernel.Invalid("resource policy of %s: weight %d must be 1 or more: it is the share of lent GPUs among siblings (to hold a group back, lower its limit)",
				e.GroupName(pol.GroupID), *in.Weight)
		}
		pol.Weight = *in.Weight
	}
	return nil
}

// DeletePolicy removes a group's policy and disconnects its compute
// resources, which must have no work queued or running.
func (s *Allocation) DeletePolicy(ctx context.Context, ref string) (*kernel.EstateResult, error) {
	return s.k.ChangeCallerEstate(ctx, "delete resource policies", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		pol, err := kernel.FindPolicy(next, ref)
		if err != nil {
			return "", err
		}
		for _, cr := range next.ComputeResourcesOfPolicy(pol.ID) {
			next.ComputeResources = kernel.Remove(next.ComputeResources, cr)
		}
		next.Policies = kernel.Remove(next.Policies, pol)
		return pol.ID, nil
	})
}

// ConnectProfile connects a profile to a group's policy, creating the
// compute resource the group submits to. A profile larger than the group's
// limit is refused.
func (s *Allocation) ConnectProfile(ctx context.Context, in ConnectInput) (*kernel.EstateResult, error) {
	return s.k.ChangeCallerEstate(ctx, "connect profiles to policies", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		pol, err := kernel.FindPolicy(next, in.Policy)
		if err != nil {
			return "", kernel.Invalid("%v", err)
		}
		pr, err := kernel.FindProfile(next, in.Profile)
		if err != nil {
			return "", kernel.Invalid("%v", err)
		}
		if existing := next.ComputeResourceOf(pol.ID, pr.ID); existing != nil {
			return "", kernel.Conflict("profile %s is already connected to group %s's policy as compute resource %s", kernel.Quote(pr.Name), next.GroupName(pol.GroupID), kernel.Quote(existing.Name))
		}
		cr := &model.ComputeResource{ID: model.NewID(), TenantID: t.P.TenantID, PolicyID: pol.ID, ProfileID: pr.ID, Name: pr.Name, CreatedAt: t.Now}
		kernel.SetString(&cr.Name, in.Name)
		kernel.SetString(&cr.Description, in.Description)
		setRunSettings(cr, in.Image, in.Env, in.Mounts)
		next.ComputeResources = append(next.ComputeResources, cr)
		return cr.ID, nil
	})
}

// UpdateComputeResource renames or describes a compute resource, or changes
// how its tasks run.
func (s *Allocation) UpdateComputeResource(ctx context.Context, id string, in ComputeResourceInput) (*kernel.EstateResult, error) {
	return s.k.ChangeCallerEstate(ctx, "change compute resources", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		cr, err := kernel.FindComputeResource(next, id)
		if err != nil {
			return "", err
		}
		kernel.SetString(&cr.Name, in.Name)
		kernel.SetString(&cr.Description, in.Description)
		setRunSettings(cr, in.Image, in.Env, in.Mounts)
		return cr.ID, nil
	})
}

// setRunSettings changes how a compute resource's tasks run: nil leaves a
// setting as it is, an empty value clears it.
func setRunSettings(cr *model.ComputeResource, image *string, env map[string]string, mounts []string) {
	kernel.SetString(&cr.Image, image)
	if env != nil {
		cr.Env = maps.Clone(env)
	}
	if mounts != nil {
		cr.Mounts = slices.Clone(mounts)
	}
}

// DisconnectProfile deletes a compute resource that has no work queued or
// running.
func (s *Allocation) DisconnectProfile(ctx context.Context, id string) (*kernel.EstateResult, error) {
	return s.k.ChangeCallerEstate(ctx, "disconnect profiles from policies", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		cr, err := kernel.FindComputeResource(next, id)
		if err != nil {
			return "", err
		}
		next.ComputeResources = kernel.Remove(next.ComputeResources, cr)
		return cr.ID, nil
	})
}

// CreateProject adds a project.
func (s *Allocation) CreateProject(ctx context.Context, in ProjectInput) (*kernel.EstateResult, error) {
	return s.k.ChangeCallerEstate(ctx, "create projects", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		if err := kernel.RequireName("project", in.Name); err != nil {
			return "", err
		}
		if next.ProjectByName(strings.TrimSpace(*in.Name)) != nil {
			return "", kernel.Conflict("a project named %s already exists", kernel.Quote(*in.Name))
		}
		pr := &model.Project{ID: model.NewID(), TenantID: t.P.TenantID, CreatedAt: t.Now}
		next.Projects = append(next.Projects, pr)
		return pr.ID, applyProject(next, pr, in)
	})
}

// UpdateProject changes a project.
func (s *Allocation) UpdateProject(ctx context.Context, ref string, in ProjectInput) (*kernel.EstateResult, error) {
	return s.k.ChangeCallerEstate(ctx, "change projects", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		pr, err := kernel.FindProject(next, ref)
		if err != nil {
			return "", err
		}
		return pr.ID, applyProject(next, pr, in)
	})
}

func applyProject(e *estate.Estate, pr *model.Project, in ProjectInput) error {
	kernel.SetString(&pr.Name, in.Name)
	kernel.SetString(&pr.Description, in.Description)
	kernel.SetString(&pr.OutputDestination, in.OutputDestination)
	if in.Group != nil {
		pr.GroupID = ""
		if *in.Group != "" {
			g, err := kernel.FindGroup(e, *in.Group)
			if err != nil {
				return kernel.Invalid("project %s: %v", kernel.Quote(pr.Name), err)
			}
			pr.GroupID = g.ID
		}
	}
	return nil
}

// DeleteProject removes a project that has no tasks.
func (s *Allocation) DeleteProject(ctx context.Context, ref string) (*kernel.EstateResult, error) {
	return s.k.ChangeCallerEstate(ctx, "delete projects", func(t *kernel.Txn, cur, next *estate.Estate) (string, error) {
		pr, err := kernel.FindProject(next, ref)
		if err != nil {
			return "", err
		}
		if refs := llmconf.ProjectReferences(&next.Gateway, pr.Name); len(refs) > 0 {
			return "", kernel.Conflict("project %s is named by the gateway's %s; change them first", kernel.Quote(pr.Name), strings.Join(refs, ", "))
		}
		next.Projects = kernel.Remove(next.Projects, pr)
		return pr.ID, nil
	})
}
