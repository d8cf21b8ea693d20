package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/config"
)

// /metrics names every tenant's model aliases in its labels: the main
// listener serves it only to the metrics token, and not at all without one;
// KLIQUE_METRICS_LISTEN serves it openly on an address of its own.
func TestMetricsNeedTheirTokenOrTheirListener(t *testing.T) {
	t.Parallel()
	const series = "klique_http_requests_total"

	t.Run("with a token, the main listener serves them only to it", func(t *testing.T) {
		ts := startServer(t)
		for name, cred := range map[string]string{
			"no credential": "", "a wrong token": "not-the-metrics-token-0123456789", "the platform admin's API key": adminKey,
		} {
			resp, body := ts.get(t, "/metrics", cred)
			if resp.StatusCode != http.StatusUnauthorized || strings.Contains(body, series) ||
				!strings.Contains(body, "send the metrics token (KLIQUE_METRICS_TOKEN)") {
				t.Errorf("%s: GET /metrics = %d %.200s, want 401 that names KLIQUE_METRICS_TOKEN", name, resp.StatusCode, body)
			}
		}
		if resp, body := ts.get(t, "/metrics", metricsToken); resp.StatusCode != http.StatusOK || !strings.Contains(body, series) {
			t.Errorf("with the token: GET /metrics = %d %.200s, want 200 with the metrics", resp.StatusCode, body)
		}
	})

	t.Run("without a token, the main listener does not serve them; the metrics listener does", func(t *testing.T) {
		ts := startServer(t, func(c *config.Config) { c.MetricsToken = ""; c.MetricsListen = "127.0.0.1:0" })
		for _, cred := range []string{"", adminKey} {
			resp, body := ts.get(t, "/metrics", cred)
			if resp.StatusCode != http.StatusNotFound || strings.Contains(body, series) || !strings.Contains(body, "KLIQUE_METRICS_LISTEN") {
				t.Errorf("GET /metrics on the main listener = %d %.200s, want 404 that names KLIQUE_METRICS_LISTEN", resp.StatusCode, body)
			}
		}
		if ts.app.MetricsURL() == "" {
			t.Fatal("no metrics listener")
		}
		resp, err := ts.http.Get(ts.app.MetricsURL() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET /metrics on KLIQUE_METRICS_LISTEN = %d, want 200", resp.StatusCode)
		}
	})

	t.Run("a short token is refused at start", func(t *testing.T) {
		c := &config.Config{TokenTTL: config.DefaultTokenTTL, LogFormat: "text", LogLevel: "info", Listen: "127.0.0.1:0", MetricsToken: "short"}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "KLIQUE_METRICS_TOKEN is 5 characters: give at least 16") {
			t.Errorf("Validate = %v, want it to refuse the short token", err)
		}
	})
}
