// Package pipelinecmd holds the client commands of pipelines: klique
// pipeline run, get and abort (docs/pipelines.md), the client of the
// pipeline operations of the GraphQL API.
package pipelinecmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/klique-ai/klique/internal/cli"
	"github.com/klique-ai/klique/internal/cli/gql"
)

// Commands are the pipeline commands, for the root to register.
func Commands(c *cli.CLI) []*cobra.Command { return []*cobra.Command{newPipelineCmd(c)} }

func newPipelineCmd(c *cli.CLI) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pipeline",
		Short: "Run pipelines: graphs of steps, each a task on its own compute resource",
	}
	cmd.AddCommand(newPipelineRunCmd(c), newPipelineGetCmd(c), newPipelineAbortCmd(c))
	return cmd
}

func newPipelineRunCmd(c *cli.CLI) *cobra.Command {
	var file, project string
	var params []string
	var quiet bool
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "run -f FILE [--param NAME=VALUE]... [--wait DURATION]",
		Short: "Start a run of the pipeline a YAML file defines",
		Long: `Start a run of the pipeline FILE defines (docs/pipelines.md). The whole
pipeline is checked first: an unknown step or parameter reference, a cycle,
a bad template or a compute resource not open to you is refused with every
problem named, and nothing runs. --param sets a parameter the pipeline
declares under params:. --wait waits up to that long for the run to end
and shows it then; its exit status is 1 if the run did not complete, 3 if
the wait ended first (the run goes on).`,
		Example: `  klique pipeline run -f examples/pipelines/pipeline.yaml --param lr=0.05
  klique pipeline run -q -f examples/pipelines/pipeline.yaml --wait 10m > run.id`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return cli.Usagef("give the pipeline's file with -f FILE")
			}
			def, err := os.ReadFile(file)
			if err != nil {
				return fmt.Errorf("read the pipeline: %w", err)
			}
			p, err := keyValues(params)
			if err != nil {
				return err
			}
			in := gql.RunPipelineInput{Definition: string(def), Params: p, Project: cli.Ptr(project)}
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			out, err := gql.RunPipeline(cmd.Context(), cl, in)
			if err != nil {
				return err
			}
			run, verb := &out.RunPipeline.PipelineRunFields, "started"
			var waitErr error
			if wait > 0 {
				run, waitErr = waitRun(cmd.Context(), c, run, wait)
				verb = ""
			}
			if quiet {
				fmt.Fprintln(c.Out, run.Id)
			} else if err := printRun(c, verb, run); err != nil {
				return err
			}
			return waitErr
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the pipeline's YAML file")
	cmd.Flags().StringArrayVar(&params, "param", nil, "a parameter of the pipeline, NAME=VALUE (repeatable)")
	cmd.Flags().StringVar(&project, "project", "", "the project, instead of the file's")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the run's ID")
	cmd.Flags().DurationVar(&wait, "wait", 0, "wait up to this long for the run to end (e.g. 10m), then show it")
	return cmd
}

// waitRun polls a run until it has ended or wait has passed, and returns
// it as last read, with an error when it did not complete (exit status 1)
// or is still going (ExitTimedOut), so that a script can tell.
func waitRun(ctx context.Context, c *cli.CLI, run *gql.PipelineRunFields, wait time.Duration) (*gql.PipelineRunFields, error) {
	id := run.Id
	cl, err := c.Client(ctx)
	if err != nil {
		return run, err
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	delay := 250 * time.Millisecond
	for {
		switch state := strings.ToLower(string(run.State)); state {
		case "completed":
			return run, nil
		case "pending", "running":
		default: // failed, aborted
			return run, fmt.Errorf("pipeline run %s %s: %s", id, state, run.Reason)
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return run, ctx.Err()
			}
			return run, cli.ExitError{Code: cli.ExitTimedOut, Err: fmt.Errorf("pipeline run %s is still %s after %s",
				id, strings.ToLower(string(run.State)), wait)}
		case <-time.After(delay):
		}
		delay = min(delay*2, 2*time.Second)
		out, err := gql.PipelineRun(wctx, cl, id)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				continue // the wait ended during the read: say so above
			}
			return run, err
		}
		if run = fields(out.PipelineRun); run == nil {
			run = &gql.PipelineRunFields{Id: id} // gone: neither completed nor going on
		}
	}
}

func newPipelineGetCmd(c *cli.CLI) *cobra.Command {
	return &cobra.Command{
		Use:     "get RUN_ID",
		Short:   "Show a pipeline run and its steps",
		Example: `  klique pipeline get 01930f2e-...`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			out, err := gql.PipelineRun(cmd.Context(), cl, args[0])
			if err != nil {
				return err
			}
			return printRun(c, "", fields(out.PipelineRun))
		},
	}
}

func newPipelineAbortCmd(c *cli.CLI) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:     "abort RUN_ID",
		Short:   "Abort a pipeline run: its running steps are aborted, its pending steps skipped",
		Example: `  klique pipeline abort 01930f2e-... --reason "wrong data"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			out, err := gql.AbortPipelineRun(cmd.Context(), cl, args[0], &reason)
			if err != nil {
				return err
			}
			return printRun(c, "aborted", &out.AbortPipelineRun.PipelineRunFields)
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the audit trail and the steps' tasks")
	return cmd
}

// fields is a run as pipelineRun answered it; nil when there is none.
func fields(run *gql.PipelineRunPipelineRun) *gql.PipelineRunFields {
	if run == nil {
		return nil
	}
	return &run.PipelineRunFields
}

// printRun prints a run: a line for it, then a table of its steps.
func printRun(c *cli.CLI, verb string, run *gql.PipelineRunFields) error {
	if c.Output != "table" {
		return c.PrintData(run)
	}
	if run == nil {
		run = &gql.PipelineRunFields{}
	}
	if verb != "" {
		fmt.Fprintf(c.Out, "%s pipeline run %s\n", verb, run.Id)
	}
	fmt.Fprintf(c.Out, "%s: %s (%s)\n\n", run.Name, strings.ToLower(string(run.State)), run.Reason)
	var rows [][]string
	for _, st := range run.Steps {
		rows = append(rows, []string{st.Name, strings.ToLower(string(st.State)), st.ComputeResourceName,
			cli.OrDash(strings.Join(st.DependsOn, ",")), cli.OrDash(cli.Opt(st.TaskId)), strconv.Itoa(st.Attempts), st.Reason})
	}
	c.Table([]string{"STEP", "STATE", "COMPUTE RESOURCE", "AFTER", "TASK", "ATTEMPTS", "REASON"}, rows)
	return nil
}

// keyValues reads repeated --param NAME=VALUE flags.
func keyValues(list []string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, cli.Usagef("--param %q: write it as NAME=VALUE", kv)
		}
		out[k] = v
	}
	return out, nil
}
