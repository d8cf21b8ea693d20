package taskcmd

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/klique-ai/klique/internal/cli"
	"github.com/klique-ai/klique/internal/cli/gql"

	"github.com/spf13/cobra"

	"github.com/klique-ai/klique/internal/codestate"
	"github.com/klique-ai/klique/internal/runenv"
	pysdk "github.com/klique-ai/klique/sdk/python"
)

func newRunCmd(c *cli.CLI) *cobra.Command {
	var resource, project, name, image string
	var params, packages []string
	var g given
	var includeUntracked, ignoreUntracked, push, diffOnly, noPackages, dryRun, quiet bool
	cmd := &cobra.Command{
		Use:   "run --resource NAME --project NAME [flags] -- COMMAND...",
		Short: "Run a local script on a compute resource, unchanged",
		Long: `Run the command after -- on a compute resource, as it would run here.

From a git checkout, klique run records the remote a worker can clone, the
commit, your uncommitted changes to tracked files (as a diff), the working
directory relative to the repository's root, and the Python packages (from
--package, requirements.txt, pyproject.toml, or the active virtual
environment); the worker clones, checks out, applies the diff, builds (or
reuses) the environment and runs the same command in the same directory.
Outside a checkout, the script the command names is uploaded.

--param NAME=VALUE declares a parameter: a clone may change it, and it
reaches the script as {NAME} in the command's arguments, as the environment
variable KLIQUE_PARAM_NAME, and in the JSON file KLIQUE_PARAMS_FILE.`,
		Example: `  klique run --resource "1 GPU" --project fraud-models -- python train.py --lr 0.1
  klique run --resource "1 GPU" --project fraud-models --param lr=0.1 -- python train.py --lr {lr}
  klique clone TASK_ID --param lr=0.01`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cli.Usagef("say what to run after --, as in %s --resource %q --project NAME -- python train.py --lr {lr}", cmd.CommandPath(), or(resource, "1 GPU"))
			}
			if resource == "" && !dryRun {
				return cli.Usagef("say which compute resource with --resource (see: klique get computeresources)")
			}
			if includeUntracked && ignoreUntracked {
				return cli.Usagef("--include-untracked and --ignore-untracked say opposite things: pass one")
			}
			if push && diffOnly {
				return cli.Usagef("--push and --diff-only say opposite things: pass one")
			}
			if noPackages && len(packages) > 0 {
				return cli.Usagef("--no-packages and --package say opposite things: pass one")
			}
			p, err := keyValues("param", params)
			if err != nil {
				return err
			}
			// What the flags give, read before the capture (which may push).
			var in gql.EnqueueTaskInput
			if err := g.fill(c, &in); err != nil {
				return err
			}
			for _, ref := range runenv.ArgTemplates(args) {
				if _, ok := p[ref]; !ok {
					fmt.Fprintf(c.Err, "note: {%s} in the command names no --param; it is passed as written\n", ref)
				}
			}
			dir, err := os.Getwd()
			if err != nil {
				return fmt.Errorf("read the current directory: %w", err)
			}
			o := codestate.Options{Push: push, DiffOnly: diffOnly, Packages: packages, NoPackages: noPackages, DryRun: dryRun,
				SDK: sdkRequirement(c)}
			switch {
			case includeUntracked:
				o.Untracked = "include"
			case ignoreUntracked:
				o.Untracked = "ignore"
			}
			code, err := codestate.Capture(cmd.Context(), dir, args, o)
			if err != nil {
				return err
			}
			if name == "" {
				name = taskName(args, "", "")
			}
			in.ComputeResource, in.Name, in.Command = resource, name, args
			in.Project, in.Image, in.Repository = cli.Ptr(project), cli.Ptr(image), cli.Ptr(code.Repository)
			in.Commit, in.Diff, in.WorkingDir = cli.Ptr(code.Commit), cli.Ptr(code.Diff), cli.Ptr(code.WorkingDir)
			in.Packages, in.Parameters = code.Packages, p
			if dryRun {
				return c.PrintData(in)
			}
			return enqueue(cmd, c, in, quiet, g.wait, func() { describe(c, code, p) })
		},
	}
	f := cmd.Flags()
	f.StringVar(&resource, "resource", "", "compute resource to run on")
	f.StringVar(&project, "project", "", "project the run belongs to")
	f.StringVar(&name, "name", "", "task name (default: from the command)")
	f.StringVar(&image, "image", "", "container image (docker and Kubernetes workers)")
	f.StringArrayVar(&params, "param", nil, "parameter NAME=VALUE, editable on clone; {NAME} in the command takes it (repeatable)")
	f.StringArrayVar(&packages, "package", nil, "Python package requirement, instead of requirements.txt or pyproject.toml (repeatable)")
	f.BoolVar(&noPackages, "no-packages", false, "install no Python packages")
	f.BoolVar(&includeUntracked, "include-untracked", false, "send the files git does not track with the diff")
	f.BoolVar(&ignoreUntracked, "ignore-untracked", false, "leave the files git does not track behind")
	f.BoolVar(&push, "push", false, "push the current branch when the remote does not have its commit")
	f.BoolVar(&diffOnly, "diff-only", false, "when the remote does not have the commit, record the newest one it has and send everything since as the diff")
	f.BoolVar(&dryRun, "dry-run", false, "print what would be sent, and send nothing")
	g.flags(f)
	f.BoolVarP(&quiet, "quiet", "q", false, "print only the task's ID, for scripts: id=$(klique run -q ...)")
	return cmd
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// describe says what was recorded, so that a user sees what the worker will
// reproduce.
func describe(c *cli.CLI, code *codestate.State, params map[string]string) {
	switch {
	case code.Repository != "":
		where := code.Repository + " at " + code.Commit[:min(len(code.Commit), 12)]
		if code.Changed > 0 {
			where += fmt.Sprintf(", with your uncommitted changes (%d files)", code.Changed)
		}
		if len(code.Untracked) > 0 {
			where += fmt.Sprintf(", %d of them untracked", len(code.Untracked))
		}
		if code.WorkingDir != "" {
			where += ", in " + code.WorkingDir + "/"
		}
		fmt.Fprintln(c.Out, "code: "+where)
	case code.Uploaded != "":
		fmt.Fprintln(c.Out, "code: uploaded "+code.Uploaded)
	}
	if len(code.Packages) > 0 {
		fmt.Fprintf(c.Out, "packages: %d from %s\n", len(code.Packages), code.PackagesFrom)
	}
	if len(params) > 0 {
		names := make([]string, 0, len(params))
		for k := range params {
			names = append(names, k+"="+params[k])
		}
		sort.Strings(names)
		fmt.Fprintln(c.Out, "parameters: "+strings.Join(names, " "))
	}
}

// sdkRequirement is the requirement that installs the Python SDK from the
// control plane the run goes to ("" when none is configured yet).
func sdkRequirement(c *cli.CLI) string {
	cfg, err := cli.LoadConfig()
	if err != nil {
		return ""
	}
	server := cli.FirstNonEmpty(c.Server, os.Getenv("KLIQUE_SERVER"), cfg.Server)
	if server == "" {
		return ""
	}
	return pysdk.Requirement(server)
}
