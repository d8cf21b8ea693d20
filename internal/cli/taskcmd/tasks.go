package taskcmd

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/cli"

	"github.com/spf13/cobra"

	"github.com/klique-ai/klique/internal/client"
)

const taskFields = `id name status position reason computeResource { name } group { name } size { text }`

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

func printTask(c *cli.CLI, verb string, t map[string]any) error {
	if c.Output != "table" {
		return c.Print(t)
	}
	pos := ""
	if p := cli.Str(t, "position"); p != "" {
		pos = ", position " + p
	}
	fmt.Fprintf(c.Out, "%s task %s %q on %s of group %s, size %s: %s%s\n", verb, cli.Str(t, "id"), cli.Str(t, "name"),
		quoteName(cli.Str(t, "computeResource", "name")), cli.Str(t, "group", "name"), cli.Str(t, "size", "text"), strings.ToLower(cli.Str(t, "status")), pos)
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
			in := map[string]any{"computeResource": resource}
			if err := g.fill(c, in); err != nil {
				return err
			}
			if name == "" {
				name = taskName(args, entry, repo)
			}
			in["name"] = name
			for k, v := range map[string]string{"project": project, "image": image, "repository": repo,
				"commit": commit, "entryPoint": entry, "workingDir": workdir} {
				if v != "" {
					in[k] = v
				}
			}
			if len(args) > 0 {
				in["command"] = args
			}
			if len(packages) > 0 {
				in["packages"] = packages
			}
			p, err := keyValues("param", params)
			if err != nil {
				return err
			}
			if p != nil {
				in["parameters"] = p
			}
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
func enqueue(cmd *cobra.Command, c *cli.CLI, in map[string]any, quiet bool, wait time.Duration, describe func()) error {
	cl, err := c.Client(cmd.Context())
	if err != nil {
		return err
	}
	var out struct{ EnqueueTask map[string]any }
	cl.Retry = cli.MutationRetry
	if err := cl.Mutate(cmd.Context(), cli.NewIdempotencyKey(), `mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { `+taskFields+` } }`,
		map[string]any{"in": in}, &out); err != nil {
		return projectFlag(err)
	}
	id := cli.Str(out.EnqueueTask, "id")
	if quiet {
		fmt.Fprintln(c.Out, id)
		if wait <= 0 {
			return nil
		}
		return waitPlaced(c, cmd.Context(), cl, id, wait, false)
	}
	if err := printTask(c, "enqueued", out.EnqueueTask); err != nil {
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
		var out struct{ Task map[string]any }
		if err := cl.Do(ctx, `query($id: ID!) { task(id: $id) { id name status position reason pool { name } } }`, map[string]any{"id": id}, &out); err != nil {
			return err
		}
		t := out.Task
		if status := cli.Str(t, "status"); status != "QUEUED" || time.Now().After(deadline) {
			if !say {
				return nil
			}
			if c.Output != "table" {
				return c.Print(t)
			}
			where := strings.ToLower(status)
			if pool := cli.Str(t, "pool", "name"); pool != "" {
				where += " on pool " + pool
			}
			fmt.Fprintf(c.Out, "task %s is %s: %s\n", id, where, cli.Str(t, "reason"))
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
			var out struct{ AbortTask map[string]any }
			if err := cl.Do(cmd.Context(), `mutation($id: ID!, $r: String) { abortTask(id: $id, reason: $r) { `+taskFields+` } }`,
				map[string]any{"id": args[0], "r": reason}, &out); err != nil {
				return err
			}
			return printTask(c, "aborted", out.AbortTask)
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
			vars := map[string]any{"id": args[0], "p": p}
			for k, v := range map[string]string{"name": name, "cr": resource, "group": group} {
				if v != "" {
					vars[k] = v
				}
			}
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			var out struct{ CloneTask map[string]any }
			cl.Retry = cli.MutationRetry
			if err := cl.Mutate(cmd.Context(), cli.NewIdempotencyKey(), `mutation($id: ID!, $p: StringMap, $name: String, $cr: ID, $group: ID) {
				cloneTask(id: $id, parameterOverrides: $p, name: $name, computeResource: $cr, group: $group) { `+taskFields+` } }`, vars, &out); err != nil {
				return err
			}
			if quiet {
				fmt.Fprintln(c.Out, cli.Str(out.CloneTask, "id"))
				return nil
			}
			return printTask(c, "enqueued", out.CloneTask)
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
