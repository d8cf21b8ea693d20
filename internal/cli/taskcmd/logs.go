package taskcmd

import (
	"fmt"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/cli"
	"github.com/klique-ai/klique/internal/cli/gql"

	"github.com/spf13/cobra"
)

func newTaskCmd(c *cli.CLI) *cobra.Command {
	cmd := &cobra.Command{Use: "task", Short: "Read a task's logs and metrics, or wait for it to end"}
	cmd.AddCommand(newLogsCmd(c), newMetricsCmd(c), newWaitCmd(c))
	return cmd
}

func newLogsCmd(c *cli.CLI) *cobra.Command {
	var follow bool
	var tail int
	cmd := &cobra.Command{
		Use:   "logs TASK_ID",
		Short: "Print a task's log; -f follows it until the task ends",
		Example: `  klique task logs 01930f2e-...
  klique task logs -f --tail 50 01930f2e-...`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			after := 0
			first := true
			for {
				var last *int
				if first && tail > 0 {
					last = &tail
				}
				first = false
				out, err := gql.TaskLogs(cmd.Context(), cl, args[0], &after, last)
				if err != nil {
					return err
				}
				if out.Task == nil {
					return fmt.Errorf("no task %s", args[0])
				}
				for _, l := range out.Task.Logs.Lines {
					w := c.Out
					if l.Stream == "stderr" {
						w = c.Err
					}
					prefix := ""
					if l.Stream == "worker" {
						prefix = "[worker] "
					}
					fmt.Fprintf(w, "%s%s\n", prefix, l.Line)
				}
				after = out.Task.Logs.LastSeq
				more := len(out.Task.Logs.Lines) == 1000
				ended := out.Task.Status == gql.TaskStatusCompleted || out.Task.Status == gql.TaskStatusFailed || out.Task.Status == gql.TaskStatusAborted
				switch {
				case more:
					continue
				case !follow || ended:
					if follow {
						fmt.Fprintf(c.Err, "task %s %s\n", args[0], strings.ToLower(string(out.Task.Status)))
					}
					return nil
				}
				select {
				case <-cmd.Context().Done():
					return nil
				case <-time.After(time.Second):
				}
			}
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new lines until the task ends")
	cmd.Flags().IntVar(&tail, "tail", 0, "start with the last N lines")
	return cmd
}

func newMetricsCmd(c *cli.CLI) *cobra.Command {
	return &cobra.Command{
		Use:   "metrics TASK_ID",
		Short: "Print the latest value of each metric a task reported",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			out, err := gql.TaskMetrics(cmd.Context(), cl, args[0])
			if err != nil {
				return err
			}
			if out.Task == nil {
				return fmt.Errorf("no task %s", args[0])
			}
			if c.Output != "table" {
				return c.PrintData(out.Task.LastMetrics)
			}
			var rows [][]string
			for _, m := range out.Task.LastMetrics {
				rows = append(rows, []string{m.Name, cli.Text(m.Value), cli.Text(m.Step), m.At})
			}
			c.Table([]string{"METRIC", "VALUE", "STEP", "AT"}, rows)
			return nil
		},
	}
}
