// Package taskcmd holds the client commands about tasks: klique enqueue,
// run, abort, clone, compare, report and the task group (logs, metrics,
// wait).
package taskcmd

import (
	"github.com/spf13/cobra"

	"github.com/klique-ai/klique/internal/cli"
)

// Commands are the task commands, for the root to register.
func Commands(c *cli.CLI) []*cobra.Command {
	return []*cobra.Command{
		newEnqueueCmd(c), newRunCmd(c), newAbortCmd(c), newCloneCmd(c), newCompareCmd(c), newReportCmd(c),
		newTaskCmd(c), newQueueCmd(c),
	}
}

// NewEnqueueCmd is klique enqueue, for `klique create task` to present
// under its kubectl-style name.
func NewEnqueueCmd(c *cli.CLI) *cobra.Command { return newEnqueueCmd(c) }
