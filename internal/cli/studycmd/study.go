// Package studycmd holds the client commands about hyperparameter
// searches: klique study start, get, ls and stop (docs/studies.md). They
// read and write through the public GraphQL API; a study file's keys are
// startStudy's input, so the file, the mutation and the MCP tool agree.
package studycmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/klique-ai/klique/internal/cli"
	"github.com/klique-ai/klique/internal/cli/gql"
	"github.com/klique-ai/klique/internal/docbudget"
)

// Commands are the study commands, for the root to register.
func Commands(c *cli.CLI) []*cobra.Command { return []*cobra.Command{newStudyCmd(c)} }

// studyOut is a study as the CLI reads it and -o json has always printed
// it (Go's field names).
type studyOut struct {
	ID, Name, State, Reason, Strategy, Objective, Direction, Summary string
	MaxConcurrent                                                    int
	BudgetTrials                                                     *int
	BudgetGpuHours                                                   *float64
	GpuHours                                                         float64
	Project, ComputeResource, Owner, BaseTaskID                      string
	Trials                                                           []trialOut
	Best                                                             *trialOut
}

type trialOut struct {
	Number        int
	Params        map[string]string
	State         string
	Objective     *float64
	ObjectiveStep int64
	Rung          int
	Reason        string
	TaskID        string
}

func newStudyCmd(c *cli.CLI) *cobra.Command {
	cmd := &cobra.Command{Use: "study", Short: "Hyperparameter searches: start, get, list and stop studies"}
	cmd.AddCommand(newStudyStartCmd(c), newStudyGetCmd(c), newStudyLsCmd(c), newStudyStopCmd(c))
	return cmd
}

func newStudyStartCmd(c *cli.CLI) *cobra.Command {
	var file, base, name, resource, project, group string
	var quiet bool
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "start -f STUDY.yaml [--base TASK_ID] [--wait DURATION]",
		Short: "Start a study: trials cloned from a base task, ranked by an objective",
		Long: `Start a hyperparameter search from a study file (YAML; its keys are the
startStudy mutation's input: name, baseTask, strategy, objective, budget,
space, ...; see examples/studies/). --base, --name, --resource, --project
and --group override the file's. The first trials are enqueued at once, as
you; the control plane runs the rest. --wait waits up to that long for the
study to end and shows it then; its exit status is 1 if the study did not
complete, 3 if the wait ended first (the study goes on).`,
		Example: `  klique study start -f examples/studies/study.yaml --base 01930f2e-...
  klique study start -q -f examples/studies/study.yaml --base 01930f2e-... --wait 30m > study.id`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return cli.Usagef("give the study file with -f STUDY.yaml (- for standard input)")
			}
			in, err := readStudyFile(cmd.InOrStdin(), file)
			if err != nil {
				return err
			}
			for k, v := range map[string]string{"baseTask": base, "name": name, "computeResource": resource, "project": project, "group": group} {
				if v != "" {
					in[k] = v
				}
			}
			if s, _ := in["baseTask"].(string); s == "" {
				return cli.Usagef("say which run the trials clone: --base TASK_ID, or baseTask in the file")
			}
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			r, err := gql.StartStudy(cmd.Context(), cl, in)
			if err != nil {
				return err
			}
			study, err := read(r.StartStudy)
			if err != nil {
				return err
			}
			var waitErr error
			if wait > 0 {
				study, waitErr = waitStudy(cmd.Context(), c, study, wait)
			}
			if quiet {
				fmt.Fprintln(c.Out, study.ID)
			} else if err := printStudy(c, study); err != nil {
				return err
			}
			return waitErr
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the study file (YAML), - for standard input")
	cmd.Flags().StringVar(&base, "base", "", "the id of the run the trials clone")
	cmd.Flags().StringVar(&name, "name", "", "the study's name")
	cmd.Flags().StringVar(&resource, "resource", "", "the trials' compute resource (the base task's by default)")
	cmd.Flags().StringVar(&project, "project", "", "the trials' project (the base task's by default)")
	cmd.Flags().StringVar(&group, "group", "", "whose compute resource, when several of your groups have one of that name")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the study's ID")
	cmd.Flags().DurationVar(&wait, "wait", 0, "wait up to this long for the study to end (e.g. 30m), then show it")
	return cmd
}

// waitStudy polls a study until it has ended or wait has passed, and
// returns it as last read, with an error when it did not complete (exit
// status 1) or is still running (ExitTimedOut), so that a script can tell.
func waitStudy(ctx context.Context, c *cli.CLI, s *studyOut, wait time.Duration) (*studyOut, error) {
	cl, err := c.Client(ctx)
	if err != nil {
		return s, err
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	delay := 250 * time.Millisecond
	for {
		switch state := strings.ToLower(s.State); state {
		case "completed":
			return s, nil
		case "running":
		default: // stopped
			return s, fmt.Errorf("study %s %s: %s", s.ID, state, s.Reason)
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return s, ctx.Err()
			}
			return s, cli.ExitError{Code: cli.ExitTimedOut, Err: fmt.Errorf("study %s is still %s after %s", s.ID, strings.ToLower(s.State), wait)}
		case <-time.After(delay):
		}
		delay = min(delay*2, 2*time.Second)
		r, err := gql.Study(wctx, cl, s.ID)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				continue // the wait ended during the read: say so above
			}
			return s, err
		}
		if s, err = read(r.Study); err != nil {
			return s, err
		}
	}
}

// read takes a study as the API answered it.
func read(from any) (*studyOut, error) {
	var s studyOut
	return &s, cli.Recast(from, &s)
}

// FileBudget bounds a study file before it is decoded (docbudget), as the
// server bounds the documents it reads: a study's search space has a few
// dozen values.
var FileBudget = docbudget.Budget{Document: "study file", MaxBytes: 1 << 20, MaxNodes: 100_000, MaxAliases: 1_000, MaxDepth: 32}

// readStudyFile reads a study file as startStudy's input.
func readStudyFile(stdin io.Reader, file string) (map[string]any, error) {
	var raw []byte
	var err error
	if file == "-" {
		raw, err = io.ReadAll(stdin)
	} else {
		raw, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, fmt.Errorf("read the study file: %w", err)
	}
	// A file the budget's parser cannot read is left to the decoder below,
	// which says why in its own words.
	var over *docbudget.Error
	if err := FileBudget.YAML(raw); errors.As(err, &over) {
		return nil, cli.Usagef("%v (in %s)", err, file)
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, cli.Usagef("the study file %s is not YAML: %v", file, err)
	}
	var in map[string]any
	if err := json.Unmarshal(js, &in); err != nil || in == nil {
		return nil, cli.Usagef("the study file %s must be a mapping of startStudy's input (name, strategy, objective, budget, space, ...)", file)
	}
	return in, nil
}

func newStudyGetCmd(c *cli.CLI) *cobra.Command {
	return &cobra.Command{
		Use:   "get STUDY_ID",
		Short: "Show a study: its trials ranked by the objective, and the best so far",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			r, err := gql.Study(cmd.Context(), cl, args[0])
			if err != nil {
				return err
			}
			s, err := read(r.Study)
			if err != nil {
				return err
			}
			return printStudy(c, s)
		},
	}
}

func newStudyLsCmd(c *cli.CLI) *cobra.Command {
	var project string
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the studies you may see, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			r, err := gql.Studies(cmd.Context(), cl, cli.Ptr(project))
			if err != nil {
				return err
			}
			var out struct{ Studies []studyOut }
			if err := cli.Recast(r, &out); err != nil {
				return err
			}
			if c.Output != "table" {
				return c.Print(out.Studies)
			}
			var rows [][]string
			for _, s := range out.Studies {
				best := "-"
				if s.Best != nil && s.Best.Objective != nil {
					best = fmt.Sprintf("%s (trial %d)", num(*s.Best.Objective), s.Best.Number)
				}
				rows = append(rows, []string{s.ID, s.Name, strings.ToLower(s.State), s.Strategy, s.Objective, strconv.Itoa(len(s.Trials)), best, s.Project})
			}
			c.Table([]string{"ID", "NAME", "STATE", "STRATEGY", "OBJECTIVE", "TRIALS", "BEST", "PROJECT"}, rows)
			return nil
		},
	}
	cmd.Flags().StringVar(&project, "project", "", "only this project's studies")
	return cmd
}

func newStudyStopCmd(c *cli.CLI) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "stop STUDY_ID",
		Short: "Stop a study: no more trials start, and its running trials are aborted",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			r, err := gql.StopStudy(cmd.Context(), cl, args[0], &reason)
			if err != nil {
				return err
			}
			s, err := read(r.StopStudy)
			if err != nil {
				return err
			}
			return printStudy(c, s)
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the record of the study and its aborted trials")
	return cmd
}

// printStudy writes a study: a summary, then its trials ranked.
func printStudy(c *cli.CLI, s *studyOut) error {
	if c.Output != "table" {
		return c.Print(s)
	}
	dir := "higher is better"
	if s.Direction == "MIN" {
		dir = "lower is better"
	}
	fmt.Fprintf(c.Out, "study %s (%s): %s\n", s.Name, s.ID, strings.ToLower(s.State))
	fmt.Fprintf(c.Out, "%s search of %s (%s, %s), at most %d at once, on %s in %s\n", s.Strategy, s.Objective, s.Summary, dir,
		s.MaxConcurrent, s.ComputeResource, s.Project)
	if s.Reason != "" {
		fmt.Fprintf(c.Out, "ended: %s\n", s.Reason)
	}
	if s.Best != nil && s.Best.Objective != nil {
		fmt.Fprintf(c.Out, "best: trial %d, %s %s, %s (task %s)\n", s.Best.Number, s.Objective, num(*s.Best.Objective), paramText(s.Best.Params), s.Best.TaskID)
	}
	var names []string
	if len(s.Trials) > 0 {
		names = slices.Sorted(maps.Keys(s.Trials[0].Params))
	}
	header := append(append([]string{"RANK", "TRIAL"}, upper(names)...), strings.ToUpper(s.Objective), "STATE", "TASK", "REASON")
	var rows [][]string
	for i, t := range s.Trials {
		row := []string{strconv.Itoa(i + 1), strconv.Itoa(t.Number)}
		for _, n := range names {
			row = append(row, t.Params[n])
		}
		obj := "-"
		if t.Objective != nil {
			obj = fmt.Sprintf("%s @%d", num(*t.Objective), t.ObjectiveStep)
		}
		row = append(row, obj, strings.ToLower(t.State), cli.OrDash(t.TaskID), cli.OrDash(t.Reason))
		rows = append(rows, row)
	}
	c.Table(header, rows)
	return nil
}

func paramText(p map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(p)) {
		parts = append(parts, k+"="+p[k])
	}
	return strings.Join(parts, " ")
}

// num formats a value with six significant digits.
func num(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

func upper(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.ToUpper(s)
	}
	return out
}
