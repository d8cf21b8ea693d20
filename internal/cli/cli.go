// Package cli is what every klique client command shares: the CLI a
// command runs in (its streams, --server and --output), the root command
// and its exit codes, usage errors and the nearest-name answers to typos,
// table and JSON/YAML output, and the client built from `klique login`'s
// configuration. The commands themselves live in command groups
// (internal/cli/taskcmd, internal/cli/estatecmd, ...), each a package
// whose Commands the root in cmd/klique registers.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/klique-ai/klique/internal/client"
	"github.com/klique-ai/klique/internal/version"
)

// The exit codes of every klique command. Scripts and CI tell a command
// line to fix (ExitUsage) from a refusal or failure to report or retry
// (ExitFailed) by the code alone; the root command's help documents them.
const (
	ExitOK = 0
	// ExitFailed: the server refused or failed, or the command could not
	// finish (a file it could not read, a lost connection).
	ExitFailed = 1
	// ExitUsage: the command line is wrong (an unknown command or flag, a
	// missing or extra argument, a flag value that does not parse), and
	// nothing was done.
	ExitUsage = 2
	// ExitTimedOut: 'klique task wait' gave up at its --timeout, or
	// 'pipeline run' or 'study start' at its --wait; the work goes on.
	ExitTimedOut = 3
)

// Group is a command group: the commands one package adds to the root.
type Group func(c *CLI) []*cobra.Command

// Run executes one command line through a root carrying groups and
// returns its exit code.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, groups ...Group) int {
	root := NewRoot(stdin, stdout, stderr, groups...)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	var ce *client.Error
	var ue UsageError
	var xe ExitError
	switch {
	case errors.As(err, &xe):
		fmt.Fprintf(stderr, "error: %v\n", xe.Err)
		return xe.Code
	case errors.As(err, &ce):
		fmt.Fprintf(stderr, "error: %v\n", ce)
		return ExitFailed
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "error: %v\n", err)
		if cmd != nil {
			fmt.Fprintf(stderr, "see '%s --help'\n", cmd.CommandPath())
		}
		return ExitUsage
	default:
		fmt.Fprintf(stderr, "error: %v\n", err)
		return ExitFailed
	}
}

// UsageError is a mistake in how a command was called.
type UsageError struct{ error }

// Usage marks err as a mistake in how a command was called.
func Usage(err error) error { return UsageError{err} }

// ExitError ends a command with its own exit code.
type ExitError struct {
	Code int
	Err  error
}

func (e ExitError) Error() string { return e.Err.Error() }

// Usagef is a usage error with a message saying what to change.
func Usagef(format string, args ...any) error { return UsageError{fmt.Errorf(format, args...)} }

// CLI carries what every client command shares.
type CLI struct {
	In       io.Reader
	Out, Err io.Writer
	// Server is --server; Output is --output.
	Server string
	Output string
}

// NewRoot returns the klique root command with the commands of groups.
func NewRoot(stdin io.Reader, stdout, stderr io.Writer, groups ...Group) *cobra.Command {
	c := &CLI{In: stdin, Out: stdout, Err: stderr}
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
done; 3 when 'klique task wait' gave up at its --timeout, or 'pipeline
run' or 'study start' at its --wait. A mistyped
command or flag is answered with the nearest one.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&c.Server, "server", "", "control plane URL (default: from klique login, or $KLIQUE_SERVER)")
	root.PersistentFlags().StringVarP(&c.Output, "output", "o", "table", "output format: table, json or yaml")
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(&cobra.Command{Use: "version", Short: "Print the version", Args: cobra.NoArgs, RunE: func(cmd *cobra.Command, _ []string) error {
		fmt.Fprintf(c.Out, "klique %s\n", version.String())
		return nil
	}})
	for _, g := range groups {
		root.AddCommand(g(c)...)
	}
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	checkUsage(root)
	return root
}
