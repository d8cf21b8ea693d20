package main

import (
	"fmt"
	"os"

	"github.com/klique-ai/klique/internal/cli"

	"github.com/spf13/cobra"

	"github.com/klique-ai/klique/internal/config"
	"github.com/klique-ai/klique/internal/server"
)

// newRotateSigningKeyCmd is `klique rotate-signing-key`: an operator's
// command, run where `klique serve` runs, with its configuration. It goes
// to the store directly rather than through the API, because the signing
// keys are the control plane's own and no tenant's admin should hold them.
func newRotateSigningKeyCmd(c *cli.CLI) *cobra.Command {
	var dataDir string
	var dropOld bool
	cmd := &cobra.Command{
		Use:   "rotate-signing-key",
		Short: "Make a new key for signing access tokens (operators)",
		Long: `Make a new key for signing access tokens, in the store the control plane
uses (the same KLIQUE_DATABASE_URL or --data-dir as klique serve, and the
same KLIQUE_VAULT_KEY: the keys are sealed by the vault key).

Running replicas sign new tokens with the new key within a minute, without a
restart. Tokens signed with the older key keep working until they expire
(KLIQUE_TOKEN_TTL, an hour by default); then the older key is dropped.
With --drop-old (a key leaked) the older keys are dropped at once: every
token signed before stops working within a minute, and people sign in
again with their API keys.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.FromEnv(func(k string) string {
				if k == "KLIQUE_DATA_DIR" && dataDir != "" {
					return dataDir
				}
				return os.Getenv(k)
			})
			if err != nil {
				return cli.Usage(err)
			}
			kid, err := server.RotateSigningKey(cmd.Context(), cfg, newLogger(cfg, c), dropOld)
			if err != nil {
				return err
			}
			if dropOld {
				fmt.Fprintf(c.Out, "new token signing key %s: the older keys are dropped; tokens they signed stop working within a minute\n", kid)
				return nil
			}
			fmt.Fprintf(c.Out, "new token signing key %s: replicas sign with it within a minute; tokens of the older key verify until they expire\n", kid)
			return nil
		},
	}
	cmd.Flags().BoolVar(&dropOld, "drop-old", false, "drop the older keys now (a key leaked): every token signed before stops working within a minute")
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "the server's data directory (default ./klique-data, or $KLIQUE_DATA_DIR)")
	return cmd
}
