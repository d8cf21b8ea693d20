package allocation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/platform/view"
	"github.com/klique-ai/klique/internal/store"
)

// EngineStatus says whether a tenant's compute policy engine places work.
type EngineStatus struct {
	Enabled bool
	// Since is when the engine was last disabled or enabled (zero if never).
	Since time.Time
	// By is who disabled it, while it is disabled.
	By string
}

// EngineStatus returns the caller's tenant's engine status.
func (s *Allocation) EngineStatus(ctx context.Context) (*EngineStatus, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	st, err := engineStatus(ctx, s.k.Store, p.TenantID, s.k.Now())
	return st, s.k.Internal(ctx, err)
}

func engineStatus(ctx context.Context, q store.Queries, tenantID string, now time.Time) (*EngineStatus, error) {
	pauses, err := q.ListEnginePauses(ctx, tenantID, time.Unix(0, 0), now.Add(time.Hour))
	if err != nil {
		return nil, err
	}
	st := &EngineStatus{Enabled: true}
	if n := len(pauses); n > 0 {
		last := pauses[n-1]
		if last.EndedAt == nil {
			st.Enabled, st.Since, st.By = false, last.StartedAt, last.ByName
		} else {
			st.Since = *last.EndedAt
		}
	}
	return st, nil
}

// SetEngineEnabled disables or enables the caller's tenant's engine. While
// it is disabled nothing is placed or preempted and no budget time is
// charged; work that holds capacity keeps it.
func (s *Allocation) SetEngineEnabled(ctx context.Context, enabled bool) (*EngineStatus, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	what := "disable the compute policy engine"
	if enabled {
		what = "enable the compute policy engine"
	}
	if err := kernel.RequireAdmin(p, what); err != nil {
		return nil, err
	}
	var st *EngineStatus
	err = s.k.Write(ctx, p, func(t *kernel.Txn) error {
		// Exclusive against the engine's apply, which checks the pause
		// under the shared lock: once this returns, no pass in flight
		// places or preempts work on a disabled engine.
		if err := t.Q.LockTenant(ctx, p.TenantID); err != nil {
			return err
		}
		cur, err := engineStatus(ctx, t.Q, p.TenantID, t.Now)
		if err != nil {
			return err
		}
		if cur.Enabled == enabled {
			st = cur
			return nil
		}
		if enabled {
			err = t.Q.EndEnginePause(ctx, p.TenantID, t.Now)
		} else {
			err = t.Q.StartEnginePause(ctx, &model.EnginePause{TenantID: p.TenantID, StartedAt: t.Now, ByUserID: p.UserID, ByName: p.UserName})
		}
		if err != nil {
			return err
		}
		st = &EngineStatus{Enabled: enabled, Since: t.Now}
		action := "engine.enabled"
		if !enabled {
			action, st.By = "engine.disabled", p.UserName
		}
		t.Record(action, "engine", p.TenantID, "compute policy engine", "", what)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// QueueState returns why a compute resource's head waits, or nil when
// nothing waits.
func (s *Allocation) QueueState(ctx context.Context, computeResourceID string) (*model.QueueState, error) {
	cr, err := s.ComputeResource(ctx, computeResourceID)
	if err != nil {
		return nil, err
	}
	qs, err := s.k.Store.GetQueueState(ctx, cr.TenantID, cr.ID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return qs, s.k.Internal(ctx, err)
}

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
	var rate int64
	for _, t := range held {
		cr := full.ComputeResource(t.ComputeResourceID)
		if cr == nil || cr.PolicyID != pol.ID || t.Status == model.TaskQueued {
			continue
		}
		v.Held += t.Size.Total()
		v.Holding++
		if pr := full.Profile(cr.ProfileID); pr != nil {
			rate += pr.TimeWeightMilli
		}
	}
	if v.Held > model.GPUs(pol.ReservationGPUs) {
		v.Borrowed = v.Held - model.GPUs(pol.ReservationGPUs)
	}
	var err error
	if v.Waiting, err = s.k.Store.CountTasks(ctx, tenantID, store.TaskFilter{
		Statuses: []model.TaskStatus{model.TaskQueued}, GroupIDs: []string{pol.GroupID}}); err != nil {
		return nil, fmt.Errorf("count waiting tasks of group %s: %w", pol.GroupID, err)
	}
	if b := pol.Budget; b != nil {
		v.Budget = view.Budget(pol, used[pol.ID], rate, now)
	}
	return v, nil
}

// budgetUsed is what each budgeted policy of a tenant has been charged in
// its current period, computed the way the engine computes it.
func (s *Allocation) budgetUsed(ctx context.Context, tenantID string, e *estate.Estate, now time.Time) (map[string]int64, error) {
	var budgeted []string
	for _, p := range e.Policies {
		if p.Budget != nil {
			budgeted = append(budgeted, p.ID)
		}
	}
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
	return engine.BudgetUsed(e.Policies, intervals, pauses, now), nil
}

// UsageQuery asks the ledger for totals. References are ids or names.
type UsageQuery struct {
	From, To time.Time
	By       []string
	User     string
	Project  string
	Group    string
}

// UsageRow is one group of ledger totals: GPU work and model calls side
// by side. Keys holds, for each dimension of the query in order, the id
// and name of the object.
type UsageRow struct {
	Keys []store.UsageKey
	// GPU work: GPU-hours and budget hours in millionths, and their cost
	// in Currency ("" when the row has no GPU work, "mixed" for several
	// currencies).
	MicroGPUHours    int64
	MicroBudgetHours int64
	Cost             float64
	Currency         string
	// Model calls through the gateway: how many, their tokens, and their
	// cost in millionths of TokenCurrency ("" when the row has no calls).
	Calls           int64
	InputTokens     int64
	OutputTokens    int64
	TokenCostMicros int64
	TokenCurrency   string
}

// usageDimensions are what usage can be grouped by; tokenDimensions those
// the model-call ledger has, and gpuDimensions those the GPU ledger has.
var (
	usageDimensions = []string{store.ByUser, store.ByProject, store.ByGroup, store.ByPool, store.ByGPUClass,
		store.ByComputeResource, store.ByProfile, store.ByAlias, store.ByModel}
	tokenDimensions = []string{store.ByUser, store.ByProject, store.ByGroup, store.ByAlias, store.ByModel}
	gpuDimensions   = []string{store.ByUser, store.ByProject, store.ByGroup, store.ByPool, store.ByGPUClass,
		store.ByComputeResource, store.ByProfile}
)

// Usage adds up the ledger over a range, grouped by the dimensions asked
// for: GPU-hours, budget hours and their cost, and beside them the model
// calls, tokens and token cost of the gateway. Dimensions only GPU work has
// (pool, GPU class, compute resource, profile) leave the token fields zero;
// those only model calls have (alias, model) leave the GPU fields zero.
// Admins see the whole tenant; others see their groups' usage, or their
// own.
func (s *Allocation) Usage(ctx context.Context, in UsageQuery) ([]UsageRow, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if !in.To.After(in.From) {
		return nil, kernel.Invalid("the range must end after it starts")
	}
	q := store.UsageQuery{From: in.From, To: in.To, Now: s.k.Now()}
	gpu, tokens := true, true
	for _, d := range in.By {
		if !slices.Contains(usageDimensions, d) {
			return nil, kernel.Invalid("usage cannot be grouped by %q: use %s", d, strings.Join(usageDimensions, ", "))
		}
		if slices.Contains(q.By, d) {
			return nil, kernel.Invalid("usage is grouped by %q twice; give each dimension once", d)
		}
		q.By = append(q.By, d)
		gpu = gpu && slices.Contains(gpuDimensions, d)
		tokens = tokens && slices.Contains(tokenDimensions, d)
	}
	e, err := s.k.Estate(ctx)
	if err != nil {
		return nil, err
	}
	if in.Group != "" {
		g, err := kernel.FindGroup(e, in.Group)
		if err != nil {
			return nil, err
		}
		q.GroupIDs = []string{g.ID}
	}
	if in.Project != "" {
		pr, err := kernel.FindProject(e, in.Project)
		if err != nil {
			return nil, err
		}
		q.ProjectID = pr.ID
	}
	if in.User != "" {
		u, err := s.k.User(ctx, in.User)
		if err != nil {
			return nil, err
		}
		q.UserID = u.ID
	}
	if p.ProjectID != "" {
		if q.ProjectID != "" && q.ProjectID != p.ProjectID {
			return nil, kernel.Forbidden("this credential is scoped to another project")
		}
		q.ProjectID = p.ProjectID
	}
	if !p.IsAdmin() && q.UserID != p.UserID {
		// Others see their groups' usage (the group of a task or a call,
		// not the groups of the user who made it).
		mine := p.GroupIDs()
		if len(q.GroupIDs) == 0 {
			q.GroupIDs = mine
		}
		if len(q.GroupIDs) == 0 {
			q.UserID = p.UserID // in no group: only their own usage
		}
	}
	var gpuRows []store.UsageRow
	var tokenRows []store.ModelUsageRow
	if gpu {
		if gpuRows, err = s.k.Store.SumUsage(ctx, p.TenantID, q); err != nil {
			return nil, s.k.Internal(ctx, err)
		}
	}
	if tokens {
		mq := store.ModelUsageQuery{From: q.From, To: q.To, By: q.By, UserID: q.UserID, ProjectID: q.ProjectID, GroupIDs: q.GroupIDs}
		if tokenRows, err = s.k.Store.SumModelCalls(ctx, p.TenantID, mq); err != nil {
			return nil, s.k.Internal(ctx, err)
		}
	}
	return mergeUsage(gpuRows, tokenRows), nil
}

// mergeUsage joins the rows of the two ledgers by the ids of their keys,
// ordered by those ids as the store orders each ledger's rows.
func mergeUsage(gpu []store.UsageRow, tokens []store.ModelUsageRow) []UsageRow {
	key := func(keys []store.UsageKey) string {
		ids := make([]string, len(keys))
		for i, k := range keys {
			ids[i] = k.ID
		}
		return strings.Join(ids, "\x00")
	}
	out := make([]UsageRow, 0, len(gpu)+len(tokens))
	at := make(map[string]int, len(gpu))
	for _, r := range gpu {
		at[key(r.Keys)] = len(out)
		out = append(out, UsageRow{Keys: r.Keys, MicroGPUHours: r.MicroGPUHours, MicroBudgetHours: r.MicroBudgetHours, Cost: r.Cost, Currency: r.Currency})
	}
	for _, r := range tokens {
		i, ok := at[key(r.Keys)]
		if !ok {
			i = len(out)
			out = append(out, UsageRow{Keys: r.Keys})
		}
		row := &out[i]
		row.Calls, row.InputTokens, row.OutputTokens = r.Calls, r.InputTokens, r.OutputTokens
		row.TokenCostMicros, row.TokenCurrency = r.CostMicros, r.Currency
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].Keys, out[j].Keys
		for k := range a {
			if a[k].ID != b[k].ID {
				return a[k].ID < b[k].ID
			}
		}
		return false
	})
	return out
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

// UsageDimensions lists what usage can be grouped by, for channels that
// offer the choice (MCP's get_usage declares them as an enum).
func UsageDimensions() []string { return slices.Clone(usageDimensions) }
