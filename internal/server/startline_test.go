package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/config"
	"github.com/klique-ai/klique/internal/server"
)

// The start line is what someone who ran `make run` reads: it names every
// address the control plane serves (dashboard, GraphQL, GraphiQL, the
// gateway's /v1, /mcp) and where /metrics really is, which depends on
// KLIQUE_METRICS_LISTEN and KLIQUE_METRICS_TOKEN; each address it names
// answers there.
func TestTheStartLineNamesEveryAddress(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		cfg     func(*config.Config)
		metrics func(app *server.App) string
	}{
		{"neither metrics setting: /metrics is off", func(*config.Config) {},
			func(*server.App) string { return "off (set KLIQUE_METRICS_LISTEN or KLIQUE_METRICS_TOKEN)" }},
		{"the metrics token: /metrics on the main listener, behind it", func(c *config.Config) { c.MetricsToken = metricsToken },
			func(app *server.App) string { return app.URL() + "/metrics with the bearer token KLIQUE_METRICS_TOKEN" }},
		{"a metrics listener and a gateway listener: both named", func(c *config.Config) {
			c.MetricsListen, c.GatewayListen = "127.0.0.1:0", "127.0.0.1:0"
		}, func(app *server.App) string { return app.MetricsURL() + "/metrics without authentication" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := &config.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), BootstrapToken: adminKey, PublicURL: "http://127.0.0.1",
				TokenTTL: time.Hour, MaxBodyBytes: 1 << 20, LogFormat: "json", LogLevel: "info", ShutdownTimeout: 10 * time.Second}
			c.cfg(cfg)
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			logs := &logBuffer{}
			app, err := server.Start(context.Background(), cfg, slog.New(slog.NewJSONHandler(logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = app.Shutdown(context.Background()) })

			line := startLine(t, logs)
			base := app.URL()
			want := map[string]string{
				"dashboard": base + "/", "graphql": base + "/graphql", "graphiql": base + "/graphiql",
				"mcp": base + "/mcp", "metrics": c.metrics(app),
			}
			for k, v := range want {
				if line[k] != v {
					t.Errorf("start line %s=%q, want %q\n%v", k, line[k], v, line)
				}
			}
			gateways := strings.Split(line["gateway"], " and ")
			if gateways[0] != base+"/v1" || (cfg.GatewayListen != "") != (len(gateways) == 2) {
				t.Errorf("start line gateway=%q, want %s/v1 and, with KLIQUE_GATEWAY_LISTEN, that listener's /v1 too", line["gateway"], base)
			}

			// What it names is there: each address answers, with 401 at
			// most where a credential is needed.
			client := &http.Client{Timeout: 30 * time.Second}
			answers := map[string]int{want["dashboard"]: http.StatusOK, want["graphiql"]: http.StatusOK, want["mcp"]: http.StatusUnauthorized}
			for _, gw := range gateways {
				answers[gw+"/models"] = http.StatusUnauthorized
			}
			switch {
			case cfg.MetricsListen != "":
				answers[app.MetricsURL()+"/metrics"] = http.StatusOK
			case cfg.MetricsToken != "":
				answers[base+"/metrics"] = http.StatusUnauthorized
			default:
				answers[base+"/metrics"] = http.StatusNotFound
			}
			for url, status := range answers {
				method := http.MethodGet
				if strings.HasSuffix(url, "/mcp") {
					method = http.MethodPost
				}
				req, _ := http.NewRequest(method, url, nil)
				resp, err := client.Do(req)
				if err != nil {
					t.Errorf("%s %s: %v", method, url, err)
					continue
				}
				resp.Body.Close()
				if resp.StatusCode != status {
					t.Errorf("%s %s = %d, want %d", method, url, resp.StatusCode, status)
				}
			}
		})
	}
}

// startLine finds the control plane's start line in a JSON log and
// returns its attributes as text.
func startLine(t *testing.T, logs *logBuffer) map[string]string {
	t.Helper()
	logs.mu.Lock()
	text := logs.b.String()
	logs.mu.Unlock()
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) != nil || rec["msg"] != "klique control plane serving" {
			continue
		}
		out := map[string]string{}
		for k, v := range rec {
			if s, ok := v.(string); ok {
				out[k] = s
			}
		}
		return out
	}
	t.Fatalf("no start line in the log:\n%s", text)
	return nil
}
