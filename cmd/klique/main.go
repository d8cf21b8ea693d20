// Command klique is the one binary of Klique: the control plane (`serve`),
// the agents that run in the estate (`worker` on a host or as a Kubernetes
// controller, `hpc-submitter` on a Slurm/PBS/LSF login node with
// `task-run` inside its jobs, `autoscaler` for cloud pools), and the client
// commands people and CI use (`login`, `apply`, `get`, `enqueue`, ...).
//
// This package is the composition root and the long-running commands; the
// client commands are command groups under internal/cli, one line each in
// groups below.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/klique-ai/klique/internal/cli"
	"github.com/klique-ai/klique/internal/cli/artifactcmd"
	"github.com/klique-ai/klique/internal/cli/estatecmd"
	"github.com/klique-ai/klique/internal/cli/logincmd"
	"github.com/klique-ai/klique/internal/cli/pipelinecmd"
	"github.com/klique-ai/klique/internal/cli/schedulecmd"
	"github.com/klique-ai/klique/internal/cli/studycmd"
	"github.com/klique-ai/klique/internal/cli/taskcmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// groups are the command groups of the binary: its own long-running
// commands, then the client commands, a package each.
var groups = []cli.Group{
	agentCommands,
	logincmd.Commands,
	estatecmd.Commands,
	taskcmd.Commands,
	artifactcmd.Commands,
	pipelinecmd.Commands,
	studycmd.Commands,
	schedulecmd.Commands,
}

// agentCommands are the commands that start a long-running process: the
// control plane, the agents in the estate, and the control plane's key
// rotation that runs beside them.
func agentCommands(c *cli.CLI) []*cobra.Command {
	return []*cobra.Command{
		newServeCmd(c), newRotateSigningKeyCmd(c),
		newWorkerCmd(c), newAutoscalerCmd(c), newRouterCmd(c),
		newHPCSubmitterCmd(c), newTaskRunCmd(c),
	}
}

// run executes one command line and returns its exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return cli.Run(ctx, args, stdin, stdout, stderr, groups...)
}
