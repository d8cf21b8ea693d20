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
)

const pipelineRunFields = `id name state reason ownerName params createdAt finishedAt
	steps { name state reason dependsOn computeResourceName taskId attempts cachedFromRunId startedAt finishedAt }`

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
			in := map[string]any{"definition": string(def), "params": p}
			if project != "" {
				in["project"] = project
			}
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			var out struct{ RunPipeline map[string]any }
			if err := cl.Do(cmd.Context(), `mutation($in: RunPipelineInput!) { runPipeline(input: $in) { `+pipelineRunFields+` } }`,
				map[string]any{"in": in}, &out); err != nil {
				return err
			}
			run, verb := out.RunPipeline, "started"
			var waitErr error
			if wait > 0 {
				run, waitErr = waitRun(cmd.Context(), c, run, wait)
				verb = ""
			}
			if quiet {
				fmt.Fprintln(c.Out, cli.Str(run, "id"))
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
func waitRun(ctx context.Context, c *cli.CLI, run map[string]any, wait time.Duration) (map[string]any, error) {
	id := cli.Str(run, "id")
	cl, err := c.Client(ctx)
	if err != nil {
		return run, err
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	delay := 250 * time.Millisecond
	for {
		switch state := strings.ToLower(cli.Str(run, "state")); state {
		case "completed":
			return run, nil
		case "pending", "running":
		default: // failed, aborted
			return run, fmt.Errorf("pipeline run %s %s: %s", id, state, cli.Str(run, "reason"))
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return run, ctx.Err()
			}
			return run, cli.ExitError{Code: cli.ExitTimedOut, Err: fmt.Errorf("pipeline run %s is still %s after %s",
				id, strings.ToLower(cli.Str(run, "state")), wait)}
		case <-time.After(delay):
		}
		delay = min(delay*2, 2*time.Second)
		var out struct{ PipelineRun map[string]any }
		if err := cl.Do(wctx, `query($id: ID!) { pipelineRun(id: $id) { `+pipelineRunFields+` } }`, map[string]any{"id": id}, &out); err != nil {
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				continue // the wait ended during the read: say so above
			}
			return run, err
		}
		run = out.PipelineRun
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
			var out struct{ PipelineRun map[string]any }
			if err := cl.Do(cmd.Context(), `query($id: ID!) { pipelineRun(id: $id) { `+pipelineRunFields+` } }`,
				map[string]any{"id": args[0]}, &out); err != nil {
				return err
			}
			return printRun(c, "", out.PipelineRun)
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
			var out struct{ AbortPipelineRun map[string]any }
			if err := cl.Do(cmd.Context(), `mutation($id: ID!, $r: String) { abortPipelineRun(id: $id, reason: $r) { `+pipelineRunFields+` } }`,
				map[string]any{"id": args[0], "r": reason}, &out); err != nil {
				return err
			}
			return printRun(c, "aborted", out.AbortPipelineRun)
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the audit trail and the steps' tasks")
	return cmd
}

// printRun prints a run: a line for it, then a table of its steps.
func printRun(c *cli.CLI, verb string, run map[string]any) error {
	if c.Output != "table" {
		return c.Print(run)
	}
	if verb != "" {
		fmt.Fprintf(c.Out, "%s pipeline run %s\n", verb, cli.Str(run, "id"))
	}
	fmt.Fprintf(c.Out, "%s: %s (%s)\n\n", cli.Str(run, "name"), strings.ToLower(cli.Str(run, "state")), cli.Str(run, "reason"))
	var rows [][]string
	steps, _ := run["steps"].([]any)
	for _, s := range steps {
		st, _ := s.(map[string]any)
		var deps []string
		if ds, ok := st["dependsOn"].([]any); ok {
			for _, d := range ds {
				deps = append(deps, fmt.Sprint(d))
			}
		}
		attempts := ""
		if n, ok := st["attempts"].(float64); ok {
			attempts = strconv.Itoa(int(n))
		}
		rows = append(rows, []string{cli.Str(st, "name"), strings.ToLower(cli.Str(st, "state")), cli.Str(st, "computeResourceName"),
			cli.OrDash(strings.Join(deps, ",")), cli.OrDash(cli.Str(st, "taskId")), attempts, cli.Str(st, "reason")})
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
