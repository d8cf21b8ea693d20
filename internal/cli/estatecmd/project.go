package estatecmd

import (
	"fmt"

	"github.com/klique-ai/klique/internal/cli"
	"github.com/klique-ai/klique/internal/cli/gql"

	"github.com/spf13/cobra"
)

// newProjectCmd is `klique project`: the project your model calls and
// tasks are for when you name none. The rule is the platform's
// (setDefaultProject, me.defaultProject); this only asks it.
func newProjectCmd(c *cli.CLI) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "project",
		Short: "Show or set the project your calls and tasks are for when you name none",
		Long: `With no subcommand, print the project your model calls and tasks are for
when you name none: your credential's, else the default you set with
'klique project use', else your groups' only project.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			out, err := gql.DefaultProject(cmd.Context(), cl)
			if err != nil {
				return err
			}
			if out.Me.DefaultProject == nil {
				fmt.Fprintln(c.Out, "no default project: pass --project NAME, or set one with 'klique project use NAME'")
				return nil
			}
			fmt.Fprintln(c.Out, out.Me.DefaultProject.Name)
			return nil
		},
	}
	var clear bool
	use := &cobra.Command{
		Use:   "use NAME",
		Short: "Make a project your default, for model calls and tasks that name none",
		Example: `  klique project use fraud-models
  klique project use --clear`,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case clear && len(args) > 0:
				return cli.Usagef("give a project or --clear, not both")
			case !clear && len(args) != 1:
				return cli.Usagef("give one project: klique project use NAME (or --clear)")
			}
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			var project *string
			if !clear {
				project = &args[0]
			}
			out, err := gql.SetDefaultProject(cmd.Context(), cl, project)
			if err != nil {
				return err
			}
			if out.SetDefaultProject == nil {
				fmt.Fprintln(c.Out, "no default project")
				return nil
			}
			fmt.Fprintf(c.Out, "default project: %s\n", out.SetDefaultProject.Name)
			return nil
		},
	}
	use.Flags().BoolVar(&clear, "clear", false, "clear your default project")
	cmd.AddCommand(use, newPriorityCmd(c))
	return cmd
}

// newPriorityCmd is `klique project priority GROUP [PROJECT...]`: a team
// lead's order of the team's projects, which orders queuing among them
// (setProjectPriorities; the platform checks who may).
func newPriorityCmd(c *cli.CLI) *cobra.Command {
	var clear bool
	cmd := &cobra.Command{
		Use:   "priority GROUP [PROJECT...]",
		Short: "Show or set the priority order of a team's projects (setting it: a lead of the group, or an admin)",
		Long: `With only GROUP, print the group's project priority. With projects, set it:
in the group's compute resources a waiting task of an earlier project is
placed before one of a later project; tasks of projects not listed wait
behind the listed ones. --clear removes the order.`,
		Example: `  klique project priority ml-research fraud-models shared-eval
  klique project priority ml-research --clear`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if clear && len(args) > 1 {
				return cli.Usagef("give projects or --clear, not both")
			}
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			var group string
			var projects []string
			if len(args) == 1 && !clear {
				out, err := gql.ProjectPriority(cmd.Context(), cl, args[0])
				if err != nil {
					return err
				}
				group = out.ProjectPriority.Group.Name
				for _, p := range out.ProjectPriority.Projects {
					projects = append(projects, p.Name)
				}
			} else {
				out, err := gql.SetProjectPriorities(cmd.Context(), cl, args[0], append([]string{}, args[1:]...))
				if err != nil {
					return err
				}
				group = out.SetProjectPriorities.Group.Name
				for _, p := range out.SetProjectPriorities.Projects {
					projects = append(projects, p.Name)
				}
			}
			if c.Output != "table" {
				return c.PrintData(map[string]any{"group": group, "projects": append([]string{}, projects...)})
			}
			if len(projects) == 0 {
				fmt.Fprintf(c.Out, "group %s has no project priority: its tasks wait in queue order\n", group)
				return nil
			}
			fmt.Fprintf(c.Out, "project priority of group %s:\n", group)
			for i, p := range projects {
				fmt.Fprintf(c.Out, "%d. %s\n", i+1, p)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&clear, "clear", false, "remove the group's project priority")
	return cmd
}
