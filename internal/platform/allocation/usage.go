package allocation

import (
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

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
	Keys []model.UsageKey
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
	key := func(keys []model.UsageKey) string {
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

// UsageDimensions lists what usage can be grouped by, for channels that
// offer the choice (MCP's get_usage declares them as an enum).
func UsageDimensions() []string { return slices.Clone(usageDimensions) }
