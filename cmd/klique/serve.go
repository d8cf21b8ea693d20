package main

import (
	"log/slog"
	"os"

	"github.com/klique-ai/klique/internal/cli"

	"github.com/spf13/cobra"

	"github.com/klique-ai/klique/internal/config"
	"github.com/klique-ai/klique/internal/server"
)

func newServeCmd(c *cli.CLI) *cobra.Command {
	var listen, dataDir, metricsListen string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the control plane",
		Long: `Run the control plane. With no configuration it keeps its state in SQLite
under ./klique-data and listens on 127.0.0.1:8080. On first start it creates
tenant "default", a platform admin "admin" and an API key for it, written to
./klique-data/admin.token. Its start line names every address it serves:
the dashboard (/), GraphQL, GraphiQL, the LLM gateway (/v1), MCP (/mcp) and
where /metrics is, if anywhere.

Environment (the README's Configuration section lists every variable):
KLIQUE_LISTEN, KLIQUE_DATA_DIR, KLIQUE_DATABASE_URL (postgres://),
KLIQUE_REDIS_URL, KLIQUE_BOOTSTRAP_TOKEN, KLIQUE_PUBLIC_URL, KLIQUE_TOKEN_TTL,
KLIQUE_LOG_FORMAT (text|json), KLIQUE_LOG_LEVEL, KLIQUE_OIDC_ISSUER,
KLIQUE_OIDC_JWKS_URL, KLIQUE_OIDC_AUDIENCE, KLIQUE_OIDC_GROUPS_CLAIM,
KLIQUE_OIDC_USERNAME_CLAIM, KLIQUE_OIDC_TENANT, KLIQUE_METRICS_LISTEN,
KLIQUE_METRICS_TOKEN.

/metrics is served on the main listener only with KLIQUE_METRICS_TOKEN (to
'Authorization: Bearer <token>'), or without authentication on a separate
address with --metrics-listen (KLIQUE_METRICS_LISTEN).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.FromEnv(func(k string) string {
				switch {
				case k == "KLIQUE_LISTEN" && listen != "":
					return listen
				case k == "KLIQUE_DATA_DIR" && dataDir != "":
					return dataDir
				case k == "KLIQUE_METRICS_LISTEN" && metricsListen != "":
					return metricsListen
				}
				return os.Getenv(k)
			})
			if err != nil {
				return cli.Usage(err)
			}
			return server.Run(cmd.Context(), cfg, newLogger(cfg, c))
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "", "address to listen on (default 127.0.0.1:8080, or $KLIQUE_LISTEN)")
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "directory for the SQLite store and admin token (default ./klique-data)")
	cmd.Flags().StringVar(&metricsListen, "metrics-listen", "", "serve /metrics without authentication on this separate address, such as 127.0.0.1:9090 (or $KLIQUE_METRICS_LISTEN)")
	return cmd
}

func newLogger(cfg *config.Config, c *cli.CLI) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(c.Err, opts))
	}
	return slog.New(slog.NewTextHandler(c.Err, opts))
}
