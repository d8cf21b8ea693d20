package mcp

import (
	"context"
	"fmt"
	"strings"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
)

type computeArgs struct {
	Group string `json:"group,omitempty" jsonschema:"only this group (else every group of yours; an admin sees every group)"`
}

type budgetView struct {
	Period    string  `json:"period" jsonschema:"day, week or month, on the UTC calendar"`
	Hours     float64 `json:"hours" jsonschema:"budget hours per period"`
	UsedHours float64 `json:"usedHours"`
	LeftHours float64 `json:"leftHours"`
	UsedUp    bool    `json:"usedUp" jsonschema:"no new budgeted work starts until the reset"`
	Alert     bool    `json:"alert" jsonschema:"the share used has reached the policy's alert threshold"`
	BurnRate  float64 `json:"burnRate" jsonschema:"budget hours per hour the group's running work spends"`
	RunsOutAt string  `json:"runsOutAt,omitempty" jsonschema:"when the budget runs out at that rate, if before the reset"`
	ResetsAt  string  `json:"resetsAt"`
}

type computeResourceView struct {
	Name          string `json:"name" jsonschema:"what to pass as computeResource to enqueue_task"`
	Description   string `json:"description,omitempty"`
	Size          string `json:"size" jsonschema:"GPUs a task gets: 0.5, 1, 8, or nodes x GPUs per node such as 2x8"`
	SizeParameter string `json:"sizeParameter,omitempty" jsonschema:"a task may ask for another size with this parameter"`
	// TimeWeight is budget hours per hour.
	TimeWeight     float64 `json:"timeWeight" jsonschema:"budget hours one hour of a task here costs (0: exempt from the budget)"`
	GPUClass       string  `json:"gpuClass,omitempty"`
	MinGPUMemoryGB int     `json:"minGpuMemoryGb,omitempty"`
	Queued         int     `json:"queued" jsonschema:"tasks waiting in it"`
	HeadWaits      string  `json:"headWaits,omitempty" jsonschema:"why the first waiting task waits, as the engine's last pass found it"`
}

type groupView struct {
	Group            string                 `json:"group"`
	ReservationGPUs  int                    `json:"reservationGpus" jsonschema:"GPUs the group is guaranteed"`
	LimitGPUs        int                    `json:"limitGpus" jsonschema:"the most GPUs the group holds at once, borrowed included"`
	HeldGPUs         float64                `json:"heldGpus" jsonschema:"GPUs its work holds now"`
	BorrowedGPUs     float64                `json:"borrowedGpus" jsonschema:"the part above its reservation, which may be reclaimed"`
	HoldingTasks     int                    `json:"holdingTasks"`
	WaitingTasks     int                    `json:"waitingTasks"`
	Budget           *budgetView            `json:"budget,omitempty" jsonschema:"the group's time budget, when it has one"`
	ComputeResources []*computeResourceView `json:"computeResources"`
}

type projectView struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Group       string `json:"group,omitempty" jsonschema:"the group it belongs to; open to the whole tenant when absent"`
}

type computeView struct {
	User   string `json:"user"`
	Role   string `json:"role" jsonschema:"platform_admin, tenant_admin, member or viewer"`
	Tenant string `json:"tenant"`
	// Project is the project a scoped credential is limited to.
	ScopedToProject string         `json:"scopedToProject,omitempty" jsonschema:"the one project this credential may act in"`
	Groups          []*groupView   `json:"groups" jsonschema:"your groups' policies and the compute resources open to them"`
	Projects        []*projectView `json:"projects" jsonschema:"the projects you may put work in"`
}

type usageArgs struct {
	From    string   `json:"from,omitempty" jsonschema:"start: an RFC 3339 time or a date (00:00 UTC); the start of this month (UTC) when absent"`
	To      string   `json:"to,omitempty" jsonschema:"end, exclusive: an RFC 3339 time or a date (00:00 UTC); now when absent"`
	Mine    bool     `json:"mine,omitempty" jsonschema:"only your own usage (else your groups', or for admins the tenant's)"`
	Project string   `json:"project,omitempty" jsonschema:"only this project's usage"`
	Group   string   `json:"group,omitempty" jsonschema:"only this group's usage"`
	By      []string `json:"by,omitempty" jsonschema:"break the totals down by these, in order (else one total)"`
}

type usageRow struct {
	Keys          map[string]string `json:"keys,omitempty" jsonschema:"the name of each breakdown dimension, such as {\"project\": \"fraud-models\"}"`
	GPUHours      float64           `json:"gpuHours"`
	BudgetHours   float64           `json:"budgetHours" jsonschema:"GPU-hours times the profiles' time weights"`
	Cost          float64           `json:"cost" jsonschema:"GPU cost at the GPU classes' prices"`
	Currency      string            `json:"currency,omitempty"`
	Calls         int64             `json:"calls" jsonschema:"model calls through the LLM gateway"`
	InputTokens   int64             `json:"inputTokens"`
	OutputTokens  int64             `json:"outputTokens"`
	TokenCost     float64           `json:"tokenCost"`
	TokenCurrency string            `json:"tokenCurrency,omitempty"`
}

type usageView struct {
	From string     `json:"from"`
	To   string     `json:"to"`
	By   []string   `json:"by"`
	Rows []usageRow `json:"rows" jsonschema:"one per combination of the breakdown; none when there was no usage"`
	// TokenBudgets are the current period's, whatever the range: what
	// the gateway lets through next is what matters to an agent.
	TokenBudgets []tokenBudgetRow `json:"tokenBudgets" jsonschema:"the token and money budgets in their current period, as the gateway enforces them (whatever the range): each project's and your part of it"`
}

type tokenBudgetRow struct {
	Project   string  `json:"project"`
	User      string  `json:"user,omitempty" jsonschema:"the user whose part of the project's budget this is; empty for the project's whole budget"`
	Period    string  `json:"period"`
	Unit      string  `json:"unit" jsonschema:"tokens, or money (the models' currency)"`
	Limit     float64 `json:"limit"`
	Used      float64 `json:"used" jsonschema:"what settled calls spent in the period"`
	Reserved  float64 `json:"reserved" jsonschema:"what calls in flight hold until they settle"`
	Left      float64 `json:"left" jsonschema:"what a new call may still reserve: limit less used and reserved"`
	BurnRate  float64 `json:"burnRate" jsonschema:"spend per hour over the last hour"`
	RunsOutAt string  `json:"runsOutAt,omitempty" jsonschema:"when left reaches zero at the burn rate; empty if not before the reset"`
	ResetsAt  string  `json:"resetsAt"`
}

// tokenBudgetRows turns the platform's budget views into the tool's rows;
// mine keeps only the caller's own parts.
func tokenBudgetRows(views []*platform.TokenBudgetView, mine string) []tokenBudgetRow {
	out := []tokenBudgetRow{}
	for _, v := range views {
		if mine != "" && v.UserName != mine {
			continue
		}
		r := tokenBudgetRow{Project: v.ProjectName, User: v.UserName, Period: string(v.Period), Unit: "tokens",
			Limit: v.Amount(v.Limit), Used: v.Amount(v.Used), Reserved: v.Amount(v.Reserved), Left: v.Amount(v.Left),
			BurnRate: v.BurnRate(), ResetsAt: stamp(v.ResetsAt)}
		if v.Money {
			r.Unit = "money"
		}
		if v.RunsOutAt != nil {
			r.RunsOutAt = stamp(*v.RunsOutAt)
		}
		out = append(out, r)
	}
	return out
}

func (s *Server) addEstateTools() {
	addTool(s, toolDef{name: "list_compute_resources", title: "List my compute resources",
		description: "Who you are, the compute resources you may send work to (what each gives, its time weight, how many tasks wait in it and why), " +
			"your groups' policy (reservation, limit, GPUs held and borrowed, time budget used and left, when it resets), and the projects you may use."},
		s.listComputeResources)
	addTool(s, toolDef{name: "get_usage", title: "Read usage",
		description: "GPU-hours, budget hours and cost of GPU work, and calls, tokens and cost of model calls, over a time range: " +
			"yours (mine), a project's, a group's, or all you may see, broken down as asked; " +
			"with the token and money budgets in their current period (used, reserved by calls in flight, left, burn rate, projected run-out).",
		enums: map[string][]string{"by": platform.UsageDimensions()}}, s.usage)
}

func (s *Server) listComputeResources(ctx context.Context, in *computeArgs) (*computeView, string, error) {
	p, ok := identity.PrincipalFrom(ctx)
	if !ok {
		return nil, "", fmt.Errorf("mcp: no principal in the context")
	}
	svc := s.svc
	views, err := svc.Allocation.PolicyViews(ctx, strings.TrimSpace(in.Group))
	if err != nil {
		return nil, "", err
	}
	e, err := svc.Allocation.Estate(ctx)
	if err != nil {
		return nil, "", err
	}
	out := &computeView{User: p.UserName, Role: string(p.Role), Tenant: p.TenantName, Groups: []*groupView{}, Projects: []*projectView{}}
	if p.ProjectID != "" {
		if pr := e.Project(p.ProjectID); pr != nil {
			out.ScopedToProject = pr.Name
		}
	}
	crs := 0
	for _, v := range views {
		g := &groupView{Group: v.Group.Name, ReservationGPUs: v.Policy.ReservationGPUs, LimitGPUs: v.Policy.LimitGPUs,
			HeldGPUs: v.Held.Float(), BorrowedGPUs: v.Borrowed.Float(), HoldingTasks: v.Holding, WaitingTasks: v.Waiting,
			ComputeResources: []*computeResourceView{}}
		if b := v.Budget; b != nil {
			g.Budget = &budgetView{Period: string(b.Period), Hours: hours(b.Total), UsedHours: hours(b.Used), LeftHours: hours(b.Left),
				UsedUp: b.UsedUp, Alert: b.Alert, BurnRate: float64(b.BurnRateMilli) / 1000, RunsOutAt: stampPtr(b.RunsOutAt), ResetsAt: stamp(b.ResetsAt)}
		}
		for _, cr := range v.ComputeResources {
			cv := &computeResourceView{Name: cr.Name, Description: cr.Description}
			if pr := e.Profile(cr.ProfileID); pr != nil {
				cv.Size, cv.SizeParameter, cv.TimeWeight, cv.MinGPUMemoryGB = pr.Size.String(), pr.SizeParameter, float64(pr.TimeWeightMilli)/1000, pr.MinGPUMemoryGB
				if c := e.GPUClass(pr.GPUClassID); pr.GPUClassID != "" && c != nil {
					cv.GPUClass = c.Name
				}
			}
			if cv.Queued, err = svc.Tasks.QueuedTasks(ctx, cr.ID); err != nil {
				return nil, "", err
			}
			qs, err := svc.Allocation.QueueState(ctx, cr.ID)
			if err != nil {
				return nil, "", err
			}
			if qs != nil && cv.Queued > 0 {
				cv.HeadWaits = qs.Reason
			}
			g.ComputeResources = append(g.ComputeResources, cv)
			crs++
		}
		out.Groups = append(out.Groups, g)
	}
	for _, pr := range e.Projects {
		pv := &projectView{Name: pr.Name, Description: pr.Description}
		if pr.GroupID != "" {
			pv.Group = e.GroupName(pr.GroupID)
		}
		out.Projects = append(out.Projects, pv)
	}
	return out, fmt.Sprintf("listed %d compute resources of %d groups", crs, len(out.Groups)), nil
}

func (s *Server) usage(ctx context.Context, in *usageArgs) (*usageView, string, error) {
	p, ok := identity.PrincipalFrom(ctx)
	if !ok {
		return nil, "", fmt.Errorf("mcp: no principal in the context")
	}
	now := s.svc.Allocation.Now()
	from, to := engine.PeriodStart(model.PeriodMonth, now), now
	var err error
	if in.From != "" {
		if from, err = parseTime("from", in.From); err != nil {
			return nil, "", err
		}
	}
	if in.To != "" {
		if to, err = parseTime("to", in.To); err != nil {
			return nil, "", err
		}
	}
	// The range and the dimensions are checked by the platform, as for
	// every channel.
	q := platform.UsageQuery{From: from, To: to, By: in.By, Project: in.Project, Group: in.Group}
	if in.Mine {
		q.User = p.UserID
	}
	rows, err := s.svc.Allocation.Usage(ctx, q)
	if err != nil {
		return nil, "", err
	}
	budgets, err := s.svc.LLM.TokenBudgetViews(ctx, in.Project)
	if err != nil {
		return nil, "", err
	}
	mine := ""
	if in.Mine {
		mine = p.UserName
	}
	out := &usageView{From: stamp(from), To: stamp(to), By: append([]string{}, in.By...), Rows: []usageRow{}, TokenBudgets: tokenBudgetRows(budgets, mine)}
	for _, r := range rows {
		row := usageRow{GPUHours: hours(r.MicroGPUHours), BudgetHours: hours(r.MicroBudgetHours), Cost: r.Cost, Currency: r.Currency,
			Calls: r.Calls, InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, TokenCost: money(r.TokenCostMicros), TokenCurrency: r.TokenCurrency}
		if len(r.Keys) > 0 {
			row.Keys = map[string]string{}
			for _, k := range r.Keys {
				row.Keys[k.Dimension] = k.Name
			}
		}
		out.Rows = append(out.Rows, row)
	}
	scope := "their groups'"
	switch {
	case in.Mine:
		scope = "their own"
	case in.Project != "":
		scope = "project " + in.Project + "'s"
	case in.Group != "":
		scope = "group " + in.Group + "'s"
	}
	return out, fmt.Sprintf("read %s usage from %s to %s (%d rows)", scope, out.From, out.To, len(out.Rows)), nil
}
