package estatecmd

import (
	"bytes"
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/client"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/server"
)

// TestUsageCommandShowsTokens runs `klique usage` against a control plane
// whose ledger holds model calls, and checks the token columns.
func TestUsageCommandShowsTokens(t *testing.T) {
	ctx, app, klique, me := usageControlPlane(t, "shared-eval")
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
	// The ledger's rows, then (after a blank line) the token budgets.
	ledger, budgets, _ := strings.Cut(strings.TrimSpace(out), "\n\n")
	if !strings.HasPrefix(strings.Join(strings.Fields(budgets), " "), "PROJECT USER PERIOD UNIT LIMIT USED RESERVED LEFT") {
		t.Errorf("usage --by alias does not end with the token budgets:\n%s", out)
	}
	lines := strings.Split(ledger, "\n")
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

// TestUsageCommandShowsTokenBudgets runs `klique usage --budgets` against a
// control plane whose ledger holds a call in fraud-models, whose token
// budget (the example estate's: 50M a month, 5M per user) it moves.
func TestUsageCommandShowsTokenBudgets(t *testing.T) {
	ctx, app, klique, me := usageControlPlane(t, "fraud-models")
	if err := app.Store.InsertModelCalls(ctx, []*model.ModelCall{{ID: "b-1", TenantID: me.Me.Tenant.ID, At: time.Now().UTC(),
		UserID: me.Me.User.ID, UserName: "admin", ProjectID: me.Project.ID, ProjectName: "fraud-models",
		Alias: "chat", Model: "gpt-4o", InputTokens: 1200, OutputTokens: 300, Status: 200, Outcome: model.CallOK}}); err != nil {
		t.Fatal(err)
	}

	out := klique("usage", "--budgets")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "PROJECT USER PERIOD UNIT LIMIT USED RESERVED LEFT BURN/H RUNS OUT RESETS" {
		t.Fatalf("usage --budgets:\n%s", out)
	}
	// The burn rate is the last hour's spend per hour (more in a period
	// younger than an hour): 1500 or more, and the budget lasts.
	for i, want := range []string{"fraud-models (project) month tokens 50000000 1500 0 49998500",
		"fraud-models admin month tokens 5000000 1500 0 4998500"} {
		f := strings.Fields(lines[i+1])
		burn, _ := strconv.ParseFloat(f[8], 64)
		if got := strings.Join(f[:8], " "); got != want || burn < 1500 || strings.Join(f[9:12], " ") != "not before reset" {
			t.Errorf("row %d: %q, want %q…", i+1, lines[i+1], want)
		}
	}
	out = klique("usage", "--budgets", "--project", "fraud-models", "-o", "json")
	for _, want := range []string{`"used": 1500`, `"reserved": 0`, `"left": 49998500`, `"userName": "admin"`} {
		if !strings.Contains(out, want) {
			t.Errorf("usage --budgets -o json lacks %s:\n%s", want, out)
		}
	}
}

// usageIDs are the ids a usage test writes ledger rows under: the
// bootstrap admin's, its tenant's and a project's of the example estate.
type usageIDs struct {
	Me struct {
		User   struct{ ID string }
		Tenant struct{ ID string }
	}
	Project struct{ ID string }
}

// usageControlPlane starts a control plane with the example estate applied
// and returns a way to run the CLI against it as its admin, and the ids of
// the admin, the tenant and project.
func usageControlPlane(t *testing.T, project string) (context.Context, *server.App, func(args ...string) string, usageIDs) {
	t.Helper()
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
	klique("apply", "-f", "../../../examples/estate.yaml")
	var me usageIDs
	if err := client.New(app.URL(), key).Do(ctx, `query($p: ID!) { me { user { id } tenant { id } } project(id: $p) { id } }`, map[string]any{"p": project}, &me); err != nil {
		t.Fatal(err)
	}
	return ctx, app, klique, me
}
