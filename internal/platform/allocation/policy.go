package allocation

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/platform/view"
	"github.com/klique-ai/klique/internal/store"
)

// PolicyViews returns the policy view of the caller's groups (every group's
// for admins), or of one group.
func (s *Allocation) PolicyViews(ctx context.Context, groupRef string) ([]*view.PolicyView, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	e, err := s.k.Estate(ctx)
	if err != nil {
		return nil, err
	}
	policies := e.Policies
	if groupRef != "" {
		g, err := kernel.FindGroup(e, groupRef)
		if err != nil {
			return nil, err
		}
		pol := e.PolicyOfGroup(g.ID)
		if pol == nil {
			return nil, kernel.NotFound("group %s has no resource policy", g.Name)
		}
		policies = []*model.ResourcePolicy{pol}
	}
	now := s.k.Now()
	held, err := s.k.Store.ListSchedulable(ctx, p.TenantID, 0)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	full, err := s.k.CurrentEstate(ctx, s.k.Store, p.TenantID)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	used, err := s.budgetUsed(ctx, p.TenantID, full, now)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	var out []*view.PolicyView
	for _, pol := range policies {
		v, err := s.policyView(ctx, p.TenantID, e, full, pol, held, used, now)
		if err != nil {
			return nil, s.k.Internal(ctx, err)
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group.Name < out[j].Group.Name })
	return out, nil
}

// policyView is one policy's view: e names what the caller may see, full
// is the whole estate, held the tenant's schedulable tasks and used the
// budget charged per policy. The policy view and the budgetBurn
// subscription share it.
func (s *Allocation) policyView(ctx context.Context, tenantID string, e, full *estate.Estate, pol *model.ResourcePolicy,
	held []store.SchedTask, used map[string]int64, now time.Time) (*view.PolicyView, error) {
	v := &view.PolicyView{Policy: pol, Group: e.Group(pol.GroupID), ComputeResources: e.ComputeResourcesOfPolicy(pol.ID)}
	// A department's policy covers the work of every group below it: its
	// view counts theirs (a group's, only its own).
	groupIDs := []string{pol.GroupID}
	if full.Department(pol.GroupID) != nil {
		groupIDs = nil
		for _, g := range full.Groups {
			if !g.IsDepartment() && full.InSubtree(g.ID, pol.GroupID) {
				groupIDs = append(groupIDs, g.ID)
			}
		}
	}
	var rate int64
	byGroup := holdings(full, held)
	for _, id := range groupIDs {
		h := byGroup[id]
		v.Held += h.held
		v.Holding += h.tasks
		rate += h.rate
	}
	if v.Held > model.GPUs(pol.ReservationGPUs) {
		v.Borrowed = v.Held - model.GPUs(pol.ReservationGPUs)
	}
	var err error
	// A department with no group below it has nothing waiting (an empty
	// filter would count every group's).
	if len(groupIDs) > 0 {
		if v.Waiting, err = s.k.Store.CountTasks(ctx, tenantID, store.TaskFilter{
			Statuses: []model.TaskStatus{model.TaskQueued}, GroupIDs: groupIDs}); err != nil {
			return nil, fmt.Errorf("count waiting tasks of group %s: %w", pol.GroupID, err)
		}
	}
	if b := pol.Budget; b != nil {
		v.Budget = view.Budget(pol, used[pol.ID], rate, now)
	}
	return v, nil
}

// budgetUsed is what each budgeted policy of a tenant has been charged in
// its current period, computed the way the engine computes it.
func (s *Allocation) budgetUsed(ctx context.Context, tenantID string, e *estate.Estate, now time.Time) (map[string]int64, error) {
	// As the engine's loop: a department's budget is charged its teams'
	// work.
	parents := e.PolicyParents()
	budgeted := engine.BudgetedInTree(e.Policies, parents)
	if len(budgeted) == 0 {
		return nil, nil
	}
	floor := engine.PeriodFloor(e.Policies, now)
	intervals, err := s.k.Store.ListPlacements(ctx, tenantID, store.PlacementFilter{From: floor, To: now, PolicyIDs: budgeted})
	if err != nil {
		return nil, err
	}
	pauses, err := s.k.Store.ListEnginePauses(ctx, tenantID, floor, now)
	if err != nil {
		return nil, err
	}
	return engine.BudgetUsedInTree(e.Policies, parents, intervals, pauses, now), nil
}

// OverBudget reports whether the time budget of a compute resource's group
// is used up, so that its queue can be marked.
func (s *Allocation) OverBudget(ctx context.Context, cr *model.ComputeResource) (bool, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return false, err
	}
	e, err := s.k.Estate(ctx)
	if err != nil {
		return false, err
	}
	pol := e.Policy(cr.PolicyID)
	if pol == nil || pol.Budget == nil || cr.TenantID != p.TenantID {
		return false, nil
	}
	used, err := s.cachedBudgetUsed(ctx, p.TenantID)
	if err != nil {
		return false, s.k.Internal(ctx, err)
	}
	return used[pol.ID] >= pol.Budget.MilliHours*1000, nil
}

// cachedBudgetUsed is budgetUsed, computed once per request.
func (s *Allocation) cachedBudgetUsed(ctx context.Context, tenantID string) (map[string]int64, error) {
	if used, ok := kernel.RequestBudgetUsed(ctx, tenantID); ok {
		return used, nil
	}
	full, err := s.k.CurrentEstate(ctx, s.k.Store, tenantID)
	if err != nil {
		return nil, err
	}
	used, err := s.budgetUsed(ctx, tenantID, full, s.k.Now())
	if err != nil {
		return nil, err
	}
	kernel.PutRequestBudgetUsed(ctx, tenantID, used)
	return used, nil
}

// TenantPolicyView is one policy's view with its budget, for the live
// views, which check what each subscriber may see themselves.
func (s *Allocation) TenantPolicyView(ctx context.Context, tenantID, policyID string, now time.Time) (*view.PolicyView, error) {
	full, err := s.k.CurrentEstate(ctx, s.k.Store, tenantID)
	if err != nil {
		return nil, err
	}
	pol := full.Policy(policyID)
	if pol == nil {
		return nil, fmt.Errorf("resource policy %s is gone", policyID)
	}
	held, err := s.k.Store.ListSchedulable(ctx, tenantID, 0)
	if err != nil {
		return nil, fmt.Errorf("list tasks holding capacity: %w", err)
	}
	used, err := s.budgetUsed(ctx, tenantID, full, now)
	if err != nil {
		return nil, fmt.Errorf("budget used: %w", err)
	}
	return s.policyView(ctx, tenantID, full, full, pol, held, used, now)
}

// holding is what one group's work holds now: GPUs, tasks, and the burn
// rate of its time budget (budget hours per hour, in thousandths).
type holding struct {
	held  model.MilliGPU
	tasks int
	rate  int64
}

// holdings sums the tasks holding capacity (held: ListSchedulable's, the
// queued ones skipped) per group, for the policy views and the tree.
func holdings(full *estate.Estate, held []store.SchedTask) map[string]holding {
	out := map[string]holding{}
	for _, t := range held {
		cr := full.ComputeResource(t.ComputeResourceID)
		if cr == nil || t.Status == model.TaskQueued {
			continue
		}
		pol := full.Policy(cr.PolicyID)
		if pol == nil {
			continue
		}
		h := out[pol.GroupID]
		h.held += t.Size.Total()
		h.tasks++
		if pr := full.Profile(cr.ProfileID); pr != nil {
			h.rate += pr.TimeWeightMilli
		}
		out[pol.GroupID] = h
	}
	return out
}
