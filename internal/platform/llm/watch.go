package llm

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// What the dashboard's Models page reads of the gateway besides its
// configuration: the calls on the ledger a caller may see (the live
// traffic and the recent refusals) and what the gateway knows of its
// routes' endpoints. Which calls a caller sees is decided here once
// (SeesModelCall and scopeCalls say the same rule twice, for a call in
// hand and for a ledger query), and it is the rule usage follows: admins
// see the tenant's calls, others their groups' calls, or their own when
// they are in no group; a project-scoped credential only its project's.

// SeesModelCall reports whether p may see a call on the ledger made in a
// group and project by a user.
func (s *LLM) SeesModelCall(p *identity.Principal, groupID, projectID, userID string) bool {
	return seesModelCall(p, groupID, projectID, userID)
}

func seesModelCall(p *identity.Principal, groupID, projectID, userID string) bool {
	if p == nil {
		return false
	}
	if p.ProjectID != "" && projectID != p.ProjectID {
		return false
	}
	if p.IsAdmin() {
		return true
	}
	if len(p.Groups) == 0 {
		return userID == p.UserID
	}
	return p.InGroup(groupID)
}

// scopeCalls narrows a ledger query to the calls p may see, as
// seesModelCall decides for one call.
func scopeCalls(p *identity.Principal, q *store.ModelUsageQuery) {
	if p.ProjectID != "" {
		q.ProjectID = p.ProjectID
	}
	if p.IsAdmin() {
		return
	}
	if len(p.Groups) == 0 {
		q.UserID = p.UserID
		return
	}
	q.GroupIDs = p.GroupIDs()
}

// TenantModelTraffic sums a tenant's calls over [from, to) by alias, group,
// project and user: the rows the live traffic view filters for each of its
// subscribers (SeesModelCall) and adds up by alias. It checks no caller:
// the live domain shares one read among a tenant's subscribers and checks
// each of them on every update.
func (s *LLM) TenantModelTraffic(ctx context.Context, tenantID string, from, to time.Time) ([]store.ModelUsageRow, error) {
	rows, err := s.k.Store.SumModelCalls(ctx, tenantID, store.ModelUsageQuery{From: from, To: to,
		By: []string{store.ByAlias, store.ByGroup, store.ByProject, store.ByUser}})
	if err != nil {
		return nil, fmt.Errorf("sum the gateway's recent calls: %w", err)
	}
	return rows, nil
}

// refusalOutcomes are the outcomes of calls the gateway refused: a
// guardrail blocked them, or a rate limit or a budget stopped them.
var refusalOutcomes = []string{model.CallBlocked, model.CallRateLimited, model.CallOverBudget, "refused"}

// Bounds of ModelRefusals.
const (
	// DefaultRefusals and MaxRefusals bound how many refusals one read lists.
	DefaultRefusals = 50
	MaxRefusals     = 500
	// DefaultRefusalRange is how far back refusals are looked for when no
	// start is given; MaxRefusalRange the furthest.
	DefaultRefusalRange = 24 * time.Hour
	MaxRefusalRange     = 31 * 24 * time.Hour
	// refusalScan bounds the calls one read looks through, newest first:
	// refusals among many answered calls are found by reading the ledger
	// in pages, and a read must not scan a month of a busy gateway.
	refusalScan = 20_000
)

// ModelRefusals lists the most recent calls the gateway refused (blocked
// by a guardrail, over a budget, over a rate limit) since a time (zero:
// DefaultRefusalRange ago), newest first, at most limit (1 to MaxRefusals),
// among the calls the caller may see. It looks through at most the newest
// 20,000 calls of the range.
func (s *LLM) ModelRefusals(ctx context.Context, since time.Time, limit int) ([]*model.ModelCall, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	now := s.k.Now()
	if limit < 1 || limit > MaxRefusals {
		return nil, kernel.Invalid("limit must be between 1 and %d (it is %d)", MaxRefusals, limit)
	}
	if since.IsZero() {
		since = now.Add(-DefaultRefusalRange)
	}
	if !since.Before(now) {
		return nil, kernel.Invalid("since must be in the past (it is %s)", since.UTC().Format(time.RFC3339))
	}
	if now.Sub(since) > MaxRefusalRange {
		return nil, kernel.Invalid("since may be at most 31 days ago: give a later time")
	}
	q := store.ModelUsageQuery{From: since, To: now.Add(time.Second)}
	scopeCalls(p, &q)
	out := []*model.ModelCall{}
	page := store.Page{Limit: 1000}
	for scanned := 0; scanned < refusalScan && len(out) < limit; {
		calls, err := s.k.Store.ListModelCalls(ctx, p.TenantID, q, page)
		if err != nil {
			return nil, s.k.Internal(ctx, fmt.Errorf("list recent model calls: %w", err))
		}
		for _, c := range calls {
			if slices.Contains(refusalOutcomes, c.Outcome) && seesModelCall(p, c.GroupID, c.ProjectID, c.UserID) {
				out = append(out, c)
				if len(out) == limit {
					break
				}
			}
		}
		scanned += len(calls)
		if len(calls) < page.Limit {
			break
		}
		page.After = calls[len(calls)-1].ID
	}
	return out, nil
}

// RefusalReason says in words why the gateway refused a call, from what
// the ledger keeps of it (its outcome, status and guardrail).
func RefusalReason(c *model.ModelCall) string {
	switch c.Outcome {
	case model.CallBlocked:
		if c.Guardrail != "" {
			return "blocked by guardrail " + c.Guardrail
		}
		return "blocked by a guardrail"
	case model.CallOverBudget:
		return "over a token or money budget of project " + c.ProjectName
	case model.CallRateLimited:
		return "over a rate limit (requests or tokens per minute)"
	}
	return fmt.Sprintf("refused (%s, HTTP %d)", c.Outcome, c.Status)
}

// EndpointHealth is one endpoint of a static route as the gateway sees
// it: healthy, or set aside after a failure until a time.
type EndpointHealth struct {
	Route, Endpoint string
	Healthy         bool
	// SetAsideUntil is when the endpoint is tried first again; nil when
	// it is healthy.
	SetAsideUntil *time.Time
}

// SetAsideReader returns the route endpoints the gateway has set aside,
// with when each is tried first again (gateway.Gateway.SetAside).
type SetAsideReader func() map[string]time.Time

// SetEndpointHealth wires the gateway's view of its endpoints into
// EndpointHealths. The composition root calls it once the gateway exists;
// without one, every endpoint reads healthy.
func (s *LLM) SetEndpointHealth(r SetAsideReader) { s.aside.Store(&r) }

// EndpointHealths lists the endpoints of the tenant's static routes, by
// route and in their order, with what this replica's gateway knows of
// their health. Admins only, like the configuration the endpoints are
// part of.
func (s *LLM) EndpointHealths(ctx context.Context) ([]*EndpointHealth, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := kernel.RequireAdmin(p, "read the health of the gateway's endpoints"); err != nil {
		return nil, err
	}
	e, err := s.k.TenantEstate(ctx, p)
	if err != nil {
		return nil, err
	}
	aside := map[string]time.Time{}
	if r := s.aside.Load(); r != nil && *r != nil {
		aside = (*r)()
	}
	routes := slices.Clone(e.Gateway.Routes)
	sort.Slice(routes, func(i, j int) bool { return routes[i].Name < routes[j].Name })
	out := []*EndpointHealth{}
	for _, r := range routes {
		for _, ep := range s.routeEndpoints(p.TenantID, r) {
			h := &EndpointHealth{Route: r.Name, Endpoint: ep, Healthy: true}
			if until, ok := aside[ep]; ok {
				h.Healthy, h.SetAsideUntil = false, &until
			}
			out = append(out, h)
		}
	}
	return out, nil
}
