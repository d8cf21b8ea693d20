package taskcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/klique-ai/klique/internal/cli"
	"github.com/klique-ai/klique/internal/cli/gql"

	"github.com/Khan/genqlient/graphql"
	"github.com/spf13/cobra"
)

// Runs in the code's loop: 'klique compare' (with a regression gate),
// 'klique task wait' and 'klique report --markdown', the commands the CI
// examples under examples/ci run. All of them read the public GraphQL API;
// the comparison is the platform's (docs/experiments.md).

// comparison is compareTasks' answer, as the CLI reads it and -o json has
// always printed it.
type comparison struct {
	Tasks []struct {
		ID, Name, Status string
	}
	Parameters []struct {
		Name    string
		Values  []*string
		Differs bool
	}
	Metrics []struct {
		Name, Direction string
		Differs         bool
		Final, Best     []*struct {
			Value float64
			Step  int64
		}
	}
	Code struct {
		Repositories, Commits             []*string
		DiffFiles, DiffAdded, DiffRemoved []int
		Differs                           bool
	}
}

func newCompareCmd(c *cli.CLI) *cobra.Command {
	var baseline string
	var failIf []string
	cmd := &cobra.Command{
		Use:   "compare ID ID... | compare --baseline ID ID... [--fail-if RULE]",
		Short: "Put runs side by side; with --fail-if, fail when a metric regressed against the baseline",
		Long: `Put two to ten runs side by side: their parameters (* marks those that
differ), each metric's final value with its best in brackets, and the code
each ran.

--baseline ID compares the runs against a baseline run. --fail-if RULE
(repeatable) then exits with status 1 when any run breaks a rule. A rule is
METRIC OP VALUE, where OP is <, <=, >, >=, == or !=, and VALUE is a number
or "baseline" with an optional "+ N", "- N" or "* N": for example
"accuracy < baseline - 0.01" or "loss > baseline * 1.05". It reads each
run's final value of the metric (the last it reported); a run that did not
report the metric breaks the rule too.`,
		Example: `  klique compare 01930f2e-... 01930f3a-...
  klique compare --baseline 01930f2e-... 01930f3a-... --fail-if "accuracy < baseline - 0.01"`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ids := args
			if baseline != "" {
				ids = append([]string{baseline}, args...)
			}
			if len(ids) < 2 {
				return cli.Usagef("give two to ten run IDs to compare (or --baseline ID and at least one more)")
			}
			var rules []failRule
			for _, s := range failIf {
				r, err := parseFailRule(s)
				if err != nil {
					return cli.Usage(err)
				}
				rules = append(rules, r)
			}
			if len(rules) > 0 && baseline == "" {
				return cli.Usagef("--fail-if compares against a baseline: give it with --baseline ID")
			}
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			cmp, err := compare(cmd.Context(), cl, ids)
			if err != nil {
				return err
			}
			if c.Output != "table" {
				if err := c.Print(cmp); err != nil {
					return err
				}
			} else {
				printComparison(c.Out, cmp)
			}
			if broken := cmp.check(rules); len(broken) > 0 {
				return fmt.Errorf("regression against baseline %s:\n  %s", ids[0], strings.Join(broken, "\n  "))
			}
			if len(rules) > 0 && c.Output == "table" {
				fmt.Fprintf(c.Out, "no regression against the baseline (%d rules)\n", len(rules))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&baseline, "baseline", "", "the run the others are compared against")
	cmd.Flags().StringArrayVar(&failIf, "fail-if", nil, `a rule that fails the command, such as "accuracy < baseline - 0.01" (repeatable)`)
	return cmd
}

// compare reads compareTasks' answer for ids.
func compare(ctx context.Context, cl graphql.Client, ids []string) (*comparison, error) {
	out, err := gql.CompareTasks(ctx, cl, ids)
	if err != nil {
		return nil, err
	}
	var cmp comparison
	return &cmp, cli.Recast(out.CompareTasks, &cmp)
}

// failRule is one --fail-if rule: the metric's final value of a run,
// compared with a number or with the baseline's value adjusted.
type failRule struct {
	text, metric, op string
	// Against the baseline: baseline ⟨adjust⟩ by; else the number.
	baseline bool
	adjust   byte // '+', '-', '*' or 0
	by       float64
	number   float64
}

var failRuleRE = regexp.MustCompile(`^\s*([A-Za-z0-9_./:-]+)\s*(<=|>=|==|!=|<|>)\s*(?:(baseline)\s*(?:([-+*])\s*([0-9.eE+-]+))?|([-+]?[0-9.eE+-]+))\s*$`)

func parseFailRule(s string) (failRule, error) {
	m := failRuleRE.FindStringSubmatch(s)
	if m == nil {
		return failRule{}, fmt.Errorf(`--fail-if %q: write it as METRIC OP VALUE, where OP is <, <=, >, >=, == or != and VALUE a number or "baseline" with an optional "+ N", "- N" or "* N", as in "accuracy < baseline - 0.01"`, s)
	}
	r := failRule{text: strings.TrimSpace(s), metric: m[1], op: m[2], baseline: m[3] != ""}
	num := func(v string) (float64, error) {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, fmt.Errorf("--fail-if %q: %q is not a number", s, v)
		}
		return f, nil
	}
	var err error
	switch {
	case r.baseline && m[4] != "":
		r.adjust = m[4][0]
		r.by, err = num(m[5])
	case !r.baseline:
		r.number, err = num(m[6])
	}
	return r, err
}

// threshold is what a run's value is compared with.
func (r failRule) threshold(base float64) float64 {
	if !r.baseline {
		return r.number
	}
	switch r.adjust {
	case '+':
		return base + r.by
	case '-':
		return base - r.by
	case '*':
		return base * r.by
	}
	return base
}

func (r failRule) holds(v, th float64) bool {
	switch r.op {
	case "<":
		return v < th
	case "<=":
		return v <= th
	case ">":
		return v > th
	case ">=":
		return v >= th
	case "==":
		return v == th
	}
	return v != th
}

// check returns the rules each run (after the first, the baseline) breaks,
// one line each, saying the values.
func (c *comparison) check(rules []failRule) []string {
	var broken []string
	for _, r := range rules {
		var finals []*struct {
			Value float64
			Step  int64
		}
		for _, m := range c.Metrics {
			if m.Name == r.metric {
				finals = m.Final
			}
		}
		if r.baseline && (len(finals) == 0 || finals[0] == nil) {
			broken = append(broken, fmt.Sprintf("%s: the baseline reported no %s", r.text, r.metric))
			continue
		}
		for i := 1; i < len(c.Tasks); i++ {
			run := c.Tasks[i]
			if len(finals) <= i || finals[i] == nil {
				broken = append(broken, fmt.Sprintf("%s: run %s (%s) reported no %s", r.text, run.Name, run.ID, r.metric))
				continue
			}
			base := 0.0
			if r.baseline {
				base = finals[0].Value
			}
			th := r.threshold(base)
			if v := finals[i].Value; r.holds(v, th) {
				line := fmt.Sprintf("%s: run %s (%s) has %s = %s", r.text, run.Name, run.ID, r.metric, num(v))
				if r.baseline {
					line += fmt.Sprintf(" against %s (the baseline's %s)", num(th), num(base))
				}
				broken = append(broken, line)
			}
		}
	}
	return broken
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

func printComparison(w io.Writer, c *comparison) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(cells ...string) { fmt.Fprintln(tw, strings.Join(cells, "\t")) }
	head := []string{""}
	for _, t := range c.Tasks {
		head = append(head, t.Name+" ("+shortID(t.ID)+")")
	}
	row(head...)
	status := []string{"status"}
	for _, t := range c.Tasks {
		status = append(status, strings.ToLower(t.Status))
	}
	row(status...)
	for _, p := range c.Parameters {
		cells := []string{mark(p.Differs) + p.Name}
		for _, v := range p.Values {
			if v == nil {
				cells = append(cells, "-")
			} else {
				cells = append(cells, *v)
			}
		}
		row(cells...)
	}
	for _, m := range c.Metrics {
		cells := []string{mark(m.Differs) + m.Name + " (" + strings.ToLower(m.Direction) + ")"}
		for i, f := range m.Final {
			if f == nil {
				cells = append(cells, "-")
				continue
			}
			cell := num(f.Value)
			if b := m.Best[i]; b != nil && b.Value != f.Value {
				cell += " [" + num(b.Value) + "]"
			}
			cells = append(cells, cell)
		}
		row(cells...)
	}
	code := []string{mark(c.Code.Differs) + "code"}
	for i := range c.Code.Commits {
		cell := "command"
		if co := c.Code.Commits[i]; co != nil {
			cell = shortID(*co)
		}
		if c.Code.DiffFiles[i] > 0 {
			cell += fmt.Sprintf(" +%d -%d in %d files", c.Code.DiffAdded[i], c.Code.DiffRemoved[i], c.Code.DiffFiles[i])
		}
		code = append(code, cell)
	}
	row(code...)
	_ = tw.Flush()
}

func mark(differs bool) string {
	if differs {
		return "* "
	}
	return "  "
}

func shortID(id string) string { return id[:min(len(id), 8)] }

// newWaitCmd: 'klique task wait', whose exit status is the run's outcome.
func newWaitCmd(c *cli.CLI) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "wait TASK_ID",
		Short: "Wait for a task to end; the exit status says how it ended",
		Long: `Wait until the task ends, then print how. Exit status: 0 when it
completed; 1 when it failed or was aborted; 3 when --timeout passed first
(the task goes on).`,
		Example: `  klique task wait 01930f2e-... --timeout 2h`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			t, err := waitEnded(ctx, cl, args[0])
			if errors.Is(err, context.DeadlineExceeded) && cmd.Context().Err() == nil {
				return cli.ExitError{Code: cli.ExitTimedOut, Err: fmt.Errorf("task %s is still %s after %s", args[0], strings.ToLower(t.Status), timeout)}
			}
			if err != nil {
				return err
			}
			line := fmt.Sprintf("task %s %q %s", t.ID, t.Name, strings.ToLower(t.Status))
			if t.ExitCode != nil {
				line += fmt.Sprintf(" (exit code %d)", *t.ExitCode)
			}
			if t.Reason != "" {
				line += ": " + t.Reason
			}
			if t.Status != "COMPLETED" {
				return errors.New(line)
			}
			fmt.Fprintln(c.Out, line)
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up waiting after this long (e.g. 2h); 0 waits as long as it takes")
	return cmd
}

// waitedTask is what 'task wait' and 'report' read of a task.
type waitedTask struct {
	ID, Name, Status, Reason string
	ExitCode                 *int
}

// waitEnded polls a task until it ends or ctx does; it returns the task
// as last read either way.
func waitEnded(ctx context.Context, cl graphql.Client, id string) (waitedTask, error) {
	delay := 500 * time.Millisecond
	var last waitedTask
	for {
		t, err := outcome(ctx, cl, id)
		if err != nil {
			if ctx.Err() != nil {
				return last, ctx.Err()
			}
			return last, err
		}
		last = t
		switch last.Status {
		case "COMPLETED", "FAILED", "ABORTED":
			return last, nil
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}

// outcome reads a task as 'task wait' and 'report' show it; the zero
// waitedTask when there is no such task.
func outcome(ctx context.Context, cl graphql.Client, id string) (waitedTask, error) {
	out, err := gql.TaskOutcome(ctx, cl, id)
	if err != nil || out.Task == nil {
		return waitedTask{}, err
	}
	t := out.Task
	return waitedTask{ID: t.Id, Name: t.Name, Status: string(t.Status), Reason: t.Reason, ExitCode: t.ExitCode}, nil
}

// newReportCmd: 'klique report ID --markdown', for a pull request comment.
func newReportCmd(c *cli.CLI) *cobra.Command {
	var markdown bool
	var baseline string
	cmd := &cobra.Command{
		Use:   "report TASK_ID [--markdown] [--baseline ID]",
		Short: "Report a run: its outcome, parameters and final metrics, with a link",
		Long: `Report a run: its outcome, parameters and final metrics, and a link to it
on the dashboard. --markdown writes it for a pull request comment;
--baseline ID adds the baseline's values beside the run's.`,
		Example: `  klique report 01930f2e-... --markdown > report.md`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			t, err := outcome(cmd.Context(), cl, args[0])
			if err != nil {
				return err
			}
			m, err := gql.TaskParametersAndMetrics(cmd.Context(), cl, args[0])
			if err != nil {
				return err
			}
			r := runReport{Task: t, Link: strings.TrimRight(cl.BaseURL, "/") + "/#/task/" + t.ID}
			if m.Task != nil {
				r.Parameters = m.Task.Spec.Parameters
				for _, p := range m.Task.LastMetrics {
					r.Metrics = append(r.Metrics, reportMetric{Name: p.Name, Value: p.Value, Step: int64(p.Step)})
				}
			}
			if baseline != "" {
				if r.Baseline, err = compare(cmd.Context(), cl, []string{baseline, args[0]}); err != nil {
					return err
				}
			}
			if !markdown {
				if c.Output != "table" {
					return c.Print(r)
				}
				r.text(c.Out)
				return nil
			}
			r.markdown(c.Out)
			return nil
		},
	}
	cmd.Flags().BoolVar(&markdown, "markdown", false, "write Markdown, for a pull request comment")
	cmd.Flags().StringVar(&baseline, "baseline", "", "a baseline run to show beside this one")
	return cmd
}

type reportMetric struct {
	Name  string
	Value float64
	Step  int64
}

// runReport is a run's report.
type runReport struct {
	Task       waitedTask
	Parameters map[string]string
	Metrics    []reportMetric
	Link       string
	Baseline   *comparison `json:",omitempty"`
}

func (r *runReport) outcome() string {
	s := strings.ToLower(r.Task.Status)
	if r.Task.ExitCode != nil && r.Task.Status != "COMPLETED" {
		s += fmt.Sprintf(" (exit code %d)", *r.Task.ExitCode)
	}
	return s
}

// baselineValue is the baseline's final value of a metric, if compared.
func (r *runReport) baselineValue(metric string) string {
	if r.Baseline == nil {
		return ""
	}
	for _, m := range r.Baseline.Metrics {
		if m.Name == metric && len(m.Final) > 0 && m.Final[0] != nil {
			return num(m.Final[0].Value)
		}
	}
	return "-"
}

func (r *runReport) markdown(w io.Writer) {
	fmt.Fprintf(w, "### Run `%s`: %s\n\n", r.Task.Name, r.outcome())
	if len(r.Parameters) > 0 {
		fmt.Fprintln(w, "| parameter | value |")
		fmt.Fprintln(w, "|---|---|")
		for _, k := range slices.Sorted(maps.Keys(r.Parameters)) {
			fmt.Fprintf(w, "| %s | `%s` |\n", mdCell(k), mdCell(r.Parameters[k]))
		}
		fmt.Fprintln(w)
	}
	if len(r.Metrics) > 0 {
		if r.Baseline != nil {
			fmt.Fprintln(w, "| metric | final | baseline | step |")
			fmt.Fprintln(w, "|---|---|---|---|")
		} else {
			fmt.Fprintln(w, "| metric | final | step |")
			fmt.Fprintln(w, "|---|---|---|")
		}
		for _, m := range r.Metrics {
			if r.Baseline != nil {
				fmt.Fprintf(w, "| %s | %s | %s | %d |\n", mdCell(m.Name), num(m.Value), r.baselineValue(m.Name), m.Step)
			} else {
				fmt.Fprintf(w, "| %s | %s | %d |\n", mdCell(m.Name), num(m.Value), m.Step)
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "[Open the run on Klique](%s) · task `%s`\n", r.Link, r.Task.ID)
}

func (r *runReport) text(w io.Writer) {
	fmt.Fprintf(w, "run %s (%s): %s\n", r.Task.Name, r.Task.ID, r.outcome())
	for _, k := range slices.Sorted(maps.Keys(r.Parameters)) {
		fmt.Fprintf(w, "  %s = %s\n", k, r.Parameters[k])
	}
	for _, m := range r.Metrics {
		fmt.Fprintf(w, "  %s: %s (step %d)\n", m.Name, num(m.Value), m.Step)
	}
	fmt.Fprintln(w, r.Link)
}

// mdCell keeps a value inside its Markdown table cell.
func mdCell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "`", "'").Replace(s)
}
