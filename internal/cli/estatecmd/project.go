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
	cmd.AddCommand(use)
	return cmd
}
