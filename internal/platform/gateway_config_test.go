package platform_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/engine/loop"
	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/estate/llmconf"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
	"github.com/klique-ai/klique/internal/store"
)

func TestGatewayConfig(t *testing.T) {
	t.Parallel()

	t.Run("every kind of gateway object is put, read, exported and deleted through the estate", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			auditBefore := len(b.AuditLog(t))
			res, err := b.Svc.PutLLMProvider(b.Admin, platform.LLMProviderInput{Name: "mistral", BaseURL: "https://api.mistral.ai/v1",
				KeySecret: ptr("MISTRAL_API_KEY"), TimeoutSeconds: ptr(30.0)})
			platformtest.Must(t, err)
			if len(res.Changes) != 1 || res.Changes[0].String() != "create llm provider mistral" {
				t.Fatalf("changes %v", res.Changes)
			}
			platformtest.Must(t, second(b.Svc.PutLLMRoute(b.Admin, platform.LLMRouteInput{Name: "qwen", Endpoints: []string{"http://10.0.4.1:8000/v1"}})))
			platformtest.Must(t, second(b.Svc.PutLLMModel(b.Admin, platform.LLMModelInput{Name: "mistral-large", Provider: ptr("mistral"),
				InputPrice: ptr(2.0), OutputPrice: ptr(6.0), Currency: ptr("usd")})))
			platformtest.Must(t, second(b.Svc.PutLLMModel(b.Admin, platform.LLMModelInput{Name: "qwen-coder", Route: ptr("qwen"), Upstream: ptr("Qwen/Qwen2.5-Coder-32B-Instruct"),
				MaxImageTokens: ptr(16384)})))
			platformtest.Must(t, second(b.Svc.PutEntitlement(b.Admin, platform.EntitlementInput{Name: "coders", Users: []string{"rita"}})))
			platformtest.Must(t, second(b.Svc.PutLLMAlias(b.Admin, platform.LLMAliasInput{Name: "code", Rules: []*platform.LLMAliasRuleInput{
				{Entitlements: []string{"coders"}, Targets: []*platform.LLMTargetInput{{Model: "qwen-coder", Weight: ptr(3)}, {Model: "mistral-large"}}},
			}, Guardrails: &platform.GuardrailsInput{Deny: []string{`(?i)secret`}, GuardAlias: ptr("chat")}})))
			platformtest.Must(t, second(b.Svc.PutTokenBudget(b.Admin, platform.TokenBudgetInput{Project: "vision-detect", Period: model.PeriodDay, Money: ptr(25.0), PerUserMoney: ptr(5.0)})))
			platformtest.Must(t, second(b.Svc.PutRateLimit(b.Admin, platform.RateLimitInput{Scope: model.RateLimitAlias, Name: ptr("code"), RequestsPerMinute: ptr(100)})))
			res, err = b.Svc.SetGuardrails(b.Admin, platform.GuardrailsInput{Deny: []string{"a", "b"}})
			platformtest.Must(t, err)
			if len(res.Changes) != 1 || res.Changes[0].Action != estate.Update || res.Changes[0].Kind != llmconf.KindGuardrails {
				t.Fatalf("changes %v", res.Changes)
			}
			if n := len(b.AuditLog(t)) - auditBefore; n != 9 {
				t.Errorf("%d audit entries, want one per change (9)", n)
			}

			g, err := b.Svc.GatewayConfig(b.Admin)
			platformtest.Must(t, err)
			e := &estate.Estate{Gateway: *g}
			if p := llmconf.Provider(&e.Gateway, "mistral"); p == nil || p.Timeout != 30*time.Second || p.KeySecret != "MISTRAL_API_KEY" {
				t.Errorf("provider mistral %+v", p)
			}
			if m := llmconf.Model(&e.Gateway, "mistral-large"); m == nil || m.InputPriceMicros != 2_000_000 || m.Currency != "USD" || m.Upstream != "mistral-large" || m.MaxOutputTokens != 4096 {
				t.Errorf("model mistral-large %+v, want prices in millionths and the defaults explicit", m)
			}
			if m := llmconf.Model(&e.Gateway, "qwen-coder"); m == nil || m.MaxImageTokens != 16384 || llmconf.Model(&e.Gateway, "mistral-large").MaxImageTokens != 0 {
				t.Errorf("model qwen-coder %+v, want its maxImageTokens (and mistral-large's left to the gateway's default)", m)
			}
			if a := llmconf.Alias(&e.Gateway, "code"); a == nil || a.Rules[0].Targets[1].Weight != 1 || a.Rules[0].Targets[0].Weight != 3 || a.Guardrails.GuardAlias != "chat" {
				t.Errorf("alias code %+v", a)
			}
			if bu := llmconf.TokenBudget(&e.Gateway, "vision-detect", model.PeriodDay); bu == nil || bu.Micros != 25_000_000 || bu.PerUserMicros != 5_000_000 {
				t.Errorf("budget %+v", bu)
			}
			if !slices.Equal(g.Guardrails.Deny, []string{"a", "b"}) {
				t.Errorf("guardrails %+v", g.Guardrails)
			}
			out, err := b.Svc.ExportEstate(b.Admin)
			platformtest.Must(t, err)
			for _, want := range []string{"name: mistral-large", "currency: USD", "keySecret: MISTRAL_API_KEY", "timeout: 30s", "money: 25", "weight: 3", "guardAlias: chat", "maxImageTokens: 16384"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("export lacks %q:\n%s", want, out)
				}
			}
			if again, err := b.Svc.ApplyEstate(b.Admin, out, false); err != nil || len(again.Changes) != 0 {
				t.Fatalf("re-applying the export: %v, %v", again, err)
			}

			// Put replaces whole: a field left out takes its default.
			res, err = b.Svc.PutLLMModel(b.Admin, platform.LLMModelInput{Name: "mistral-large", Provider: ptr("mistral")})
			platformtest.Must(t, err)
			if len(res.Changes) != 1 || res.Changes[0].String() != "update llm model mistral-large (inputPriceMicros, outputPriceMicros)" {
				t.Errorf("changes %v", res.Changes)
			}

			// Deleting in the order references allow.
			platformtest.Must(t, second(b.Svc.DeleteRateLimit(b.Admin, model.RateLimitAlias, "code")))
			platformtest.Must(t, second(b.Svc.DeleteLLMAlias(b.Admin, "code")))
			platformtest.Must(t, second(b.Svc.DeleteEntitlement(b.Admin, "coders")))
			platformtest.Must(t, second(b.Svc.DeleteLLMModel(b.Admin, "qwen-coder")))
			platformtest.Must(t, second(b.Svc.DeleteLLMModel(b.Admin, "mistral-large")))
			platformtest.Must(t, second(b.Svc.DeleteLLMRoute(b.Admin, "qwen")))
			res, err = b.Svc.DeleteLLMProvider(b.Admin, "mistral")
			platformtest.Must(t, err)
			if res.ID != "mistral" || res.Changes[0].String() != "delete llm provider mistral" {
				t.Errorf("delete: %q %v", res.ID, res.Changes)
			}
			platformtest.Must(t, second(b.Svc.DeleteTokenBudget(b.Admin, "vision-detect", model.PeriodDay)))
			res, err = b.Svc.SetGuardrails(b.Admin, platform.GuardrailsInput{})
			platformtest.Must(t, err)
			if res.Changes[0].Action != estate.Delete {
				t.Errorf("clearing the guardrails: %v", res.Changes)
			}
			g, err = b.Svc.GatewayConfig(b.Admin)
			platformtest.Must(t, err)
			if len(g.Providers) != 1 || len(g.Models) != 3 || len(g.Aliases) != 2 || len(g.Budgets) != 1 || len(g.RateLimits) != 1 || !llmconf.GuardrailsEmpty(g.Guardrails) {
				t.Errorf("after the deletions: %+v", g)
			}
		})
	})

	t.Run("a change that breaks a rule is refused with every problem and changes nothing", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			before := b.snapshot(t)
			_, err := b.Svc.PutLLMModel(b.Admin, platform.LLMModelInput{Name: "gpt-5", Provider: ptr("azure"), Route: ptr("llama-70b"), MaxOutputTokens: ptr(0)})
			platformtest.WantError(t, err, platform.CodeInvalid, `model "gpt-5": names provider "azure" and route "llama-70b": give one of them`, "maxOutputTokens 0 must be between 1 and 10000000")
			_, err = b.Svc.PutLLMModel(b.Admin, platform.LLMModelInput{Name: "gpt-5", Route: ptr("llama-70b"), MaxImageTokens: ptr(0)})
			platformtest.WantError(t, err, platform.CodeInvalid, "maxImageTokens must be between 1 and 1000000 (leave it out for the default, 4096)")
			_, err = b.Svc.PutLLMModel(b.Admin, platform.LLMModelInput{Name: "gpt-5", Route: ptr("llama-70b"), MaxImageTokens: ptr(2_000_000)})
			platformtest.WantError(t, err, platform.CodeInvalid, "maxImageTokens 2000000 must be between 1 and 1000000")
			_, err = b.Svc.PutLLMAlias(b.Admin, platform.LLMAliasInput{Name: "chat", Rules: []*platform.LLMAliasRuleInput{{Groups: []string{"ghosts"}}}})
			platformtest.WantError(t, err, platform.CodeInvalid, `rule 1: group "ghosts" is not a known group`, "rule 1: give at least one target model")
			_, err = b.Svc.PutTokenBudget(b.Admin, platform.TokenBudgetInput{Project: "fraud-models", Period: model.PeriodMonth, Tokens: ptr(10.0), Money: ptr(1.0)})
			platformtest.WantError(t, err, platform.CodeInvalid, "give tokens or money, not both")
			_, err = b.Svc.PutTokenBudget(b.Admin, platform.TokenBudgetInput{Project: "fraud-models", Period: model.PeriodMonth, Tokens: ptr(1.5)})
			platformtest.WantError(t, err, platform.CodeInvalid, "tokens 1.5 must be a whole number")
			_, err = b.Svc.PutRateLimit(b.Admin, platform.RateLimitInput{Scope: model.RateLimitProject, Name: ptr("ghost-project"), TokensPerMinute: ptr(5.0)})
			platformtest.WantError(t, err, platform.CodeInvalid, `project "ghost-project" is not a known project`)
			_, err = b.Svc.SetGuardrails(b.Admin, platform.GuardrailsInput{Deny: []string{"(x"}, GuardAlias: ptr("nope")})
			platformtest.WantError(t, err, platform.CodeInvalid, `deny pattern 1 "(x" is not a valid regular expression`, `guardAlias "nope" is not a known alias`)
			_, err = b.Svc.PutLLMProvider(b.Admin, platform.LLMProviderInput{Name: "p", BaseURL: "https://x/v1", TimeoutSeconds: ptr(-1.0)})
			platformtest.WantError(t, err, platform.CodeInvalid, "timeoutSeconds -1 must be between 1 and 3600 seconds")
			b.unchanged(t, before)
		})
	})

	t.Run("objects others name are kept until those change, with a message that lists them", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			before := b.snapshot(t)
			_, err := b.Svc.DeleteLLMModel(b.Admin, "gpt-4o")
			platformtest.WantError(t, err, platform.CodeConflict, `model 'gpt-4o' is used by alias "chat" rule 1; change them first`)
			_, err = b.Svc.DeleteLLMProvider(b.Admin, "openai")
			platformtest.WantError(t, err, platform.CodeConflict, `provider 'openai' is used by model "gpt-4o", model "text-embedding-3-small"`)
			_, err = b.Svc.DeleteLLMRoute(b.Admin, "llama-70b")
			platformtest.WantError(t, err, platform.CodeConflict, `model "llama-3.1-70b"`)
			_, err = b.Svc.DeleteEntitlement(b.Admin, "frontier")
			platformtest.WantError(t, err, platform.CodeConflict, `entitlement 'frontier' is used by alias "chat" rule 1`)
			_, err = b.Svc.DeleteGroup(b.Admin, "nlp")
			platformtest.WantError(t, err, platform.CodeConflict, "group nlp has a resource policy") // the policy comes first, as before
			b.unchanged(t, before)
			platformtest.Must(t, second(b.Svc.DeletePolicy(b.Admin, "ml-research")))
			before = b.snapshot(t)
			_, err = b.Svc.DeleteGroup(b.Admin, "ml-research")
			platformtest.WantError(t, err, platform.CodeConflict, "group ml-research owns projects fraud-models")
			_, err = b.Svc.DeleteProject(b.Admin, "fraud-models")
			platformtest.WantError(t, err, platform.CodeConflict, "project 'fraud-models' is named by the gateway's token budget fraud-models per month; change them first")
			_, err = b.Svc.DeleteLLMAlias(b.Admin, "ghost")
			platformtest.WantError(t, err, platform.CodeNotFound, "no alias 'ghost'")
			_, err = b.Svc.DeleteTokenBudget(b.Admin, "fraud-models", model.PeriodDay)
			platformtest.WantError(t, err, platform.CodeNotFound, "no token budget 'fraud-models per day'")
			b.unchanged(t, before)

			// Once nothing else holds it, a group named by an entitlement
			// is still refused, saying which.
			platformtest.Must(t, second(b.Svc.DeleteTokenBudget(b.Admin, "fraud-models", model.PeriodMonth)))
			platformtest.Must(t, second(b.Svc.DeleteProject(b.Admin, "fraud-models")))
			_, err = b.Svc.DeleteGroup(b.Admin, "ml-research")
			platformtest.WantError(t, err, platform.CodeConflict, `group ml-research is named by the gateway's entitlement "frontier"; change them first`)
		})
	})

	t.Run("a group or project renamed is followed by the gateway objects that name it", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			platformtest.Must(t, second(b.Svc.UpdateGroup(b.Admin, "ml-research", platform.GroupInput{Name: ptr("research")})))
			platformtest.Must(t, second(b.Svc.UpdateProject(b.Admin, "fraud-models", platform.ProjectInput{Name: ptr("fraud")})))
			g, err := b.Svc.GatewayConfig(b.Admin)
			platformtest.Must(t, err)
			e := &estate.Estate{Gateway: *g}
			if en := llmconf.Entitlement(&e.Gateway, "frontier"); !slices.Equal(en.Groups, []string{"research"}) {
				t.Errorf("entitlement frontier names %v, want the renamed group", en.Groups)
			}
			if llmconf.TokenBudget(&e.Gateway, "fraud", model.PeriodMonth) == nil {
				t.Errorf("budgets %+v do not follow the renamed project", g.Budgets)
			}
		})
	})

	t.Run("only admins read and change the configuration; others see the aliases open to them", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			ps := b.people(t)
			for name, ctx := range map[string]context.Context{"a member": ps.rita, "a lead": ps.lead, "a viewer": ps.viewer} {
				if _, err := b.Svc.GatewayConfig(ctx); platform.ErrorCode(err) != platform.CodeForbidden {
					t.Errorf("%s read the gateway configuration: %v", name, err)
				}
				_, err := b.Svc.PutLLMModel(ctx, platform.LLMModelInput{Name: "mine", Provider: ptr("openai")})
				platformtest.WantError(t, err, platform.CodeForbidden, "only a tenant admin")
				_, err = b.Svc.DeleteLLMModel(ctx, "gpt-4o")
				platformtest.WantError(t, err, platform.CodeForbidden)
			}
			scoped := b.Key(t, "admin", "shared-eval")
			_, err := b.Svc.GatewayConfig(scoped)
			platformtest.WantError(t, err, platform.CodeForbidden, "scoped to one project")

			names := func(ctx context.Context) string {
				t.Helper()
				as, err := b.Svc.LLMAliases(ctx)
				platformtest.Must(t, err)
				var out []string
				for _, a := range as {
					out = append(out, a.Name)
					if len(a.Rules) > 0 && ctx != b.Admin {
						t.Errorf("a non-admin sees the rules of alias %s", a.Name)
					}
				}
				return strings.Join(out, ",")
			}
			if got := names(ps.rita); got != "chat,embed" {
				t.Errorf("rita's aliases %q", got)
			}
			if got := names(ps.nobody); got != "chat,embed" {
				t.Errorf("a member of no group may use shared-eval and sees %q", got)
			}
			// An alias open to one group only.
			platformtest.Must(t, second(b.Svc.PutLLMAlias(b.Admin, platform.LLMAliasInput{Name: "research-chat", Description: ptr("ml-research only"),
				Rules: []*platform.LLMAliasRuleInput{{Groups: []string{"ml-research"}, Targets: []*platform.LLMTargetInput{{Model: "gpt-4o"}}}}})))
			// And one open in project vision-detect only.
			platformtest.Must(t, second(b.Svc.PutLLMAlias(b.Admin, platform.LLMAliasInput{Name: "detect", Rules: []*platform.LLMAliasRuleInput{
				{Projects: []string{"vision-detect"}, Targets: []*platform.LLMTargetInput{{Model: "gpt-4o"}}}}})))
			if got := names(ps.rita); got != "chat,embed,research-chat" {
				t.Errorf("rita's aliases %q", got)
			}
			if got := names(ps.vic); got != "chat,detect,embed" {
				t.Errorf("vic's aliases %q", got)
			}
			if got := names(b.Key(t, "vic", "shared-eval")); got != "chat,embed" {
				t.Errorf("vic's key scoped to shared-eval sees %q", got)
			}
			as, err := b.Svc.LLMAliases(ps.rita)
			platformtest.Must(t, err)
			if as[2].Description != "ml-research only" {
				t.Errorf("rita sees %+v, want the name and description", as[2])
			}
			as, err = b.Svc.LLMAliases(b.Admin)
			platformtest.Must(t, err)
			if len(as) != 3 || len(as[0].Rules) != 2 { // admin is in no group: research-chat is not open to them
				t.Errorf("the admin's aliases %+v", as)
			}
		})
	})
}

func TestRuleMatches(t *testing.T) {
	t.Parallel()
	e := &estate.Estate{
		Groups:   []*model.Group{{ID: "g-r", Name: "research"}, {ID: "g-v", Name: "vision"}},
		Projects: []*model.Project{{ID: "p-f", Name: "fraud", GroupID: "g-r"}, {ID: "p-s", Name: "shared"}},
		Gateway: model.Gateway{Entitlements: []*model.Entitlement{
			{Name: "frontier", Groups: []string{"research"}},
			{Name: "vip", Users: []string{"vera"}},
		}},
	}
	research := &identity.Principal{UserName: "rita", Role: model.RoleMember, Groups: []identity.GroupGrant{{GroupID: "g-r", GroupName: "research"}}}
	vision := &identity.Principal{UserName: "vic", Role: model.RoleMember, Groups: []identity.GroupGrant{{GroupID: "g-v", GroupName: "vision"}}}
	vera := &identity.Principal{UserName: "vera", Role: model.RoleMember}
	tests := []struct {
		name    string
		rule    model.AliasRule
		p       *identity.Principal
		project string
		want    bool
	}{
		{"a rule without conditions matches anyone", model.AliasRule{}, vera, "", true},
		{"a group condition matches a member", model.AliasRule{Groups: []string{"vision", "research"}}, research, "p-s", true},
		{"a group condition refuses others", model.AliasRule{Groups: []string{"research"}}, vision, "p-s", false},
		{"a project condition matches a call in the project", model.AliasRule{Projects: []string{"fraud"}}, research, "p-f", true},
		{"a project condition refuses a call in another project", model.AliasRule{Projects: []string{"fraud"}}, research, "p-s", false},
		{"a project condition refuses a call in no project", model.AliasRule{Projects: []string{"fraud"}}, research, "", false},
		{"an entitlement held through a group matches", model.AliasRule{Entitlements: []string{"frontier"}}, research, "", true},
		{"an entitlement held by user name matches", model.AliasRule{Entitlements: []string{"vip", "frontier"}}, vera, "", true},
		{"an entitlement not held refuses", model.AliasRule{Entitlements: []string{"frontier"}}, vision, "", false},
		{"an unknown entitlement refuses", model.AliasRule{Entitlements: []string{"gone"}}, vera, "", false},
		{"every condition list must hold", model.AliasRule{Groups: []string{"research"}, Projects: []string{"shared"}, Entitlements: []string{"vip"}}, research, "p-s", false},
		{"every condition list holding matches", model.AliasRule{Groups: []string{"research"}, Projects: []string{"shared"}, Entitlements: []string{"frontier"}}, research, "p-s", true},
	}
	for _, tc := range tests {
		if got := platform.RuleMatches(e, tc.rule, tc.p, tc.project); got != tc.want {
			t.Errorf("%s: RuleMatches = %v, want %v", tc.name, got, tc.want)
		}
	}
	a := &model.Alias{Name: "chat", Rules: []model.AliasRule{{Entitlements: []string{"frontier"}}, {}}}
	if i, r := platform.MatchingRule(e, a, research, ""); i != 0 || r == nil {
		t.Errorf("research's rule %d, want the first", i)
	}
	if i, _ := platform.MatchingRule(e, a, vision, ""); i != 1 {
		t.Errorf("vision's rule %d, want the second", i)
	}
}

// usageWorld is the example estate with alice's task placed two hours ago
// on ml-research's "1 GPU" in fraud-models, and model calls in the ledger.
type usageWorld struct {
	*testBundle
	alice, victor context.Context
	now           time.Time
}

func newUsageWorld(t *testing.T, b *testBundle) *usageWorld {
	t.Helper()
	b.ApplyExample(t)
	w := &usageWorld{testBundle: b, now: b.Svc.Now()}
	w.alice = b.User(t, "alice", model.RoleMember, "ml-research")
	w.victor = b.User(t, "victor", model.RoleMember, "vision")
	enqueue(t, b, w.alice, "fraud-models", "1 GPU", "ml-research", nil)
	eng := &loop.Loop{State: platform.EngineState{Store: b.Store}, Planner: b.Svc, Holder: "test", Now: func() time.Time { return w.now.Add(-2 * time.Hour) }}
	if reps, err := eng.PassAll(context.Background()); err != nil || len(reps) == 0 || reps[0].Placed != 1 {
		t.Fatalf("engine pass: %+v, %v", reps, err)
	}
	e, err := b.Svc.Estate(b.Admin)
	platformtest.Must(t, err)
	mlr, vis := e.GroupByName("ml-research"), e.GroupByName("vision")
	fraud, detect := e.ProjectByName("fraud-models"), e.ProjectByName("vision-detect")
	call := func(id string, ago time.Duration, user context.Context, userName string, g *model.Group, pr *model.Project, alias, mdl string, in, out, cost int64, cur string) *model.ModelCall {
		return &model.ModelCall{ID: id, TenantID: b.Tenant, At: w.now.Add(-ago), UserID: userID(user), UserName: userName,
			ProjectID: pr.ID, ProjectName: pr.Name, GroupID: g.ID, GroupName: g.Name, Endpoint: "chat/completions",
			Alias: alias, Model: mdl, Target: "openai", InputTokens: in, OutputTokens: out, CostMicros: cost, Currency: cur,
			Status: 200, Outcome: model.CallOK}
	}
	platformtest.Must(t, b.Store.InsertModelCalls(context.Background(), []*model.ModelCall{
		call("call-1", time.Hour, w.alice, "alice", mlr, fraud, "chat", "gpt-4o", 1000, 500, 7500, "USD"),
		call("call-2", 30*time.Minute, w.alice, "alice", mlr, fraud, "chat", "gpt-4o", 2000, 1000, 15000, "USD"),
		call("call-3", 20*time.Minute, w.victor, "victor", vis, detect, "embed", "text-embedding-3-small", 400, 0, 8, "USD"),
		call("call-4", 10*time.Minute, w.victor, "victor", vis, detect, "chat", "llama-3.1-70b", 100, 100, 40, "EUR"),
		// Long before the range.
		call("call-old", 100*24*time.Hour, w.alice, "alice", mlr, fraud, "chat", "gpt-4o", 1, 1, 1, "USD"),
	}))
	return w
}

func (w *usageWorld) usage(t *testing.T, ctx context.Context, q platform.UsageQuery) map[string]platform.UsageRow {
	t.Helper()
	if q.From.IsZero() {
		q.From, q.To = w.now.Add(-3*time.Hour), w.now.Add(time.Hour)
	}
	rows, err := w.Svc.Usage(ctx, q)
	platformtest.Must(t, err)
	out := map[string]platform.UsageRow{}
	for _, r := range rows {
		var names []string
		for _, k := range r.Keys {
			names = append(names, k.Name)
		}
		out[strings.Join(names, "/")] = r
	}
	return out
}

func TestUsageTokensBesideGPUHours(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, b *testBundle) {
		w := newUsageWorld(t, b)
		gpuHours := func(r platform.UsageRow) bool { return r.MicroGPUHours >= 2_000_000 && r.MicroGPUHours < 2_100_000 }

		t.Run("by user: alice has GPU-hours and tokens, victor only tokens", func(t *testing.T) {
			rows := w.usage(t, b.Admin, platform.UsageQuery{By: []string{store.ByUser}})
			a, v := rows["alice"], rows["victor"]
			if len(rows) != 2 || !gpuHours(a) || a.Calls != 2 || a.InputTokens != 3000 || a.OutputTokens != 1500 || a.TokenCostMicros != 22500 || a.TokenCurrency != "USD" || a.Currency != "USD" {
				t.Errorf("alice %+v (rows %v)", a, rows)
			}
			if v.MicroGPUHours != 0 || v.Currency != "" || v.Calls != 2 || v.InputTokens != 500 || v.TokenCurrency != "mixed" {
				t.Errorf("victor %+v", v)
			}
		})
		t.Run("by group and project the ledgers merge on the same keys", func(t *testing.T) {
			rows := w.usage(t, b.Admin, platform.UsageQuery{By: []string{store.ByGroup, store.ByProject}})
			if r := rows["ml-research/fraud-models"]; len(rows) != 2 || !gpuHours(r) || r.Calls != 2 {
				t.Errorf("rows %+v", rows)
			}
			if r := rows["vision/vision-detect"]; r.Calls != 2 || r.MicroGPUHours != 0 {
				t.Errorf("vision %+v", r)
			}
		})
		t.Run("no dimension gives one row of both", func(t *testing.T) {
			rows := w.usage(t, b.Admin, platform.UsageQuery{})
			if r := rows[""]; len(rows) != 1 || !gpuHours(r) || r.Calls != 4 || r.InputTokens != 3500 || r.OutputTokens != 1600 {
				t.Errorf("rows %+v", rows)
			}
		})
		t.Run("by a dimension of GPU work only, model calls fall under — beside the GPU work", func(t *testing.T) {
			rows := w.usage(t, b.Admin, platform.UsageQuery{By: []string{store.ByPool, store.ByUser}})
			if r := rows["onprem-k8s/alice"]; len(rows) != 3 || !gpuHours(r) || r.Calls != 0 || r.TokenCurrency != "" {
				t.Errorf("rows %+v", rows)
			}
			if r := rows["—/alice"]; r.Calls != 2 || r.InputTokens != 3000 || r.TokenCostMicros != 22500 || r.MicroGPUHours != 0 || r.Keys[0].ID != "" {
				t.Errorf("alice's calls %+v", r)
			}
			if r := rows["—/victor"]; r.Calls != 2 || r.InputTokens != 500 {
				t.Errorf("victor's calls %+v", r)
			}
		})
		t.Run("by alias and model, GPU work falls under —", func(t *testing.T) {
			rows := w.usage(t, b.Admin, platform.UsageQuery{By: []string{store.ByAlias, store.ByModel}})
			if len(rows) != 4 || rows["chat/gpt-4o"].Calls != 2 || rows["embed/text-embedding-3-small"].InputTokens != 400 || rows["chat/llama-3.1-70b"].TokenCostMicros != 40 {
				t.Errorf("rows %+v", rows)
			}
			for k, r := range rows {
				if gpu := k == "—/—"; gpu != (r.MicroGPUHours != 0) || gpu != (r.Currency != "") || gpu == (r.Calls != 0) {
					t.Errorf("%s: %+v", k, r)
				}
			}
		})
		t.Run("filters apply to both ledgers", func(t *testing.T) {
			rows := w.usage(t, b.Admin, platform.UsageQuery{By: []string{store.ByUser}, Project: "vision-detect"})
			if len(rows) != 1 || rows["victor"].Calls != 2 {
				t.Errorf("project filter: %+v", rows)
			}
			rows = w.usage(t, b.Admin, platform.UsageQuery{By: []string{store.ByModel}, User: "alice"})
			if len(rows) != 2 || rows["gpt-4o"].Calls != 2 || !gpuHours(rows["—"]) {
				t.Errorf("user filter: %+v", rows)
			}
			rows = w.usage(t, b.Admin, platform.UsageQuery{By: []string{store.ByUser}, From: w.now.Add(-45 * time.Minute), To: w.now.Add(-15 * time.Minute)})
			if a := rows["alice"]; a.Calls != 1 || a.MicroGPUHours < 499_000 || a.MicroGPUHours > 501_000 || rows["victor"].Calls != 1 {
				t.Errorf("range: %+v", rows)
			}
		})
		t.Run("members see their groups' tokens only", func(t *testing.T) {
			rows := w.usage(t, w.victor, platform.UsageQuery{By: []string{store.ByGroup, store.ByAlias}})
			if len(rows) != 2 || rows["vision/chat"].Calls != 1 || rows["vision/embed"].Calls != 1 {
				t.Errorf("victor's rows %+v", rows)
			}
			rows = w.usage(t, w.victor, platform.UsageQuery{By: []string{store.ByUser}})
			if _, ok := rows["alice"]; ok || len(rows) != 1 {
				t.Errorf("victor sees %+v", rows)
			}
			_, err := w.Svc.Usage(w.victor, platform.UsageQuery{From: w.now.Add(-time.Hour), To: w.now, Group: "ml-research"})
			platformtest.WantError(t, err, platform.CodeNotFound)
		})
		t.Run("an unknown or repeated dimension is refused", func(t *testing.T) {
			_, err := w.Svc.Usage(b.Admin, platform.UsageQuery{From: w.now.Add(-time.Hour), To: w.now, By: []string{"planet"}})
			platformtest.WantError(t, err, platform.CodeInvalid, `cannot be grouped by "planet"`, "alias, model")
			_, err = w.Svc.Usage(b.Admin, platform.UsageQuery{From: w.now.Add(-time.Hour), To: w.now, By: []string{"user", "user"}})
			platformtest.WantError(t, err, platform.CodeInvalid, "twice")
		})
		// Last, as it adds a call to the ledger.
		t.Run("a refused call counts, costs nothing, keeps the currency and shows as (no model)", func(t *testing.T) {
			alice := userID(w.alice)
			e, err := b.Svc.Estate(b.Admin)
			platformtest.Must(t, err)
			mlr, fraud := e.GroupByName("ml-research"), e.ProjectByName("fraud-models")
			platformtest.Must(t, b.Store.InsertModelCalls(context.Background(), []*model.ModelCall{{ID: "call-refused", TenantID: b.Tenant,
				At: w.now.Add(-5 * time.Minute), UserID: alice, UserName: "alice", ProjectID: fraud.ID, ProjectName: fraud.Name,
				GroupID: mlr.ID, GroupName: mlr.Name, Endpoint: "chat/completions", Alias: "chat", Status: 429, Outcome: model.CallRateLimited}}))
			rows := w.usage(t, b.Admin, platform.UsageQuery{User: "alice"})
			if r := rows[""]; r.Calls != 3 || r.TokenCostMicros != 22500 || r.TokenCurrency != "USD" {
				t.Errorf("alice's total %+v", r)
			}
			rows = w.usage(t, b.Admin, platform.UsageQuery{By: []string{store.ByAlias, store.ByModel}, User: "alice"})
			if r := rows["chat/(no model)"]; len(rows) != 3 || r.Calls != 1 || r.TokenCurrency != "" || r.Keys[1].ID != "" || rows["chat/gpt-4o"].TokenCurrency != "USD" {
				t.Errorf("rows %+v", rows)
			}
		})
	})
}
