package main

import (
	"github.com/klique-ai/klique/internal/cli"

	"github.com/spf13/cobra"

	"github.com/klique-ai/klique/agents/autoscaler"
	"github.com/klique-ai/klique/internal/version"
)

func newAutoscalerCmd(c *cli.CLI) *cobra.Command {
	var o autoscaler.Options
	var tokenFile, localDir string
	var logs logFlags
	var refuseSpot bool
	cmd := &cobra.Command{
		Use:   "autoscaler --pool NAME [--server URL] --token-file FILE",
		Short: "Run the cloud autoscaler of a pool: instances start when work waits and go when idle",
		Long: `Run the autoscaler daemon of a cloud pool. An admin first stores the
autoscaler (GraphQL createAutoscaler: instance types, maximum, timeouts, spot or
on-demand, the vault secrets holding the provider's credentials).

The daemon connects out to the control plane with a worker credential of the
pool and watches the pool's hidden queue. The engine places work on the pool
even when it has no node (scale from zero); the daemon then starts instances
(spot first, on-demand when spot is refused or not fulfilled in time), each
booting a worker with the same credential, terminates instances whose worker
never registers within the spin-up time, and removes workers idle for the
idle timeout. See docs/estates.md.

With the local provider the "instances" are 'klique worker' processes on this
machine, for demos and tests.`,
		Example: `  klique autoscaler --pool cloud-burst --server https://klique.corp --token-file /etc/klique/worker.token
  klique autoscaler --pool cloud-burst --server http://127.0.0.1:8080 --token-file worker.token --local-dir /tmp/klique-instances`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			server, token, err := agentEndpoint(c, tokenFile)
			if err != nil {
				return err
			}
			o.Server, o.Token = server, token
			if o.Log, err = logs.logger(c.Err); err != nil {
				return err
			}
			if localDir != "" {
				o.Local = &autoscaler.Local{Dir: localDir, RefuseSpot: refuseSpot}
				defer o.Local.Close()
			}
			o.Version = version.String()
			a, err := autoscaler.Open(cmd.Context(), o)
			if err != nil {
				return err
			}
			return runDaemon(cmd.Context(), "autoscaler", a.Run)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Pool, "pool", "", "the pool this autoscaler serves (checked against the credential's pool)")
	f.StringVar(&tokenFile, "token-file", "", "file holding a worker credential of the pool (or $KLIQUE_WORKER_TOKEN); instances' workers get it too")
	f.StringVar(&o.WorkerServer, "worker-server", "", "the control plane's URL as instances reach it (default: --server)")
	f.StringVar(&localDir, "local-dir", "", "directory for the worker processes of the local provider")
	f.BoolVar(&refuseSpot, "local-refuse-spot", false, "the local provider refuses spot requests, to show the on-demand fallback")
	logs.add(f, true)
	return cmd
}
