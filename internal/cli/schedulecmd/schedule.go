// Package schedulecmd holds klique schedule: create, list, pause, resume
// and remove schedules, which start a task (a clone of it), a pipeline or
// a study on a cron expression or an event, as their owner
// (docs/schedules.md).
package schedulecmd

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/Khan/genqlient/graphql"
	"github.com/spf13/cobra"

	"github.com/klique-ai/klique/internal/cli"
	"github.com/klique-ai/klique/internal/cli/gql"
)

// Commands are the schedule commands, for the root to register.
func Commands(c *cli.CLI) []*cobra.Command { return []*cobra.Command{newScheduleCmd(c)} }

func newScheduleCmd(c *cli.CLI) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "Start a task, pipeline or study on a cron schedule (UTC) or an event",
		Long: `A schedule starts a task (a clone of it, with --param over its parameters), a
pipeline or a study on a cron expression in UTC, or when an event happens (a
task of a project completes with a tag, an artifact of a name is published, a
run of a pipeline finishes). Every run is made as you, under your group's
policies and quota; if you lose access, the schedule pauses and says why.`,
	}
	cmd.AddCommand(newCreateCmd(c), newListCmd(c),
		newChangeCmd(c, "rm", "Delete a schedule (what it started stays)", deleteSchedule, "deleted"),
		newChangeCmd(c, "pause", "Stop a schedule's firings until resumed", pauseSchedule, "paused"),
		newChangeCmd(c, "resume", "Fire a paused schedule again, from now on", resumeSchedule, "resumed"))
	return cmd
}

func newCreateCmd(c *cli.CLI) *cobra.Command {
	var task, pipeline, study, cron, trigger, project, tag, artifact, triggerPipeline, triggerState, missed string
	var params []string
	cmd := &cobra.Command{
		Use:   "create NAME (--task ID | --pipeline ID | --study ID) (--cron EXPR | --trigger EVENT ...)",
		Short: "Create a schedule",
		Long: `Create a schedule. What it starts, each time it fires:
  --task ID      a clone of the task, with --param over its parameters
  --pipeline ID  a new run of that pipeline run's definition, --param over its parameters
  --study ID     a new study from that study's definition (base task, space, strategy,
                 objective, limits, compute resource), --param over the base task's
                 fixed parameters (a parameter the study searches is refused)
When: --cron with 5 fields in UTC (minute hour day-of-month month
day-of-week) or a descriptor such as @daily; or --trigger:
  task.completed      with --project and --tag: a task of the project completed with the tag
  artifact.published  with --artifact (and optionally --project): an artifact of that name
                      was published on a run you may see
  pipeline.finished   with --project and --trigger-pipeline NAME (and optionally
                      --trigger-state completed|failed|aborted): a run of the pipeline ended
--missed says what a cron schedule does with the runs it missed while the
control plane was down: run-once (the default: one run for all) or skip.`,
		Example: `  klique schedule create nightly --task 0190c2… --cron "0 3 * * *" --param epochs=10
  klique schedule create evaluate --task 0190c3… --trigger task.completed --project fraud-models --tag trained
  klique schedule create weekly-sweep --study 0190c4… --cron "0 4 * * 1" --param epochs=20
  klique schedule create score --task 0190c5… --trigger artifact.published --artifact model.pt --project fraud-models
  klique schedule create report --task 0190c6… --trigger pipeline.finished --project fraud-models --trigger-pipeline nightly --trigger-state completed`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := gql.CreateScheduleInput{Name: args[0], Task: cli.Ptr(task), Pipeline: cli.Ptr(pipeline), Study: cli.Ptr(study), MissedRuns: cli.Ptr(missed)}
			if targets := len(slices.DeleteFunc([]string{task, pipeline, study}, func(s string) bool { return s == "" })); targets != 1 {
				return cli.Usagef("say what the schedule starts with one of --task ID, --pipeline ID or --study ID")
			}
			switch {
			case cron != "" && trigger != "":
				return cli.Usagef("give --cron or --trigger, not both")
			case cron != "":
				in.Cron = &cron
			case trigger != "":
				in.Trigger = &gql.ScheduleTriggerInput{Event: trigger, Project: cli.Ptr(project), Tag: cli.Ptr(tag), Artifact: cli.Ptr(artifact),
					Pipeline: cli.Ptr(triggerPipeline), State: cli.Ptr(triggerState)}
			default:
				return cli.Usagef("say when it runs: --cron \"0 3 * * *\" (UTC), or --trigger task.completed|artifact.published|pipeline.finished with its flags")
			}
			if len(params) > 0 {
				p := map[string]string{}
				for _, kv := range params {
					k, v, ok := strings.Cut(kv, "=")
					if !ok || k == "" {
						return cli.Usagef("--param %q: give NAME=VALUE", kv)
					}
					p[k] = v
				}
				in.Parameters = p
			}
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			out, err := gql.CreateSchedule(cmd.Context(), cl, in)
			if err != nil {
				return err
			}
			s := out.CreateSchedule.ScheduleFields
			if c.Output != "table" {
				return c.PrintData(s)
			}
			fmt.Fprintf(c.Out, "schedule %s created (%s): %s, starts %s %s", s.Name, s.Id, s.When, s.TargetKind, s.TargetId)
			if next := cli.Opt(s.NextRunAt); next != "" {
				fmt.Fprintf(c.Out, "; next run %s", next)
			}
			fmt.Fprintln(c.Out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&task, "task", "", "the task to run again (a clone of it) on each firing")
	f.StringVar(&pipeline, "pipeline", "", "the pipeline to run on each firing")
	f.StringVar(&study, "study", "", "the study to start on each firing")
	f.StringArrayVar(&params, "param", nil, "parameter NAME=VALUE set over the target's (repeatable)")
	f.StringVar(&cron, "cron", "", "5-field cron expression in UTC, or a descriptor such as @daily")
	f.StringVar(&trigger, "trigger", "", "the event that fires it: task.completed, artifact.published or pipeline.finished")
	f.StringVar(&project, "project", "", "task.completed, pipeline.finished (and optionally artifact.published): the project it watches")
	f.StringVar(&tag, "tag", "", "task.completed: the tag the completed task must have")
	f.StringVar(&artifact, "artifact", "", "artifact.published: the artifact's name")
	f.StringVar(&triggerPipeline, "trigger-pipeline", "", "pipeline.finished: the pipeline's name")
	f.StringVar(&triggerState, "trigger-state", "", "pipeline.finished: fire only when the run ends completed, failed or aborted (default: any)")
	f.StringVar(&missed, "missed", "", "run-once (default) or skip: what a cron schedule does with runs missed while the control plane was down")
	return cmd
}

func newListCmd(c *cli.CLI) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List your schedules (all the tenant's for an admin)",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			list, err := schedules(cmd.Context(), cl)
			if err != nil {
				return err
			}
			if c.Output != "table" {
				return c.PrintData(list)
			}
			var rows [][]string
			for _, s := range list {
				state := "active"
				if s.Paused {
					state = "paused: " + s.PausedReason
				}
				last := cli.OrDash(cli.Opt(s.LastRunAt))
				if r := s.LastResult; r != "" {
					last += " " + r
				}
				if e := s.LastError; e != "" {
					last += ": " + e
				}
				rows = append(rows, []string{s.Name, s.Id, s.TargetKind + " " + s.TargetId,
					s.When, cli.OrDash(cli.Opt(s.NextRunAt)), last, state})
			}
			c.Table([]string{"NAME", "ID", "TARGET", "WHEN", "NEXT RUN", "LAST RUN", "STATE"}, rows)
			return nil
		},
	}
}

// newChangeCmd is rm, pause or resume: one mutation on a schedule named
// by id or name.
func newChangeCmd(c *cli.CLI, use, short string, change func(context.Context, graphql.Client, string) (*gql.ScheduleFields, error), done string) *cobra.Command {
	return &cobra.Command{
		Use:   use + " ID|NAME",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			id, err := resolve(cmd.Context(), cl, args[0])
			if err != nil {
				return err
			}
			s, err := change(cmd.Context(), cl, id)
			if err != nil {
				return err
			}
			if c.Output != "table" {
				return c.PrintData(s)
			}
			fmt.Fprintf(c.Out, "schedule %s %s\n", s.Name, done)
			return nil
		},
	}
}

// The changes rm, pause and resume make, each its own mutation.
func deleteSchedule(ctx context.Context, cl graphql.Client, id string) (*gql.ScheduleFields, error) {
	out, err := gql.DeleteSchedule(ctx, cl, id)
	return &out.S.ScheduleFields, err
}

func pauseSchedule(ctx context.Context, cl graphql.Client, id string) (*gql.ScheduleFields, error) {
	out, err := gql.PauseSchedule(ctx, cl, id)
	return &out.S.ScheduleFields, err
}

func resumeSchedule(ctx context.Context, cl graphql.Client, id string) (*gql.ScheduleFields, error) {
	out, err := gql.ResumeSchedule(ctx, cl, id)
	return &out.S.ScheduleFields, err
}

func schedules(ctx context.Context, cl graphql.Client) ([]gql.ScheduleFields, error) {
	out, err := gql.Schedules(ctx, cl)
	if err != nil {
		return nil, err
	}
	list := make([]gql.ScheduleFields, 0, len(out.Schedules))
	for _, s := range out.Schedules {
		list = append(list, s.ScheduleFields)
	}
	return list, nil
}

// resolve finds the id of a schedule given by id or by name among the
// caller's.
func resolve(ctx context.Context, cl graphql.Client, ref string) (string, error) {
	list, err := schedules(ctx, cl)
	if err != nil {
		return "", err
	}
	var named []gql.ScheduleFields
	for _, s := range list {
		if s.Id == ref {
			return ref, nil
		}
		if s.Name == ref {
			named = append(named, s)
		}
	}
	switch len(named) {
	case 0:
		// Let the server answer: its NOT_FOUND is the same for a schedule
		// that does not exist and one that is not the caller's.
		return ref, nil
	case 1:
		return named[0].Id, nil
	}
	var owners []string
	for _, s := range named {
		owners = append(owners, s.Owner+" ("+s.Id+")")
	}
	return "", cli.Usagef("several schedules are named %q: %s; give the id", ref, strings.Join(owners, ", "))
}
