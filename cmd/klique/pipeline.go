package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// 'klique pipeline run/get/abort' (docs/pipelines.md): the client of the
// pipeline operations of the GraphQL API. (This file moves under
// internal/cli with the other client commands.)

const pipelineRunFields = `id name state reason ownerName params createdAt finishedAt
	steps { name state reason dependsOn computeResourceName taskId attempts cachedFromRunId startedAt finishedAt }`

func newPipelineCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pipeline",
		Short: "Run pipelines: graphs of steps, each a task on its own compute resource",
	}
	cmd.AddCommand(newPipelineRunCmd(c), newPipelineGetCmd(c), newPipelineAbortCmd(c))
	return cmd
}

func newPipelineRunCmd(c *cli) *cobra.Command {
	var file, project string
	var params []string
	var quiet bool
	cmd := &cobra.Command{
		Use:   "run -f FILE [--param NAME=VALUE]...",
		Short: "Start a run of the pipeline a YAML file defines",
		Long: `Start a run of the pipeline FILE defines (docs/pipelines.md). The whole
pipeline is checked first: an unknown step or parameter reference, a cycle,
a bad template or a compute resource not open to you is refused with every
problem named, and nothing runs. --param sets a parameter the pipeline
declares under params:.`,
		Example: `  klique pipeline run -f examples/pipelines/pipeline.yaml --param lr=0.05`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return usagef("give the pipeline's file with -f FILE")
			}
			def, err := os.ReadFile(file)
			if err != nil {
				return fmt.Errorf("read the pipeline: %w", err)
			}
			p, err := keyValues("param", params)
			if err != nil {
				return err
			}
			in := map[string]any{"definition": string(def), "params": p}
			if project != "" {
				in["project"] = project
			}
			cl, err := c.client(cmd.Context())
			if err != nil {
				return err
			}
			var out struct{ RunPipeline map[string]any }
			if err := cl.Do(cmd.Context(), `mutation($in: RunPipelineInput!) { runPipeline(input: $in) { `+pipelineRunFields+` } }`,
				map[string]any{"in": in}, &out); err != nil {
				return err
			}
			if quiet {
				fmt.Fprintln(c.out, str(out.RunPipeline, "id"))
				return nil
			}
			return c.printPipelineRun("started", out.RunPipeline)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the pipeline's YAML file")
	cmd.Flags().StringArrayVar(&params, "param", nil, "a parameter of the pipeline, NAME=VALUE (repeatable)")
	cmd.Flags().StringVar(&project, "project", "", "the project, instead of the file's")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the run's ID")
	return cmd
}

func newPipelineGetCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:     "get RUN_ID",
		Short:   "Show a pipeline run and its steps",
		Example: `  klique pipeline get 01930f2e-...`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.client(cmd.Context())
			if err != nil {
				return err
			}
			var out struct{ PipelineRun map[string]any }
			if err := cl.Do(cmd.Context(), `query($id: ID!) { pipelineRun(id: $id) { `+pipelineRunFields+` } }`,
				map[string]any{"id": args[0]}, &out); err != nil {
				return err
			}
			return c.printPipelineRun("", out.PipelineRun)
		},
	}
}

func newPipelineAbortCmd(c *cli) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:     "abort RUN_ID",
		Short:   "Abort a pipeline run: its running steps are aborted, its pending steps skipped",
		Example: `  klique pipeline abort 01930f2e-... --reason "wrong data"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.client(cmd.Context())
			if err != nil {
				return err
			}
			var out struct{ AbortPipelineRun map[string]any }
			if err := cl.Do(cmd.Context(), `mutation($id: ID!, $r: String) { abortPipelineRun(id: $id, reason: $r) { `+pipelineRunFields+` } }`,
				map[string]any{"id": args[0], "r": reason}, &out); err != nil {
				return err
			}
			return c.printPipelineRun("aborted", out.AbortPipelineRun)
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the audit trail and the steps' tasks")
	return cmd
}

// printPipelineRun prints a run: a line for it, then a table of its steps.
func (c *cli) printPipelineRun(verb string, run map[string]any) error {
	if c.output != "table" {
		return c.print(run)
	}
	if verb != "" {
		fmt.Fprintf(c.out, "%s pipeline run %s\n", verb, str(run, "id"))
	}
	fmt.Fprintf(c.out, "%s: %s (%s)\n\n", str(run, "name"), strings.ToLower(str(run, "state")), str(run, "reason"))
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
		rows = append(rows, []string{str(st, "name"), strings.ToLower(str(st, "state")), str(st, "computeResourceName"),
			orDash(strings.Join(deps, ",")), orDash(str(st, "taskId")), attempts, str(st, "reason")})
	}
	c.table([]string{"STEP", "STATE", "COMPUTE RESOURCE", "AFTER", "TASK", "ATTEMPTS", "REASON"}, rows)
	return nil
}
