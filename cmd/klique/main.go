// Command klique is the one binary of Klique: the control plane (`serve`),
// the agents that run in the estate (`worker` on a host or as a Kubernetes
// controller, `hpc-submitter` on a Slurm/PBS/LSF login node with
// `task-run` inside its jobs, `autoscaler` for cloud pools), and the client
// commands people and CI use (`login`, `apply`, `get`, `enqueue`, ...).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/klique-ai/klique/internal/client"
	"github.com/klique-ai/klique/internal/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// The exit codes of every klique command. Scripts and CI tell a command
// line to fix (exitUsage) from a refusal or failure to report or retry
// (exitFailed) by the code alone; the root command's help documents them.
const (
	exitOK = 0
	// exitFailed: the server refused or failed, or the command could not
	// finish (a file it could not read, a lost connection).
	exitFailed = 1
	// exitUsage: the command line is wrong (an unknown command or flag, a
	// missing or extra argument, a flag value that does not parse), and
	// nothing was done.
	exitUsage = 2
	// exitTimedOut: 'klique task wait' gave up at its --timeout; the task
	// goes on.
	exitTimedOut = 3
)

// run executes one command line and returns its exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	var ce *client.Error
	var ue usageError
	var xe exitError
	switch {
	case errors.As(err, &xe):
		fmt.Fprintf(stderr, "error: %v\n", xe.err)
		return xe.code
	case errors.As(err, &ce):
		fmt.Fprintf(stderr, "error: %v\n", ce)
		return exitFailed
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "error: %v\n", err)
		if cmd != nil {
			fmt.Fprintf(stderr, "see '%s --help'\n", cmd.CommandPath())
		}
		return exitUsage
	default:
		fmt.Fprintf(stderr, "error: %v\n", err)
		return exitFailed
	}
}

// usageError is a mistake in how a command was called.
type usageError struct{ error }

// exitError ends a command with its own exit code.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// cli carries what every client command shares.
type cli struct {
	in       io.Reader
	out, err io.Writer
	server   string
	output   string
}

func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	c := &cli{in: stdin, out: stdout, err: stderr}
	root := &cobra.Command{
		Use:   "klique",
		Short: "Klique: one control plane for a shared GPU estate",
		Long: `Klique governs a shared GPU estate: pools in every environment, profiles,
resource policies and the compute resources people send work to.

  klique serve                      run the control plane
  klique login --key-file FILE      sign in to a control plane
  klique apply -f estate.yaml       describe pools, profiles and policies
  klique enqueue --resource "1 GPU" --project P -- python train.py
  klique get tasks                  see where your work is

Exit status: 0 on success; 1 when the server refused or failed, or the
command could not finish; 2 when the command line is wrong (an unknown
command or flag, a missing or extra argument), in which case nothing was
done; 3 when 'klique task wait' gave up at its --timeout. A mistyped
command or flag is answered with the nearest one.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&c.server, "server", "", "control plane URL (default: from klique login, or $KLIQUE_SERVER)")
	root.PersistentFlags().StringVarP(&c.output, "output", "o", "table", "output format: table, json or yaml")
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(
		newServeCmd(c), newRotateSigningKeyCmd(c),
		&cobra.Command{Use: "version", Short: "Print the version", Args: cobra.NoArgs, RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(c.out, "klique %s\n", version.String())
			return nil
		}},
		newLoginCmd(c), newLogoutCmd(c), newWhoamiCmd(c),
		newApplyCmd(c), newExportCmd(c),
		newGetCmd(c), newCreateCmd(c),
		newEnqueueCmd(c), newRunCmd(c), newAbortCmd(c), newCloneCmd(c), newCompareCmd(c), newReportCmd(c),
		newEngineCmd(c), newPolicyCmd(c), newUsageCmd(c), newSimulateCmd(c),
		newTaskCmd(c), newSecretCmd(c), newWorkerCmd(c), newProjectCmd(c), newAppCmd(c), newStudyCmd(c),
		newAutoscalerCmd(c), newRouterCmd(c),
		newHPCSubmitterCmd(c), newTaskRunCmd(c),
	)
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	checkUsage(root)
	return root
}
