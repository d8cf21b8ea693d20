package allocation

import (
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/estate"
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

// Names of usage keys that stand for no object, so that no row reads blank.
const (
	// NoObject is the key of a dimension a ledger does not have: model
	// calls have no pool, GPU class, compute resource or profile, GPU work
	// no alias or model.
	NoObject = "—"
	// NoModel is the model of calls no model answered: refused by a rate
	// limit or a budget, blocked by an input guardrail, or failed at every
	// model. They cost nothing.
	NoModel = "(no model)"
)

// Usage adds up the ledger over a range, grouped by the dimensions asked
// for: GPU-hours, budget hours and their cost, and beside them the model
// calls, tokens and token cost of the gateway. Neither ledger is dropped
// from any grouping: under a dimension only the other ledger has, its
// totals fall under NoObject, so every grouping adds up to the same total.
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
	for _, d := range in.By {
		if !slices.Contains(usageDimensions, d) {
			return nil, kernel.Invalid("usage cannot be grouped by %q: use %s", d, strings.Join(usageDimensions, ", "))
		}
		if slices.Contains(q.By, d) {
			return nil, kernel.Invalid("usage is grouped by %q twice; give each dimension once", d)
		}
		q.By = append(q.By, d)
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
		if g.IsDepartment() {
			// A department holds no tasks: its usage is its teams'
			// (those the caller sees).
			if q.GroupIDs = teamsBelow(e, g.ID); len(q.GroupIDs) == 0 {
				return nil, nil // (an empty filter would be everyone's)
			}
		}
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
		// not the groups of the user who made it), and a department head
		// the usage of the teams below the department.
		mine := kernel.OverseenGroupIDs(p, e)
		if len(q.GroupIDs) == 0 {
			q.GroupIDs = mine
		}
		if len(q.GroupIDs) == 0 {
			q.UserID = p.UserID // in no group: only their own usage
		}
	}
	gpuRows, err := s.k.Store.SumUsage(ctx, p.TenantID, q)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	mq := store.ModelUsageQuery{From: q.From, To: q.To, By: q.By, UserID: q.UserID, ProjectID: q.ProjectID, GroupIDs: q.GroupIDs}
	tokenRows, err := s.k.Store.SumModelCalls(ctx, p.TenantID, mq)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	return mergeUsage(gpuRows, tokenRows), nil
}

// teamsBelow returns the ids of the teams below the department with id
// in e, by name.
func teamsBelow(e *estate.Estate, id string) []string {
	ids := []string{}
	for _, g := range e.Groups {
		if !g.IsDepartment() && g.ID != id && e.InSubtree(g.ID, id) {
			ids = append(ids, g.ID)
		}
	}
	return ids
}

// mergeUsage joins the rows of the two ledgers by the ids of their keys,
// ordered by those ids as the store orders each ledger's rows. Keys that
// stand for no object are named first (see nameKeys); they have no id, so
// they are joined and ordered by name, after the objects: a GPU row under
// model "—" never takes in the calls under "(no model)".
func mergeUsage(gpu []store.UsageRow, tokens []store.ModelUsageRow) []UsageRow {
	keyID := func(k model.UsageKey) string {
		if k.ID == "" {
			return "\U0010FFFF" + k.Name
		}
		return k.ID
	}
	key := func(keys []model.UsageKey) string {
		ids := make([]string, len(keys))
		for i, k := range keys {
			ids[i] = keyID(k)
		}
		return strings.Join(ids, "\x00")
	}
	for _, r := range gpu {
		nameKeys(r.Keys, gpuDimensions)
	}
	for _, r := range tokens {
		nameKeys(r.Keys, tokenDimensions)
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
			if x, y := keyID(a[k]), keyID(b[k]); x != y {
				return x < y
			}
		}
		return false
	})
	return out
}

// nameKeys names the keys of one ledger's row that stand for no object: a
// dimension the ledger does not have is NoObject, and the model of a call
// no model answered is NoModel, never a blank.
func nameKeys(keys []model.UsageKey, has []string) {
	for i := range keys {
		k := &keys[i]
		switch {
		case !slices.Contains(has, k.Dimension):
			k.ID, k.Name = "", NoObject
		case k.Dimension == store.ByModel && k.ID == "":
			k.Name = NoModel
		}
	}
}

// UsageDimensions lists what usage can be grouped by, for channels that
// offer the choice (MCP's get_usage declares them as an enum).
func UsageDimensions() []string { return slices.Clone(usageDimensions) }
