package taskcmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/klique-ai/klique/internal/cli"
	"github.com/klique-ai/klique/internal/cli/gql"
)

// newQueueCmd is `klique queue`: a team lead's reordering of a compute
// resource's queue. The rule (who may, which tasks) is the platform's
// (moveQueuedTask); this only asks it.
func newQueueCmd(c *cli.CLI) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "Reorder a queue (a lead of the task's group, or an admin)",
	}
	var before, after string
	var front, back bool
	move := &cobra.Command{
		Use:   "move TASK_ID (--before TASK_ID | --after TASK_ID | --front | --back)",
		Short: "Move a waiting task ahead of or behind another waiting task of its compute resource, or to the front or back",
		Example: `  klique queue move 01930f2e-... --before 01930f1a-...
  klique queue move 01930f2e-... --front`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n := 0
			for _, set := range []bool{before != "", after != "", front, back} {
				if set {
					n++
				}
			}
			if n != 1 {
				return cli.Usagef("say where the task goes: exactly one of --before TASK_ID, --after TASK_ID, --front, --back")
			}
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			out, err := gql.MoveQueuedTask(cmd.Context(), cl, args[0], optional(before), optional(after), optionalBool(front), optionalBool(back))
			if err != nil {
				return err
			}
			m := out.MoveQueuedTask
			if c.Output != "table" {
				return c.PrintData(m)
			}
			return printTask(c, fmt.Sprintf("moved from position %d to %d:", m.From, m.To), m.Task.TaskFields)
		},
	}
	move.Flags().StringVar(&before, "before", "", "put the task ahead of this waiting task")
	move.Flags().StringVar(&after, "after", "", "put the task behind this waiting task")
	move.Flags().BoolVar(&front, "front", false, "put the task at the front of its queue")
	move.Flags().BoolVar(&back, "back", false, "put the task at the back of its queue")
	cmd.AddCommand(move)
	return cmd
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func optionalBool(b bool) *bool {
	if !b {
		return nil
	}
	return &b
}
