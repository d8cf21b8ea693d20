package server_test

import (
	"context"
	"encoding/csv"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store/pgtest"
)

// The gateway's configuration and token usage over GraphQL, on SQLite and
// PostgreSQL.
func TestGatewayConfigOverGraphQL(t *testing.T) {
	t.Parallel()
	t.Run("on SQLite", func(t *testing.T) {
		t.Parallel()
		runGatewayConfig(t, startServer(t))
	})
	t.Run("on PostgreSQL", func(t *testing.T) {
		t.Parallel()
		runGatewayConfig(t, startServer(t, withDatabaseURL(pgtest.RequirePostgresURL(t))))
	})
}

const gatewayQuery = `{ gateway {
	providers { name description baseUrl keySecret timeoutSeconds }
	routes { name description endpoints timeoutSeconds }
	models { name upstream provider route inputPrice outputPrice currency maxOutputTokens }
	aliases { name description rules { groups projects entitlements targets { model weight } fallbacks } guardrails { deny allow guardAlias } }
	budgets { project period tokens money perUserTokens perUserMoney }
	rateLimits { scope name requestsPerMinute tokensPerMinute }
	entitlements { name groups users }
	guardrails { deny allow guardAlias }
} }`

func runGatewayConfig(t *testing.T, ts *testServer) {
	f := newFixture(t, ts)

	t.Run("the admin reads the example's configuration with prices as decimals and no key", func(t *testing.T) {
		// The provider's key is in the vault; the configuration names it only.
		ts.mustGQL(t, f.admin, `mutation { setSecret(scope: TENANT, name: "OPENAI_API_KEY", value: "sk-fixture-provider-key-0123456789") { name } }`, nil)
		res := ts.gql(t, gqlRequest{Credential: f.admin, Query: gatewayQuery})
		if len(res.Errors) > 0 {
			t.Fatalf("gateway: %s", res.Raw)
		}
		if strings.Contains(res.Raw, "sk-fixture-provider-key") {
			t.Fatalf("the configuration reveals the provider key: %s", res.Raw)
		}
		g := res.Data["gateway"]
		checks := map[string]any{
			"providers.0.keySecret":              "OPENAI_API_KEY",
			"providers.0.timeoutSeconds":         60.0,
			"routes.0.timeoutSeconds":            120.0,
			"routes.0.endpoints.1":               "http://10.0.3.18:8000/v1",
			"models.0.name":                      "gpt-4o",
			"models.0.provider":                  "openai",
			"models.0.route":                     nil,
			"models.0.inputPrice":                2.5,
			"models.0.outputPrice":               10.0,
			"models.0.upstream":                  "gpt-4o",
			"models.1.route":                     "llama-70b",
			"models.1.inputPrice":                0.2,
			"models.2.inputPrice":                0.02,
			"models.0.maxOutputTokens":           4096.0,
			"aliases.0.name":                     "chat",
			"aliases.0.rules.0.entitlements.0":   "frontier",
			"aliases.0.rules.0.targets.0.weight": 1.0,
			"aliases.0.rules.0.fallbacks.0":      "llama-3.1-70b",
			"aliases.0.guardrails.guardAlias":    nil,
			"budgets.0.project":                  "fraud-models",
			"budgets.0.period":                   "MONTH",
			"budgets.0.tokens":                   5e7,
			"budgets.0.perUserTokens":            5e6,
			"budgets.0.money":                    0.0,
			"rateLimits.0.scope":                 "USER",
			"rateLimits.0.requestsPerMinute":     600.0,
			"rateLimits.0.tokensPerMinute":       200000.0,
			"entitlements.0.groups.0":            "ml-research",
			"guardrails.deny.0":                  `(?i)(password|api[_-]?key)\s*[:=]`,
		}
		for at, want := range checks {
			var steps []any
			for _, s := range strings.Split(at, ".") {
				if n, err := strconv.Atoi(s); err == nil {
					steps = append(steps, n)
				} else {
					steps = append(steps, s)
				}
			}
			if got := path(g, steps...); got != want {
				t.Errorf("gateway.%s = %v (%T), want %v", at, got, got, want)
			}
		}
	})

	t.Run("the admin puts and deletes objects, and problems come back as BAD_USER_INPUT", func(t *testing.T) {
		d := ts.mustGQL(t, f.admin, `mutation { putLLMModel(input: {name: "mixtral", route: "llama-70b", upstream: "mistralai/Mixtral-8x7B", inputPrice: 0.1, outputPrice: 0.3}) {
			gateway { models { name } } changes { action kind name text } } }`, nil)
		if got := str(d, "putLLMModel", "changes", 0, "text"); got != "create llm model mixtral" {
			t.Errorf("change %q", got)
		}
		d = ts.mustGQL(t, f.admin, `mutation { putLLMAlias(input: {name: "code", description: "Coding agents", rules: [
				{groups: ["ml-research"], targets: [{model: "mixtral", weight: 3}, {model: "llama-3.1-70b"}], fallbacks: ["gpt-4o"]}],
				guardrails: {deny: ["(?i)private key"], guardAlias: "chat"}}) {
			gateway { aliases { name rules { groups targets { model weight } fallbacks } guardrails { guardAlias } } } } }`, nil)
		if got := path(d, "putLLMAlias", "gateway", "aliases", 1, "rules", 0, "targets", 1, "weight"); got != 1.0 {
			t.Errorf("a target without a weight has weight %v, want 1", got)
		}
		d = ts.mustGQL(t, f.admin, `mutation($p: ID!) { putTokenBudget(input: {project: $p, period: DAY, money: 12.5, perUserMoney: 2}) { gateway { budgets { project period money } } } }`,
			map[string]any{"p": f.id(t, "project vision-detect")})
		if got := str(d, "putTokenBudget", "gateway", "budgets", 1, "project"); got != "vision-detect" {
			t.Errorf("a budget given by project id is kept by name: %q", got)
		}
		ts.mustGQL(t, f.admin, `mutation { putRateLimit(input: {scope: ALIAS, name: "code", requestsPerMinute: 60, tokensPerMinute: 100000}) { changes { action } } }`, nil)
		ts.mustGQL(t, f.admin, `mutation { putEntitlement(input: {name: "coders", users: ["alice"]}) { changes { action } } }`, nil)
		ts.mustGQL(t, f.admin, `mutation { putLLMProvider(input: {name: "anthropic", baseUrl: "https://api.anthropic.com/v1", keySecret: "ANTHROPIC_API_KEY", timeoutSeconds: 90, api: "anthropic"}) { changes { action } } }`, nil)
		ts.mustGQL(t, f.admin, `mutation { putLLMRoute(input: {name: "spare", endpoints: ["http://10.0.5.1:8000/v1"]}) { changes { action } } }`, nil)
		// What an upstream speaks is set, read (a route that says nothing
		// speaks the default) and refused when the gateway does not know it.
		d = ts.mustGQL(t, f.admin, `{ gateway { providers { name api } routes { name api } } }`, nil)
		for _, p := range path(d, "gateway", "providers").([]any) {
			if str(p, "name") == "anthropic" && str(p, "api") != "anthropic" {
				t.Errorf("provider anthropic speaks %q", str(p, "api"))
			}
		}
		for _, r := range path(d, "gateway", "routes").([]any) {
			if str(r, "name") == "spare" && str(r, "api") != "openai-compatible" {
				t.Errorf("route spare speaks %q, want the default", str(r, "api"))
			}
		}
		if res := ts.gql(t, gqlRequest{Credential: f.admin, Query: `mutation { putLLMRoute(input: {name: "spare", endpoints: ["http://10.0.5.1:8000/v1"], api: "grpc"}) { changes { action } } }`}); res.code() != "BAD_USER_INPUT" || !strings.Contains(res.message(), `api "grpc"`) {
			t.Errorf("a route speaking grpc: %s", res.Raw)
		}

		res := ts.gql(t, gqlRequest{Credential: f.admin, Query: `mutation { deleteLLMModel(name: "mixtral") { id } }`})
		if res.code() != "CONFLICT" || !strings.Contains(res.message(), `alias "code" rule 1`) {
			t.Errorf("deleting a model an alias uses: %s", res.Raw)
		}
		res = ts.gql(t, gqlRequest{Credential: f.admin, Query: `mutation { putLLMRoute(input: {name: "bad", endpoints: ["ftp://x"], timeoutSeconds: 7200}) { changes { action } } }`})
		if res.code() != "BAD_USER_INPUT" || !strings.Contains(res.message(), "absolute http or https URL") {
			t.Errorf("a bad route: %s", res.Raw)
		}
		res = ts.gql(t, gqlRequest{Credential: f.admin, Query: `mutation { deleteProject(id: "fraud-models") { id } }`})
		if res.code() != "CONFLICT" || !strings.Contains(res.message(), "token budget fraud-models per month") {
			t.Errorf("deleting a project a budget names: %s", res.Raw)
		}

		out := str(ts.mustGQL(t, f.admin, `{ exportEstate }`, nil), "exportEstate")
		for _, want := range []string{"name: mixtral", "guardAlias: chat", "money: 12.5", "name: anthropic", "timeout: 1m30s", "- alice", "api: anthropic"} {
			if !strings.Contains(out, want) {
				t.Errorf("export lacks %q", want)
			}
		}
		if d := ts.mustGQL(t, f.admin, `mutation($doc: String!) { applyEstate(document: $doc) { summary } }`, map[string]any{"doc": out}); str(d, "applyEstate", "summary") != "no changes" {
			t.Errorf("re-applying the export: %v", d)
		}

		for _, q := range []string{
			`mutation { deleteRateLimit(scope: ALIAS, name: "code") { id } }`,
			`mutation { deleteLLMAlias(name: "code") { id } }`,
			`mutation { deleteLLMModel(name: "mixtral") { id } }`,
			`mutation { deleteEntitlement(name: "coders") { id } }`,
			`mutation { deleteLLMProvider(name: "anthropic") { id } }`,
			`mutation { deleteLLMRoute(name: "spare") { id } }`,
			`mutation { deleteTokenBudget(project: "vision-detect", period: DAY) { id } }`,
		} {
			ts.mustGQL(t, f.admin, q, nil)
		}
		d = ts.mustGQL(t, f.admin, `mutation { setGuardrails(input: {deny: ["x"], allow: ["y"]}) { gateway { guardrails { deny allow } } changes { action } } }`, nil)
		if str(d, "setGuardrails", "changes", 0, "action") != "UPDATE" || str(d, "setGuardrails", "gateway", "guardrails", "allow", 0) != "y" {
			t.Errorf("setGuardrails: %v", d)
		}
		ts.mustGQL(t, f.admin, `mutation { setGuardrails(input: {deny: ["(?i)(password|api[_-]?key)\\s*[:=]"]}) { changes { action } } }`, nil)
		if out2 := str(ts.mustGQL(t, f.admin, `{ exportEstate }`, nil), "exportEstate"); !strings.Contains(out2, "gateway:") || strings.Contains(out2, "mixtral") {
			t.Errorf("export after the deletions:\n%s", out2)
		}
	})

	t.Run("members list the aliases open to them", func(t *testing.T) {
		d := ts.mustGQL(t, f.alice, `{ llmAliases { name description rules { targets { model } } } }`, nil)
		list, _ := path(d, "llmAliases").([]any)
		if len(list) != 2 || str(list[0], "name") != "chat" || str(list[1], "description") != "Text embeddings" {
			t.Errorf("alice's aliases %v", list)
		}
		if rules, _ := path(list[0], "rules").([]any); len(rules) != 0 {
			t.Errorf("alice sees rules %v", rules)
		}
	})

	t.Run("an alias's extra names are put, read and listed to members over GraphQL", func(t *testing.T) {
		d := ts.mustGQL(t, f.admin, `mutation { putLLMAlias(input: {name: "chat", description: "General chat", names: ["claude-sonnet-4-5", "gpt-5-codex"],
			rules: [{targets: [{model: "gpt-4o"}]}]}) { gateway { aliases { name names } } } }`, nil)
		if str(d, "putLLMAlias", "gateway", "aliases", 0, "names", 1) != "gpt-5-codex" {
			t.Errorf("putLLMAlias: %v", d)
		}
		res := ts.gql(t, gqlRequest{Credential: f.admin, Query: `mutation { putLLMAlias(input: {name: "embed", names: ["claude-sonnet-4-5"],
			rules: [{targets: [{model: "gpt-4o"}]}]}) { changes { action } } }`})
		if len(res.Errors) == 0 || !strings.Contains(res.Raw, `already a name of alias \"chat\"`) {
			t.Errorf("a name of two aliases: %s", res.Raw)
		}
		d = ts.mustGQL(t, f.alice, `{ llmAliases { name names } }`, nil)
		if str(d, "llmAliases", 0, "names", 0) != "claude-sonnet-4-5" {
			t.Errorf("alice's aliases %v", d)
		}
		if list, _ := path(d, "llmAliases", 1, "names").([]any); len(list) != 0 {
			t.Errorf("embed has names %v, want an empty list", list)
		}
	})

	t.Run("usage puts calls and tokens beside GPU-hours, by the same access rules", func(t *testing.T) {
		now := time.Now().UTC()
		ids := f.ids
		call := func(id, user, userName, group, groupName, project, projectName, alias, mdl string, in, out, cost int64) *model.ModelCall {
			return &model.ModelCall{ID: id, TenantID: ids["tenant default"], At: now.Add(-time.Minute), UserID: user, UserName: userName,
				GroupID: group, GroupName: groupName, ProjectID: project, ProjectName: projectName, Endpoint: "chat/completions",
				Alias: alias, Model: mdl, Target: "openai", InputTokens: in, OutputTokens: out, CostMicros: cost, Currency: "USD",
				Status: 200, Outcome: model.CallOK}
		}
		if err := ts.app.Store.InsertModelCalls(context.Background(), []*model.ModelCall{
			call("req-1", ids["user alice"], "alice", ids["group ml-research"], "ml-research", ids["project fraud-models"], "fraud-models", "chat", "gpt-4o", 1200, 300, 6000),
			call("req-2", ids["user alice"], "alice", ids["group ml-research"], "ml-research", ids["project fraud-models"], "fraud-models", "chat", "gpt-4o", 800, 200, 4000),
			call("req-3", ids["user victor"], "victor", ids["group vision"], "vision", ids["project vision-detect"], "vision-detect", "embed", "text-embedding-3-small", 5000, 0, 100),
		}); err != nil {
			t.Fatal(err)
		}
		from, to := now.Add(-time.Hour).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339)
		q := `query($from: Time!, $to: Time!, $by: [UsageDimension!]) { usage(input: {from: $from, to: $to, groupBy: $by}) {
			rows { keys { dimension name } gpuHours cost currency calls inputTokens outputTokens tokenCost tokenCurrency } } }`
		rows := func(cred string, by ...string) map[string]map[string]any {
			t.Helper()
			d := ts.mustGQL(t, cred, q, map[string]any{"from": from, "to": to, "by": by})
			out := map[string]map[string]any{}
			list, _ := path(d, "usage", "rows").([]any)
			for _, r := range list {
				var names []string
				keys, _ := path(r, "keys").([]any)
				for _, k := range keys {
					names = append(names, str(k, "name"))
				}
				out[strings.Join(names, "/")] = r.(map[string]any)
			}
			return out
		}
		byGroup := rows(f.admin, "GROUP")
		if r := byGroup["ml-research"]; r["calls"] != 2.0 || r["inputTokens"] != 2000.0 || r["outputTokens"] != 500.0 || r["tokenCost"] != 0.01 ||
			r["tokenCurrency"] != "USD" || r["gpuHours"].(float64) <= 0 || r["currency"] != "USD" {
			t.Errorf("ml-research: %v", r)
		}
		if r := byGroup["vision"]; r["calls"] != 1.0 || r["gpuHours"] != 0.0 || r["currency"] != "" {
			t.Errorf("vision: %v", r)
		}
		// GPU work has no alias or model, model calls no pool: each falls
		// under "—" rather than out of the report.
		byModel := rows(f.admin, "ALIAS", "MODEL")
		if len(byModel) != 3 || byModel["chat/gpt-4o"]["calls"] != 2.0 || byModel["embed/text-embedding-3-small"]["inputTokens"] != 5000.0 ||
			byModel["—/—"]["calls"] != 0.0 || byModel["—/—"]["gpuHours"].(float64) <= 0 {
			t.Errorf("by alias and model: %v", byModel)
		}
		byPool := rows(f.admin, "POOL")
		if r := byPool["onprem-k8s"]; r["calls"] != 0.0 || r["gpuHours"].(float64) <= 0 {
			t.Errorf("by pool: %v", r)
		}
		if r := byPool["—"]; r["calls"] != 3.0 || r["gpuHours"] != 0.0 {
			t.Errorf("calls by pool: %v", r)
		}
		if got := rows(f.victor, "GROUP", "MODEL"); len(got) != 1 || got["vision/text-embedding-3-small"]["calls"] != 1.0 {
			t.Errorf("victor sees %v", got)
		}
		if got := rows(f.olga, "USER", "ALIAS"); len(got) != 0 {
			t.Errorf("the other tenant's admin sees %v", got)
		}

		resp, body := ts.get(t, "/api/v1/usage.csv?from="+url.QueryEscape(from)+"&to="+url.QueryEscape(to)+"&by=user,model", f.admin)
		if resp.StatusCode != 200 {
			t.Fatalf("CSV: %d %s", resp.StatusCode, body)
		}
		recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, r := range recs[1:] {
			if r[1] == "alice" && r[3] == "gpt-4o" {
				found = true
				if got := strings.Join(r[10:], ","); got != "2,2000,500,0.010000,USD" {
					t.Errorf("alice's gpt-4o CSV columns %s", got)
				}
			}
		}
		if !found {
			t.Errorf("no alice/gpt-4o row in:\n%s", body)
		}
	})
}
