package taskcmd

import (
	"fmt"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/cli"

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
				vars := map[string]any{"id": args[0], "after": after}
				if first && tail > 0 {
					vars["tail"] = tail
				}
				first = false
				var out struct {
					Task *struct {
						Status string
						Logs   struct {
							Lines []struct {
								Seq    int
								At     time.Time
								Stream string
								Line   string
							}
							LastSeq   int
							Truncated bool
						}
					}
				}
				if err := cl.Do(cmd.Context(), `query($id: ID!, $after: Int, $tail: Int) { task(id: $id) { status logs(after: $after, first: 1000, tail: $tail) {
					lines { seq at stream line } lastSeq truncated } } }`, vars, &out); err != nil {
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
				ended := out.Task.Status == "COMPLETED" || out.Task.Status == "FAILED" || out.Task.Status == "ABORTED"
				switch {
				case more:
					continue
				case !follow || ended:
					if follow {
						fmt.Fprintf(c.Err, "task %s %s\n", args[0], strings.ToLower(out.Task.Status))
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
			var out struct {
				Task *struct{ LastMetrics []map[string]any }
			}
			if err := cl.Do(cmd.Context(), `query($id: ID!) { task(id: $id) { lastMetrics { name value step at } } }`, map[string]any{"id": args[0]}, &out); err != nil {
				return err
			}
			if out.Task == nil {
				return fmt.Errorf("no task %s", args[0])
			}
			if c.Output != "table" {
				return c.Print(out.Task.LastMetrics)
			}
			var rows [][]string
			for _, m := range out.Task.LastMetrics {
				rows = append(rows, []string{cli.Str(m, "name"), cli.Str(m, "value"), cli.Str(m, "step"), cli.Str(m, "at")})
			}
			c.Table([]string{"METRIC", "VALUE", "STEP", "AT"}, rows)
			return nil
		},
	}
}
