// Package estatecmd holds the client commands about the estate and its
// governance: apply and export, get and create, the engine, policies,
// usage, the simulator, projects, secrets and apps.
package estatecmd

import (
	"github.com/spf13/cobra"

	"github.com/klique-ai/klique/internal/cli"
)

// Commands are the estate commands, for the root to register.
func Commands(c *cli.CLI) []*cobra.Command {
	return []*cobra.Command{
		newApplyCmd(c), newExportCmd(c),
		newGetCmd(c), newCreateCmd(c),
		newEngineCmd(c), newPolicyCmd(c), newUsageCmd(c), newSimulateCmd(c),
		newSecretCmd(c), newProjectCmd(c), newAppCmd(c),
	}
}
