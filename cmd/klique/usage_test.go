package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/client"
	"github.com/klique-ai/klique/internal/model"
)

// TestUsageCommandShowsTokens runs `klique usage` against a control plane
// whose ledger holds model calls, and checks the token columns.
func TestUsageCommandShowsTokens(t *testing.T) {
	const key = "klique-usage-test-bootstrap-key-0123456789abcdefghij"
	ctx, app := startControlPlane(t, key, 30*time.Second)
	t.Setenv("KLIQUE_CONFIG", filepath.Join(t.TempDir(), "none.json"))
	t.Setenv("KLIQUE_SERVER", app.URL())
	t.Setenv("KLIQUE_API_KEY", key)
	t.Setenv("KLIQUE_TOKEN", "")

	klique := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(ctx, args, strings.NewReader(""), &out, &errOut); code != 0 {
			t.Fatalf("klique %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
		}
		return out.String()
	}
	klique("apply", "-f", "../../examples/estate.yaml")
	var me struct {
		Me struct {
			User   struct{ ID string }
			Tenant struct{ ID string }
		}
		Project struct{ ID string }
	}
	if err := client.New(app.URL(), key).Do(ctx, `{ me { user { id } tenant { id } } project(id: "shared-eval") { id } }`, nil, &me); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Add(-time.Minute)
	calls := []*model.ModelCall{
		{ID: "u-1", TenantID: me.Me.Tenant.ID, At: at, UserID: me.Me.User.ID, UserName: "admin", ProjectID: me.Project.ID, ProjectName: "shared-eval",
			Alias: "chat", Model: "gpt-4o", InputTokens: 1200, OutputTokens: 300, CostMicros: 6000, Currency: "USD", Status: 200, Outcome: model.CallOK},
		{ID: "u-2", TenantID: me.Me.Tenant.ID, At: at, UserID: me.Me.User.ID, UserName: "admin", ProjectID: me.Project.ID, ProjectName: "shared-eval",
			Alias: "embed", Model: "text-embedding-3-small", InputTokens: 5000, CostMicros: 100, Currency: "USD", Status: 200, Outcome: model.CallOK},
	}
	if err := app.Store.InsertModelCalls(ctx, calls); err != nil {
		t.Fatal(err)
	}

	out := klique("usage", "--by", "alias")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "ALIAS GPU-HOURS BUDGET HOURS COST CALLS INPUT TOKENS OUTPUT TOKENS TOKEN COST" {
		t.Fatalf("usage --by alias:\n%s", out)
	}
	if got := strings.Join(strings.Fields(lines[1]), " "); got != "chat 0.00 0.00 - 1 1200 300 0.006000 USD" {
		t.Errorf("chat row %q", got)
	}
	if got := strings.Join(strings.Fields(lines[2]), " "); got != "embed 0.00 0.00 - 1 5000 0 0.000100 USD" {
		t.Errorf("embed row %q", got)
	}
	out = klique("usage", "--by", "user", "-o", "json")
	for _, want := range []string{`"calls": 2`, `"inputTokens": 6200`, `"tokenCurrency": "USD"`} {
		if !strings.Contains(out, want) {
			t.Errorf("usage -o json lacks %s:\n%s", want, out)
		}
	}
}
