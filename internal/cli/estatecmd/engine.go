package estatecmd

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/Khan/genqlient/graphql"

	"github.com/klique-ai/klique/internal/cli"
	"github.com/klique-ai/klique/internal/cli/gql"

	"github.com/spf13/cobra"
)

func newEngineCmd(c *cli.CLI) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "engine status|enable|disable",
		Short: "See, disable or enable the compute policy engine",
		Long: `The compute policy engine places waiting work about once a second. An admin
can disable it: nothing is placed or preempted and no budget time is charged
until it is enabled again; work already placed keeps its capacity.`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"status", "enable", "disable"},
		RunE: func(cmd *cobra.Command, args []string) error {
			if actions := cmd.ValidArgs; !slices.Contains(actions, args[0]) {
				hint := ""
				if s := cli.Nearest(args[0], actions); len(s) > 0 {
					hint = " (did you mean " + cli.OrList(s, "") + "?)"
				}
				return cli.Usagef("unknown engine action %q: say status, enable or disable%s", args[0], hint)
			}
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			var st gql.EngineState
			if args[0] == "status" {
				var out *gql.EngineResponse
				out, err = gql.Engine(cmd.Context(), cl)
				st = out.Engine.EngineState
			} else {
				var out *gql.SetEngineEnabledResponse
				out, err = gql.SetEngineEnabled(cmd.Context(), cl, args[0] == "enable")
				st = out.Engine.EngineState
			}
			if err != nil {
				return err
			}
			if c.Output != "table" {
				return c.PrintData(st)
			}
			if st.Enabled {
				fmt.Fprintln(c.Out, "the compute policy engine is enabled")
			} else {
				fmt.Fprintf(c.Out, "the compute policy engine is disabled (by %s since %s)\n", cli.Opt(st.By), cli.Opt(st.Since))
			}
			return nil
		},
	}
	return cmd
}

func newPolicyCmd(c *cli.CLI) *cobra.Command {
	var tree bool
	cmd := &cobra.Command{
		Use:   "policy [GROUP]",
		Short: "Your groups' use against their reservation, limit and time budget",
		Long: `Your groups' use against their reservation, limit and time budget.
--tree shows it level by level of the organisation tree: each department
(with what its whole subtree holds against its reservation and limit), and
the groups and departments in it, indented below it.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			var group *string
			if len(args) == 1 {
				if tree {
					return cli.Usagef("give a group or --tree, not both")
				}
				group = &args[0]
			}
			out, err := gql.PolicyView(cmd.Context(), cl, group)
			if err != nil {
				return err
			}
			if tree {
				return policyTree(c, cmd.Context(), cl, out.PolicyView)
			}
			if c.Output != "table" {
				return c.PrintData(out.PolicyView)
			}
			var rows [][]string
			for _, v := range out.PolicyView {
				rows = append(rows, []string{v.Group.Name,
					fmt.Sprintf("%s / %s / %s", cli.Text(v.HeldGpus), cli.Text(v.ReservationGpus), cli.Text(v.LimitGpus)),
					cli.Text(v.BorrowedGpus), cli.Text(v.HoldingTasks), cli.Text(v.WaitingTasks), budgetText(v.Budget)})
			}
			c.Table([]string{"GROUP", "GPUS HELD / RESERVED / LIMIT", "BORROWED", "TASKS HOLDING", "WAITING", "TIME BUDGET"}, rows)
			return nil
		},
	}
	cmd.Flags().BoolVar(&tree, "tree", false, "show the organisation tree: departments, and the groups in them indented below")
	return cmd
}

// policyTree prints the policy view level by level: each department the
// caller may see, from the top, then what it holds, indented; last the
// groups directly under the tenant. A department's figures are its
// policy's view (its whole subtree's work); one without a policy shows
// what its children reserve and no limit.
func policyTree(c *cli.CLI, ctx context.Context, cl graphql.Client, views []gql.PolicyViewPolicyView) error {
	deps, err := gql.Departments(ctx, cl)
	if err != nil {
		return err
	}
	if c.Output != "table" {
		return c.PrintData(map[string]any{"departments": deps.Departments, "policyView": views})
	}
	byName := map[string]gql.PolicyViewPolicyView{}
	for _, v := range views {
		byName[v.Group.Name] = v
	}
	depByName := map[string]gql.DepartmentRow{}
	inDepartment := map[string]bool{}
	for _, d := range deps.Departments {
		depByName[d.Name] = d
		for _, g := range d.Groups {
			inDepartment[g.Name] = true
		}
	}
	var rows [][]string
	row := func(depth int, name string, v *gql.PolicyViewPolicyView, reserved, effective string) {
		indent := strings.Repeat("  ", depth)
		if v == nil {
			rows = append(rows, []string{indent + name, "- / " + reserved + " / -", effective, "-", "-", "-"})
			return
		}
		rows = append(rows, []string{indent + name,
			fmt.Sprintf("%s / %s / %s", cli.Text(v.HeldGpus), cli.Text(v.ReservationGpus), cli.Text(v.LimitGpus)),
			effective, cli.Text(v.BorrowedGpus), cli.Text(v.WaitingTasks), budgetText(v.Budget)})
	}
	var walk func(d gql.DepartmentRow, depth int)
	walk = func(d gql.DepartmentRow, depth int) {
		effective := "-"
		if d.EffectiveLimitGpus != nil {
			effective = cli.Text(*d.EffectiveLimitGpus)
		}
		var v *gql.PolicyViewPolicyView
		if x, ok := byName[d.Name]; ok {
			v = &x
		}
		row(depth, d.Name+"/", v, cli.Text(d.ReservedGpus), effective)
		for _, sub := range d.Departments {
			if sd, ok := depByName[sub.Name]; ok && depth < 8 {
				walk(sd, depth+1)
			}
		}
		for _, g := range d.Groups {
			if x, ok := byName[g.Name]; ok {
				row(depth+1, g.Name, &x, "", "-")
			}
		}
	}
	for _, d := range deps.Departments {
		if d.Parent == nil {
			walk(d, 0)
		}
	}
	for _, v := range views {
		if _, dep := depByName[v.Group.Name]; !dep && !inDepartment[v.Group.Name] {
			x := v
			row(0, v.Group.Name, &x, "", "-")
		}
	}
	c.Table([]string{"NODE", "GPUS HELD / RESERVED / LIMIT", "EFFECTIVE LIMIT", "BORROWED", "WAITING", "TIME BUDGET"}, rows)
	return nil
}

// budgetText is a group's time budget in its period, as 'klique policy'
// shows it.
func budgetText(b *gql.PolicyViewPolicyViewBudgetBudgetView) string {
	if b == nil {
		return "-"
	}
	budget := fmt.Sprintf("%s of %s h used this %s", cli.Text(b.UsedHours), cli.Text(b.Hours), strings.ToLower(string(b.Period)))
	switch {
	case b.UsedUp:
		budget += ", USED UP until " + b.ResetsAt
	case cli.Opt(b.ProjectedRunOut) != "":
		budget += ", runs out " + *b.ProjectedRunOut
	}
	if b.Alert && !b.UsedUp {
		budget += " (alert)"
	}
	return budget
}

func newUsageCmd(c *cli.CLI) *cobra.Command {
	var from, to, by, user, project, group string
	var budgetsOnly bool
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "GPU-hours, budget hours, model calls, tokens and their cost from the usage ledger, and the token budgets left",
		Long: `GPU-hours, budget hours, model calls, tokens and their cost from the usage ledger.
The table ends with the token and money budgets in their current period, as
the gateway enforces them: used, reserved by calls in flight, left, the burn
rate over the last hour and when the budget runs out at that rate. --budgets
shows the budgets alone (with -o json for scripts; the ledger's rows stay
what -o json prints without it).`,
		Example: `  klique usage --from 2026-11-01 --to 2026-12-01 --by group,pool
  klique usage --by user --project fraud-models -o json
  klique usage --by project,model
  klique usage --budgets --project fraud-models`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if budgetsOnly {
				return tokenBudgets(c, cmd, project, true)
			}
			f, t, err := usageRange(from, to)
			if err != nil {
				return err
			}
			in := gql.UsageInput{From: f.Format(time.RFC3339), To: t.Format(time.RFC3339), User: cli.Ptr(user), Project: cli.Ptr(project), Group: cli.Ptr(group)}
			var dims []string
			if by != "" {
				for _, d := range strings.Split(by, ",") {
					dims = append(dims, strings.ToUpper(strings.TrimSpace(d)))
					in.GroupBy = append(in.GroupBy, gql.UsageDimension(dims[len(dims)-1]))
				}
			}
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			out, err := gql.Usage(cmd.Context(), cl, in)
			if err != nil {
				return err
			}
			if c.Output != "table" {
				return c.PrintData(out.Usage.Rows)
			}
			header := append([]string(nil), dims...)
			header = append(header, "GPU-HOURS", "BUDGET HOURS", "COST", "CALLS", "INPUT TOKENS", "OUTPUT TOKENS", "TOKEN COST")
			var rows [][]string
			for _, r := range out.Usage.Rows {
				var rec []string
				for _, k := range r.Keys {
					rec = append(rec, k.Name)
				}
				rec = append(rec, fmt.Sprintf("%.2f", r.GpuHours), fmt.Sprintf("%.2f", r.BudgetHours), money(r.Cost, r.Currency),
					fmt.Sprintf("%d", r.Calls), fmt.Sprintf("%.0f", r.InputTokens), fmt.Sprintf("%.0f", r.OutputTokens),
					money(r.TokenCost, r.TokenCurrency))
				rows = append(rows, rec)
			}
			if len(rows) == 0 {
				fmt.Fprintf(c.Err, "no usage from %s to %s\n", f.Format(time.RFC3339), t.Format(time.RFC3339))
			} else {
				c.Table(header, rows)
			}
			return tokenBudgets(c, cmd, project, false)
		},
	}
	cmd.Flags().BoolVar(&budgetsOnly, "budgets", false, "show only the token and money budgets in their current period (used, reserved, left, burn rate, run-out)")
	cmd.Flags().StringVar(&from, "from", "", "start of the range: a date (2026-11-01) or RFC 3339 time (default: the 1st of this month, UTC)")
	cmd.Flags().StringVar(&to, "to", "", "end of the range (default: now)")
	cmd.Flags().StringVar(&by, "by", "", "group by: user, project, group, pool, gpu_class, compute_resource, profile, alias, model (comma-separated; model calls have no pool, GPU class, compute resource or profile and GPU work no alias or model: those rows show —)")
	cmd.Flags().StringVar(&user, "user", "", "only this user's usage")
	cmd.Flags().StringVar(&project, "project", "", "only this project's usage")
	cmd.Flags().StringVar(&group, "group", "", "only this group's usage")
	return cmd
}

// money writes an amount with its currency, or "-" for a row without any.
// Amounts below a cent, common for a few calls of a cheap model, keep
// their digits rather than showing as 0.00.
func money(f float64, currency string) string {
	if currency == "" {
		return "-"
	}
	text := fmt.Sprintf("%.2f", f)
	if f != 0 && math.Abs(f) < 0.01 {
		text = strconv.FormatFloat(f, 'f', 6, 64)
	}
	return text + " " + currency
}

// usageRange reads --from and --to: dates or RFC 3339 times, in UTC.
func usageRange(from, to string) (time.Time, time.Time, error) {
	now := time.Now().UTC()
	parse := func(flag, v string, def time.Time) (time.Time, error) {
		if v == "" {
			return def, nil
		}
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			return t, nil
		}
		if t, err := time.Parse("2006-01-02", v); err == nil {
			return t, nil
		}
		return time.Time{}, cli.Usagef("--%s %q: give a date such as 2026-11-01 or a time such as 2026-11-01T09:00:00Z", flag, v)
	}
	f, err := parse("from", from, time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		return f, f, err
	}
	t, err := parse("to", to, now.Add(time.Second))
	return f, t, err
}

// tokenBudgets shows the token and money budgets in their current period
// (of project, or of every project the caller sees): alone, or after the
// usage table, parted from it by a blank line.
func tokenBudgets(c *cli.CLI, cmd *cobra.Command, project string, alone bool) error {
	cl, err := c.Client(cmd.Context())
	if err != nil {
		return err
	}
	out, err := gql.TokenBudgetView(cmd.Context(), cl, cli.Ptr(project))
	if err != nil {
		return err
	}
	if alone && c.Output != "table" {
		return c.PrintData(out.TokenBudgetView)
	}
	if len(out.TokenBudgetView) == 0 {
		if alone {
			fmt.Fprintln(c.Err, "no token budgets you may see")
		}
		return nil
	}
	var rows [][]string
	for _, b := range out.TokenBudgetView {
		amount := func(f float64) string {
			if b.Money {
				return fmt.Sprintf("%.2f", f)
			}
			return fmt.Sprintf("%.0f", f)
		}
		unit, user, runsOut := "tokens", cli.Opt(b.UserName), cli.Opt(b.RunsOutAt)
		if b.Money {
			unit = "money"
		}
		if user == "" {
			user = "(project)"
		}
		if runsOut == "" {
			runsOut = "not before reset"
		}
		rows = append(rows, []string{b.ProjectName, user, strings.ToLower(string(b.Period)), unit,
			amount(b.Limit), amount(b.Used), amount(b.Reserved), amount(b.Left), amount(b.BurnRate), runsOut, b.ResetsAt})
	}
	if !alone {
		fmt.Fprintln(c.Out)
	}
	c.Table([]string{"PROJECT", "USER", "PERIOD", "UNIT", "LIMIT", "USED", "RESERVED", "LEFT", "BURN/H", "RUNS OUT", "RESETS"}, rows)
	return nil
}
