// Package logincmd holds the commands that sign in to a control plane and
// say who is signed in: klique login, logout and whoami.
package logincmd

import (
	"github.com/spf13/cobra"

	"github.com/klique-ai/klique/internal/cli"
)

// Commands are the sign-in commands, for the root to register.
func Commands(c *cli.CLI) []*cobra.Command {
	return []*cobra.Command{newLoginCmd(c), newLogoutCmd(c), newWhoamiCmd(c)}
}
