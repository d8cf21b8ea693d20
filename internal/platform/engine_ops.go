package platform

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
func (s *Service) EngineStatus(ctx context.Context) (*EngineStatus, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	st, err := engineStatus(ctx, s.store, p.TenantID, s.Now())
	return st, s.internal(ctx, err)
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
func (s *Service) SetEngineEnabled(ctx context.Context, enabled bool) (*EngineStatus, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	what := "disable the compute policy engine"
	if enabled {
		what = "enable the compute policy engine"
	}
	if err := requireAdmin(p, what); err != nil {
		return nil, err
	}
	var st *EngineStatus
	err = s.write(ctx, p, func(t *txn) error {
		// Exclusive against the engine's apply, which checks the pause
		// under the shared lock: once this returns, no pass in flight
		// places or preempts work on a disabled engine.
		if err := t.q.LockTenant(ctx, p.TenantID); err != nil {
			return err
		}
		cur, err := engineStatus(ctx, t.q, p.TenantID, t.now)
		if err != nil {
			return err
		}
		if cur.Enabled == enabled {
			st = cur
			return nil
		}
		if enabled {
			err = t.q.EndEnginePause(ctx, p.TenantID, t.now)
		} else {
			err = t.q.StartEnginePause(ctx, &model.EnginePause{TenantID: p.TenantID, StartedAt: t.now, ByUserID: p.UserID, ByName: p.UserName})
		}
		if err != nil {
			return err
		}
		st = &EngineStatus{Enabled: enabled, Since: t.now}
		action := "engine.enabled"
		if !enabled {
			action, st.By = "engine.disabled", p.UserName
		}
		return t.record(action, "engine", p.TenantID, "compute policy engine", "", what)
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// TaskReason says, in words a developer can act on, why a task is where it
// is: for a waiting task, its place in line and what holds the head of its
// queue; after a preemption, why it was preempted too.
func (s *Service) TaskReason(ctx context.Context, t *model.Task) (string, error) {
	if t.Status != model.TaskQueued {
		return t.Reason, nil
	}
	pos, err := s.TaskPosition(ctx, t)
	if err != nil {
		return "", err
	}
	qs, err := s.store.GetQueueState(ctx, t.TenantID, t.ComputeResourceID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		qs = nil
	case err != nil:
		return "", s.internal(ctx, err)
	}
	return waitingReason(t, pos, qs), nil
}

// waitingReason says why a queued task at position pos waits, given its
// queue's state (nil before the engine's first pass over it). TaskReason and
// the queueChanged subscription share it.
func waitingReason(t *model.Task, pos int, qs *model.QueueState) string {
	var why string
	switch {
	case qs == nil:
		why = "waiting for the engine's next pass"
		if pos > 1 {
			why = fmt.Sprintf("position %d: waiting behind the tasks ahead of it in its compute resource", pos)
		}
	case pos == 1 && qs.TaskID == t.ID:
		why = qs.Reason
	case pos == 1:
		why = "at the head of its compute resource, waiting for the engine's next pass"
	default:
		why = fmt.Sprintf("position %d: waiting behind the head of its compute resource, which waits because %s", pos, qs.Reason)
	}
	if rest, ok := strings.CutPrefix(t.Reason, engine.PreemptedPrefix); ok {
		why = "requeued at the front of its compute resource after it was preempted (" + rest + "); " + why
	}
	return why
}

// QueueState returns why a compute resource's head waits, or nil when
// nothing waits.
func (s *Service) QueueState(ctx context.Context, computeResourceID string) (*model.QueueState, error) {
	cr, err := s.ComputeResource(ctx, computeResourceID)
	if err != nil {
		return nil, err
	}
	qs, err := s.store.GetQueueState(ctx, cr.TenantID, cr.ID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return qs, s.internal(ctx, err)
}

// PolicyView is a group's use against its policy: what a team lead and its
// developers see, and what admins see for every group.
type PolicyView struct {
	Policy *model.ResourcePolicy
	Group  *model.Group
	// Held is the GPUs the group's work holds now (placed or running);
	// Borrowed is the part above its reservation.
	Held, Borrowed model.MilliGPU
	// Holding counts the group's tasks that hold capacity (placed or
	// running); Waiting those queued.
	Holding int
	Waiting int
	Budget  *BudgetView
	// ComputeResources are the policy's compute resources.
	ComputeResources []*model.ComputeResource
}

// BudgetView is a time budget in its current period.
type BudgetView struct {
	Period model.BudgetPeriod
	// Total, Used and Left are in micro budget-hours.
	Total, Used, Left int64
	// BurnRateMilli is budget hours per hour, in thousandths, of the
	// group's running budgeted work.
	BurnRateMilli int64
	// RunsOutAt is when the budget is projected to run out at the current
	// burn rate, nil when it will not before the reset.
	RunsOutAt *time.Time
	ResetsAt  time.Time
	// AlertThresholdPercent and Alert: the share of the budget used that
	// raises an alert, and whether it is reached.
	AlertThresholdPercent int
	Alert                 bool
	UsedUp                bool
}

// PolicyViews returns the policy view of the caller's groups (every group's
// for admins), or of one group.
func (s *Service) PolicyViews(ctx context.Context, groupRef string) ([]*PolicyView, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	e, err := s.Estate(ctx)
	if err != nil {
		return nil, err
	}
	policies := e.Policies
	if groupRef != "" {
		g, err := findGroup(e, groupRef)
		if err != nil {
			return nil, err
		}
		pol := e.PolicyOfGroup(g.ID)
		if pol == nil {
			return nil, notFound("group %s has no resource policy", g.Name)
		}
		policies = []*model.ResourcePolicy{pol}
	}
	now := s.Now()
	held, err := s.store.ListSchedulable(ctx, p.TenantID, 0)
	if err != nil {
		return nil, s.internal(ctx, err)
	}
	full, err := s.currentEstate(ctx, s.store, p.TenantID)
	if err != nil {
		return nil, s.internal(ctx, err)
	}
	used, err := s.budgetUsed(ctx, p.TenantID, full, now)
	if err != nil {
		return nil, s.internal(ctx, err)
	}
	var out []*PolicyView
	for _, pol := range policies {
		v, err := s.policyView(ctx, p.TenantID, e, full, pol, held, used, now)
		if err != nil {
			return nil, s.internal(ctx, err)
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
func (s *Service) policyView(ctx context.Context, tenantID string, e, full *estate.Estate, pol *model.ResourcePolicy,
	held []store.SchedTask, used map[string]int64, now time.Time) (*PolicyView, error) {
	v := &PolicyView{Policy: pol, Group: e.Group(pol.GroupID), ComputeResources: e.ComputeResourcesOfPolicy(pol.ID)}
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
	if v.Waiting, err = s.store.CountTasks(ctx, tenantID, store.TaskFilter{
		Statuses: []model.TaskStatus{model.TaskQueued}, GroupIDs: []string{pol.GroupID}}); err != nil {
		return nil, fmt.Errorf("count waiting tasks of group %s: %w", pol.GroupID, err)
	}
	if b := pol.Budget; b != nil {
		v.Budget = budgetView(pol, used[pol.ID], rate, now)
	}
	return v, nil
}

func budgetView(pol *model.ResourcePolicy, used, rateMilli int64, now time.Time) *BudgetView {
	b := pol.Budget
	v := &BudgetView{Period: b.Period, Total: b.MilliHours * 1000, Used: used, BurnRateMilli: rateMilli,
		ResetsAt: engine.PeriodEnd(b.Period, now), AlertThresholdPercent: pol.AlertThresholdPercent}
	v.Left = max(0, v.Total-v.Used)
	v.UsedUp = v.Left == 0
	v.Alert = v.Used*100 >= v.Total*int64(pol.AlertThresholdPercent)
	if rateMilli > 0 && !v.UsedUp {
		hours := (float64(v.Left) / 1e6) / (float64(rateMilli) / 1000)
		at := now.Add(time.Duration(hours * float64(time.Hour)))
		if at.Before(v.ResetsAt) {
			v.RunsOutAt = &at
		}
	}
	return v
}

// budgetUsed is what each budgeted policy of a tenant has been charged in
// its current period, computed the way the engine computes it.
func (s *Service) budgetUsed(ctx context.Context, tenantID string, e *estate.Estate, now time.Time) (map[string]int64, error) {
	floor := now
	var budgeted []string
	for _, p := range e.Policies {
		if p.Budget != nil {
			budgeted = append(budgeted, p.ID)
			if st := engine.PeriodStart(p.Budget.Period, now); st.Before(floor) {
				floor = st
			}
		}
	}
	if len(budgeted) == 0 {
		return nil, nil
	}
	intervals, err := s.store.ListPlacements(ctx, tenantID, store.PlacementFilter{From: floor, To: now, PolicyIDs: budgeted})
	if err != nil {
		return nil, err
	}
	pauses, err := s.store.ListEnginePauses(ctx, tenantID, floor, now)
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
func (s *Service) Usage(ctx context.Context, in UsageQuery) ([]UsageRow, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if !in.To.After(in.From) {
		return nil, invalid("the range must end after it starts")
	}
	q := store.UsageQuery{From: in.From, To: in.To, Now: s.Now()}
	gpu, tokens := true, true
	for _, d := range in.By {
		if !slices.Contains(usageDimensions, d) {
			return nil, invalid("usage cannot be grouped by %q: use %s", d, strings.Join(usageDimensions, ", "))
		}
		if slices.Contains(q.By, d) {
			return nil, invalid("usage is grouped by %q twice; give each dimension once", d)
		}
		q.By = append(q.By, d)
		gpu = gpu && slices.Contains(gpuDimensions, d)
		tokens = tokens && slices.Contains(tokenDimensions, d)
	}
	e, err := s.Estate(ctx)
	if err != nil {
		return nil, err
	}
	if in.Group != "" {
		g, err := findGroup(e, in.Group)
		if err != nil {
			return nil, err
		}
		q.GroupIDs = []string{g.ID}
	}
	if in.Project != "" {
		pr, err := findProject(e, in.Project)
		if err != nil {
			return nil, err
		}
		q.ProjectID = pr.ID
	}
	if in.User != "" {
		u, err := s.User(ctx, in.User)
		if err != nil {
			return nil, err
		}
		q.UserID = u.ID
	}
	if p.ProjectID != "" {
		if q.ProjectID != "" && q.ProjectID != p.ProjectID {
			return nil, forbidden("this credential is scoped to another project")
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
		if gpuRows, err = s.store.SumUsage(ctx, p.TenantID, q); err != nil {
			return nil, s.internal(ctx, err)
		}
	}
	if tokens {
		mq := store.ModelUsageQuery{From: q.From, To: q.To, By: q.By, UserID: q.UserID, ProjectID: q.ProjectID, GroupIDs: q.GroupIDs}
		if tokenRows, err = s.store.SumModelCalls(ctx, p.TenantID, mq); err != nil {
			return nil, s.internal(ctx, err)
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
func (s *Service) OverBudget(ctx context.Context, cr *model.ComputeResource) (bool, error) {
	p, err := caller(ctx)
	if err != nil {
		return false, err
	}
	e, err := s.Estate(ctx)
	if err != nil {
		return false, err
	}
	pol := e.Policy(cr.PolicyID)
	if pol == nil || pol.Budget == nil || cr.TenantID != p.TenantID {
		return false, nil
	}
	used, err := s.cachedBudgetUsed(ctx, p.TenantID)
	if err != nil {
		return false, s.internal(ctx, err)
	}
	return used[pol.ID] >= pol.Budget.MilliHours*1000, nil
}

// cachedBudgetUsed is budgetUsed, computed once per request.
func (s *Service) cachedBudgetUsed(ctx context.Context, tenantID string) (map[string]int64, error) {
	c := cacheFrom(ctx)
	if used, ok := c.budgetUsed(tenantID); ok {
		return used, nil
	}
	full, err := s.currentEstate(ctx, s.store, tenantID)
	if err != nil {
		return nil, err
	}
	used, err := s.budgetUsed(ctx, tenantID, full, s.Now())
	if err != nil {
		return nil, err
	}
	c.putBudgetUsed(tenantID, used)
	return used, nil
}
