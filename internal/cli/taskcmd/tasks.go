package taskcmd

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/cli"
	"github.com/klique-ai/klique/internal/cli/gql"

	"github.com/spf13/cobra"

	"github.com/klique-ai/klique/internal/client"
)

// keyValues reads repeated k=v flags.
func keyValues(flag string, list []string) (map[string]string, error) {
	if len(list) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, cli.Usagef("--%s %q: write it as NAME=VALUE", flag, kv)
		}
		out[k] = v
	}
	return out, nil
}

func printTask(c *cli.CLI, verb string, t gql.TaskFields) error {
	if c.Output != "table" {
		return c.PrintData(t)
	}
	pos := ""
	if p := cli.Opt(t.Position); p != "" {
		pos = ", position " + p
	}
	resource, group := "", ""
	if t.ComputeResource != nil {
		resource = t.ComputeResource.Name
	}
	if t.Group != nil {
		group = t.Group.Name
	}
	fmt.Fprintf(c.Out, "%s task %s %q on %s of group %s, size %s: %s%s\n", verb, t.Id, t.Name,
		quoteName(resource), group, t.Size.Text, strings.ToLower(string(t.Status)), pos)
	return nil
}

func quoteName(s string) string { return "'" + s + "'" }

func newEnqueueCmd(c *cli.CLI) *cobra.Command {
	var resource, project, name, image, repo, commit, entry, workdir string
	var params, packages []string
	var g given
	var quiet bool
	cmd := &cobra.Command{
		Use:   "enqueue --resource NAME --project NAME [flags] [-- COMMAND...]",
		Short: "Send a task to a compute resource",
		Long: `Send a task to a compute resource open to you. Give what to run as a
command after --, or as a repository with an entry point. The task waits in
the compute resource's queue for the engine to place it.`,
		Example: `  klique enqueue --resource "1 GPU" --project fraud-models --name train -- python train.py --lr 0.1
  klique enqueue --resource "8 GPUs" --project fraud-models --repo git@git.corp:ml/fraud.git \
      --commit 4f2a9c1 --entry-point train.py --param epochs=10`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if resource == "" {
				return cli.Usagef("say which compute resource with --resource (see: klique get computeresources)")
			}
			if len(args) == 0 && repo == "" {
				return cli.Usagef("say what to run: give a command after `--`, as in %s --resource %q --project NAME -- python train.py (or --repo URL with --entry-point FILE)",
					cmd.CommandPath(), resource)
			}
			in := gql.EnqueueTaskInput{ComputeResource: resource}
			if err := g.fill(c, &in); err != nil {
				return err
			}
			if name == "" {
				name = taskName(args, entry, repo)
			}
			in.Name, in.Project, in.Image, in.Repository = name, cli.Ptr(project), cli.Ptr(image), cli.Ptr(repo)
			in.Commit, in.EntryPoint, in.WorkingDir = cli.Ptr(commit), cli.Ptr(entry), cli.Ptr(workdir)
			in.Command, in.Packages = args, packages
			p, err := keyValues("param", params)
			if err != nil {
				return err
			}
			in.Parameters = p
			return enqueue(cmd, c, in, quiet, g.wait, nil)
		},
	}
	f := cmd.Flags()
	f.StringVar(&resource, "resource", "", "compute resource to send the task to")
	f.StringVar(&project, "project", "", "project the task belongs to")
	f.StringVar(&name, "name", "", "task name (default: from the command)")
	f.StringVar(&image, "image", "", "container image")
	f.StringVar(&repo, "repo", "", "git repository to clone")
	f.StringVar(&commit, "commit", "", "commit to check out")
	f.StringVar(&entry, "entry-point", "", "script to run in the repository")
	f.StringVar(&workdir, "working-dir", "", "working directory in the repository")
	f.StringArrayVar(&params, "param", nil, "parameter NAME=VALUE (repeatable)")
	f.StringArrayVar(&packages, "package", nil, "Python package requirement (repeatable)")
	g.flags(f)
	f.BoolVarP(&quiet, "quiet", "q", false, "print only the task's ID, for scripts: id=$(klique enqueue -q ...)")
	return cmd
}

// enqueue sends in as a new task, with one idempotency key across its
// retries, and says what it made: with quiet only its ID, else the task and
// then, in table output, describe (klique run's account of the code it
// recorded); then it waits up to wait for the engine to place the task.
// klique enqueue, create task and run share it.
func enqueue(cmd *cobra.Command, c *cli.CLI, in gql.EnqueueTaskInput, quiet bool, wait time.Duration, describe func()) error {
	cl, err := c.Client(cmd.Context())
	if err != nil {
		return err
	}
	cl.Retry = cli.MutationRetry
	out, err := gql.EnqueueTask(client.WithIdempotencyKey(cmd.Context(), cli.NewIdempotencyKey()), cl, in)
	if err != nil {
		return projectFlag(err)
	}
	id := out.EnqueueTask.Id
	if quiet {
		fmt.Fprintln(c.Out, id)
		if wait <= 0 {
			return nil
		}
		return waitPlaced(c, cmd.Context(), cl, id, wait, false)
	}
	if err := printTask(c, "enqueued", out.EnqueueTask.TaskFields); err != nil {
		return err
	}
	if describe != nil && c.Output == "table" {
		describe()
	}
	if wait <= 0 {
		return nil
	}
	return waitPlaced(c, cmd.Context(), cl, id, wait, true)
}

// waitPlaced polls a task until it leaves its queue or the wait is over,
// then prints where it is and why.
func waitPlaced(c *cli.CLI, ctx context.Context, cl *client.Client, id string, wait time.Duration, say bool) error {
	deadline := time.Now().Add(wait)
	for {
		out, err := gql.TaskPlacement(ctx, cl, id)
		if err != nil {
			return err
		}
		var t gql.TaskPlacementTask
		if out.Task != nil {
			t = *out.Task
		}
		if t.Status != gql.TaskStatusQueued || time.Now().After(deadline) {
			if !say {
				return nil
			}
			if c.Output != "table" {
				return c.PrintData(out.Task)
			}
			where := strings.ToLower(string(t.Status))
			if t.Pool != nil && t.Pool.Name != "" {
				where += " on pool " + t.Pool.Name
			}
			fmt.Fprintf(c.Out, "task %s is %s: %s\n", id, where, t.Reason)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// taskName derives a name from what the task runs: the entry point, the
// command, or else the repository, so that a task given no --name is never
// refused for its name when something else is what is missing.
func taskName(args []string, entry, repo string) string {
	switch {
	case entry != "":
		return entry
	case len(args) == 0 && repo != "":
		return path.Base(strings.TrimSuffix(strings.TrimRight(repo, "/"), ".git"))
	case len(args) == 0:
		return ""
	}
	name := strings.Join(args, " ")
	if len(name) > 60 {
		name = name[:60]
	}
	return strings.TrimSpace(name)
}

func newAbortCmd(c *cli.CLI) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "abort TASK_ID",
		Short: "Stop a task",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			out, err := gql.AbortTask(cmd.Context(), cl, args[0], &reason)
			if err != nil {
				return err
			}
			return printTask(c, "aborted", out.AbortTask.TaskFields)
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the task's record")
	return cmd
}

func newCloneCmd(c *cli.CLI) *cobra.Command {
	var params []string
	var name, resource, group string
	var quiet bool
	cmd := &cobra.Command{
		Use:     "clone TASK_ID",
		Short:   "Clone a task with changed parameters and enqueue it",
		Example: `  klique clone 01930f2e-... --param lr=0.01`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := keyValues("param", params)
			if err != nil {
				return err
			}
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			cl.Retry = cli.MutationRetry
			out, err := gql.CloneTask(client.WithIdempotencyKey(cmd.Context(), cli.NewIdempotencyKey()), cl, args[0], p, cli.Ptr(name), cli.Ptr(resource), cli.Ptr(group))
			if err != nil {
				return err
			}
			if quiet {
				fmt.Fprintln(c.Out, out.CloneTask.Id)
				return nil
			}
			return printTask(c, "enqueued", out.CloneTask.TaskFields)
		},
	}
	cmd.Flags().StringArrayVar(&params, "param", nil, "parameter to change, NAME=VALUE (repeatable)")
	cmd.Flags().StringVar(&name, "name", "", "name of the new task")
	cmd.Flags().StringVar(&resource, "resource", "", "send it to another compute resource")
	cmd.Flags().StringVar(&group, "group", "", "which group's compute resource")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the new task's ID")
	return cmd
}

// projectFlag says the platform's refusal of a task with no project
// (extensions.reason PROJECT_REQUIRED) in the CLI's words: its --project
// flag in place of the API's field.
func projectFlag(err error) error {
	var ce *client.Error
	if errors.As(err, &ce) && ce.Reason == client.ReasonProjectRequired {
		c := *ce
		c.Message = "say which project the task belongs to: pass --project NAME, or set your default project with 'klique project use NAME'"
		return &c
	}
	return err
}
