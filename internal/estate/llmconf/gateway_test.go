package llmconf_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/estate/estatetest"
	"github.com/klique-ai/klique/internal/estate/llmconf"
	"github.com/klique-ai/klique/internal/model"
)

// gatewayDoc is the gateway section of the design, over baseEstate's groups
// (research, vision) and projects (fraud, shared).
const gatewayDoc = estatetest.Header + `
gateway:
  providers:
    - {name: openai, baseUrl: "https://api.openai.com/v1", keySecret: OPENAI_API_KEY, timeout: 60s}
  routes:
    - name: llama-70b
      description: vLLM on the k8s pool
      endpoints: ["http://10.0.3.17:8000/v1", "http://10.0.3.18:8000/v1"]
      timeout: 120s
      app: vllm
  models:
    - {name: llama-3.1-70b, route: llama-70b, upstream: meta-llama/Llama-3.1-70B-Instruct, inputPrice: 0.20, outputPrice: 0.20, currency: USD, maxOutputTokens: 8192, maxImageTokens: 1600}
    - {name: gpt-4o, provider: openai, inputPrice: 2.50, outputPrice: 10.00}
  entitlements:
    - {name: frontier, groups: [research], users: []}
  aliases:
    - name: chat
      description: General chat
      rules:
        - {entitlements: [frontier], targets: [{model: gpt-4o}], fallbacks: [llama-3.1-70b]}
        - {targets: [{model: llama-3.1-70b, weight: 3}, {model: gpt-4o, weight: 0}], fallbacks: [gpt-4o]}
      guardrails: {deny: ['(?i)\bssn\b']}
  budgets:
    - {project: fraud, period: month, tokens: 50000000, perUserTokens: 5000000}
    - {project: shared, period: Day, money: 25.00, perUserMoney: 2.5}
  rateLimits:
    - {scope: user, requestsPerMinute: 600, tokensPerMinute: 200000}
    - {scope: alias, name: chat, requestsPerMinute: 3000}
  guardrails: {deny: ['(?i)(password|api[_-]?key)\s*[:=]'], guardAlias: ""}
`

// withGateway is baseEstate with gatewayDoc applied.
func withGateway(t *testing.T) *estate.Estate {
	t.Helper()
	e := estatetest.Apply(t, baseEstate(), gatewayDoc)
	if err := e.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	return e
}

func TestGatewayApply(t *testing.T) {
	t.Parallel()

	t.Run("every field is read, with prices in millionths and defaults made explicit", func(t *testing.T) {
		t.Parallel()
		e := withGateway(t)
		if p := llmconf.Provider(&e.Gateway, "openai"); p == nil || !reflect.DeepEqual(*p, model.Provider{Name: "openai", BaseURL: "https://api.openai.com/v1",
			KeySecret: "OPENAI_API_KEY", Timeout: time.Minute}) {
			t.Errorf("provider openai = %+v", p)
		}
		if r := llmconf.Route(&e.Gateway, "llama-70b"); r == nil || r.Timeout != 2*time.Minute || len(r.Endpoints) != 2 || r.Description != "vLLM on the k8s pool" {
			t.Errorf("route llama-70b = %+v", r)
		}
		want := model.LLMModel{Name: "llama-3.1-70b", Upstream: "meta-llama/Llama-3.1-70B-Instruct", Route: "llama-70b",
			InputPriceMicros: 200_000, OutputPriceMicros: 200_000, Currency: "USD", MaxOutputTokens: 8192, MaxImageTokens: 1600}
		if m := llmconf.Model(&e.Gateway, "llama-3.1-70b"); m == nil || *m != want {
			t.Errorf("model llama-3.1-70b = %+v, want %+v", m, want)
		}
		want = model.LLMModel{Name: "gpt-4o", Upstream: "gpt-4o", Provider: "openai",
			InputPriceMicros: 2_500_000, OutputPriceMicros: 10_000_000, Currency: "USD", MaxOutputTokens: llmconf.DefaultMaxOutputTokens}
		// maxImageTokens stays 0 when left out: the gateway's default.
		if m := llmconf.Model(&e.Gateway, "gpt-4o"); m == nil || *m != want {
			t.Errorf("model gpt-4o = %+v, want the upstream, currency and output bound by default: %+v", m, want)
		}
		chat := llmconf.Alias(&e.Gateway, "chat")
		if chat == nil || len(chat.Rules) != 2 {
			t.Fatalf("alias chat = %+v", chat)
		}
		if got := chat.Rules[0]; !reflect.DeepEqual(got.Entitlements, []string{"frontier"}) || !reflect.DeepEqual(got.Targets, []model.Target{{Model: "gpt-4o", Weight: 1}}) ||
			!reflect.DeepEqual(got.Fallbacks, []string{"llama-3.1-70b"}) {
			t.Errorf("chat rule 1 = %+v, want frontier to gpt-4o (weight 1 by default), falling back to llama", got)
		}
		if got := chat.Rules[1].Targets; !reflect.DeepEqual(got, []model.Target{{Model: "llama-3.1-70b", Weight: 3}, {Model: "gpt-4o", Weight: 0}}) {
			t.Errorf("chat rule 2 targets = %+v", got)
		}
		if !reflect.DeepEqual(chat.Guardrails.Deny, []string{`(?i)\bssn\b`}) {
			t.Errorf("chat guardrails = %+v", chat.Guardrails)
		}
		if b := llmconf.TokenBudget(&e.Gateway, "fraud", model.PeriodMonth); b == nil || *b != (model.TokenBudget{Project: "fraud", Period: model.PeriodMonth, Tokens: 50_000_000, PerUserTokens: 5_000_000}) {
			t.Errorf("budget of fraud = %+v", b)
		}
		if b := llmconf.TokenBudget(&e.Gateway, "shared", model.PeriodDay); b == nil || b.Micros != 25_000_000 || b.PerUserMicros != 2_500_000 || b.Tokens != 0 {
			t.Errorf("budget of shared (period lower-cased, money in millionths) = %+v", b)
		}
		if r := llmconf.RateLimit(&e.Gateway, model.RateLimitUser, ""); r == nil || r.RequestsPerMinute != 600 || r.TokensPerMinute != 200_000 {
			t.Errorf("user rate limit = %+v", r)
		}
		if r := llmconf.RateLimit(&e.Gateway, model.RateLimitAlias, "chat"); r == nil || r.RequestsPerMinute != 3000 || r.TokensPerMinute != 0 {
			t.Errorf("alias rate limit = %+v", r)
		}
		if en := llmconf.Entitlement(&e.Gateway, "frontier"); en == nil || !reflect.DeepEqual(en.Groups, []string{"research"}) {
			t.Errorf("entitlement frontier = %+v", en)
		}
		if g := e.Gateway.Guardrails; len(g.Deny) != 1 || g.GuardAlias != "" {
			t.Errorf("global guardrails = %+v", g)
		}
	})

	t.Run("applying onto an estate without a gateway creates every object, the guardrails included", func(t *testing.T) {
		t.Parallel()
		e := withGateway(t)
		cs := estate.Diff(baseEstate(), e)
		counts := map[string]int{}
		for _, c := range cs {
			if c.Action != estate.Create {
				t.Errorf("%s, want only creations", c)
			}
			counts[c.Kind]++
		}
		want := map[string]int{llmconf.KindProvider: 1, llmconf.KindRoute: 1, llmconf.KindModel: 2, llmconf.KindEntitlement: 1, llmconf.KindAlias: 1,
			llmconf.KindTokenBudget: 2, llmconf.KindRateLimit: 2, llmconf.KindGuardrails: 1}
		if !reflect.DeepEqual(counts, want) {
			t.Errorf("changes by kind %v, want %v:%s", counts, want, estatetest.ChangeList(cs))
		}
	})

	t.Run("applying the same file again changes nothing", func(t *testing.T) {
		t.Parallel()
		e := withGateway(t)
		again := estatetest.Apply(t, e, gatewayDoc)
		if cs := estate.Diff(e, again); len(cs) > 0 {
			t.Fatalf("second apply:%s", estatetest.ChangeList(cs))
		}
	})

	t.Run("objects the file does not mention are kept, and one it names is described whole", func(t *testing.T) {
		t.Parallel()
		e := withGateway(t)
		next := estatetest.Apply(t, e, estatetest.Header+`
gateway:
  models:
    - {name: gpt-4o, provider: openai}
  budgets:
    - {project: fraud, period: week, tokens: 1000}
`)
		if err := next.Validate(); err != nil {
			t.Fatal(err)
		}
		if m := llmconf.Model(&next.Gateway, "gpt-4o"); m.InputPriceMicros != 0 || m.OutputPriceMicros != 0 {
			t.Errorf("gpt-4o described without prices kept them: %+v", m)
		}
		if llmconf.Model(&next.Gateway, "llama-3.1-70b") == nil || llmconf.Alias(&next.Gateway, "chat") == nil || llmconf.Provider(&next.Gateway, "openai") == nil || llmconf.Route(&next.Gateway, "llama-70b") == nil {
			t.Error("objects the file does not mention were removed")
		}
		if llmconf.TokenBudget(&next.Gateway, "fraud", model.PeriodMonth) == nil || llmconf.TokenBudget(&next.Gateway, "fraud", model.PeriodWeek) == nil {
			t.Error("a budget of another period must be another budget")
		}
		if len(next.Gateway.Guardrails.Deny) != 1 {
			t.Error("a file without guardrails changed the global guardrails")
		}
		cs := estate.Diff(e, next)
		if len(cs) != 2 || cs[0].String() != "update llm model gpt-4o (inputPriceMicros, outputPriceMicros)" || cs[1].String() != "create token budget fraud per week" {
			t.Errorf("changes:%s", estatetest.ChangeList(cs))
		}
	})

	t.Run("guardrails in the file replace the global guardrails, and empty ones clear them", func(t *testing.T) {
		t.Parallel()
		e := withGateway(t)
		next := estatetest.Apply(t, e, estatetest.Header+"gateway:\n  guardrails: {allow: ['^[\\x00-\\x7f]*$']}\n")
		if g := next.Gateway.Guardrails; len(g.Deny) != 0 || len(g.Allow) != 1 {
			t.Errorf("guardrails = %+v, want only the allow pattern", g)
		}
		cleared := estatetest.Apply(t, e, estatetest.Header+"gateway:\n  guardrails: {}\n")
		cs := estate.Diff(e, cleared)
		if !llmconf.GuardrailsEmpty(cleared.Gateway.Guardrails) || len(cs) != 1 || cs[0].Action != estate.Delete || cs[0].Kind != llmconf.KindGuardrails {
			t.Errorf("clearing the guardrails: %+v:%s", cleared.Gateway.Guardrails, estatetest.ChangeList(cs))
		}
	})

	t.Run("values that cannot be read are listed all at once", func(t *testing.T) {
		t.Parallel()
		doc := estatetest.Parse(t, estatetest.Header+`
gateway:
  providers:
    - {name: p, baseUrl: "https://x/v1", timeout: soon}
  models:
    - {name: m, provider: p, inputPrice: 0.0000001, maxOutputTokens: 1.5}
    - {name: m2, provider: p, maxImageTokens: 0}
  budgets:
    - {project: fraud, period: day, tokens: many}
  aliases:
    - name: a
      rules:
        - {targets: [{model: m, weight: 0.5}]}
`)
		_, err := doc.Apply(baseEstate(), "t", estatetest.SeqIDs("x"), estatetest.Now)
		ps := estatetest.Problems(t, err)
		for _, want := range [][]string{
			{`provider "p"`, `timeout "soon"`, "30s"},
			{`model "m"`, "inputPrice", "more than 6 decimals"},
			{`model "m"`, "maxOutputTokens must be a whole number"},
			{`model "m2"`, "maxImageTokens must be between 1 and 1000000", "leave it out"},
			{"token budget fraud per day", `tokens "many" is not a number`},
			{`alias "a"`, "weight of m must be a whole number"},
		} {
			if _, ok := estatetest.FindProblem(ps, want...); !ok {
				t.Errorf("no problem with %q in:%s", want, estatetest.ProblemList(ps))
			}
		}
	})

	t.Run("an object described twice in the file is refused", func(t *testing.T) {
		t.Parallel()
		doc := estatetest.Parse(t, estatetest.Header+`
gateway:
  models:
    - {name: m, provider: p}
    - {name: m, route: r}
  budgets:
    - {project: fraud, period: day, tokens: 1}
    - {project: fraud, period: DAY, tokens: 2}
  rateLimits:
    - {scope: user, requestsPerMinute: 1}
    - {scope: user, requestsPerMinute: 2}
`)
		_, err := doc.Apply(baseEstate(), "t", estatetest.SeqIDs("x"), estatetest.Now)
		ps := estatetest.Problems(t, err)
		for _, want := range [][]string{{`model "m"`, "twice"}, {`token budget "fraud per day"`, "twice"}, {`rate limit "each user"`, "twice"}} {
			if _, ok := estatetest.FindProblem(ps, want...); !ok {
				t.Errorf("no problem with %q in:%s", want, estatetest.ProblemList(ps))
			}
		}
	})

	t.Run("an unknown field in the gateway section is refused with its line", func(t *testing.T) {
		t.Parallel()
		_, err := estate.ParseDocument([]byte(estatetest.Header + "gateway:\n  models:\n    - {name: m, provider: p, inputPrize: 1}\n"))
		if err == nil || !estatetest.ContainsAll(err.Error(), "inputPrize", "[5:") {
			t.Fatalf("ParseDocument = %v, want the unknown field and its line", err)
		}
	})
}

func TestGatewayExport(t *testing.T) {
	t.Parallel()

	t.Run("the gateway survives export, parse and apply with no changes", func(t *testing.T) {
		t.Parallel()
		e := withGateway(t)
		out, err := e.Export().Marshal()
		if err != nil {
			t.Fatal(err)
		}
		again := estatetest.Apply(t, e, string(out))
		if cs := estate.Diff(e, again); len(cs) > 0 {
			t.Fatalf("export, parse and apply changed:%s\n%s", estatetest.ChangeList(cs), out)
		}
		fresh := estatetest.Apply(t, baseEstate(), string(out))
		out2, err := fresh.Export().Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != string(out2) {
			t.Fatalf("exports differ:\n%s\n---\n%s", out, out2)
		}
		for _, want := range []string{"gateway:", "baseUrl: https://api.openai.com/v1", "keySecret: OPENAI_API_KEY", "timeout: 1m", "timeout: 2m",
			"inputPrice: 2.5", "outputPrice: 10", "upstream: gpt-4o", "maxOutputTokens: 4096", "maxImageTokens: 1600", "weight: 3", "weight: 0",
			"money: 25", "perUserMoney: 2.5", "period: day", "tokens: 50000000", "scope: alias", "app: vllm"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("export lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(string(out), "weight: 1\n") || strings.Count(string(out), "maxImageTokens") != 1 {
			t.Errorf("export writes the default weight:\n%s", out)
		}
	})

	t.Run("objects are exported by key whatever order they were made in", func(t *testing.T) {
		t.Parallel()
		e := withGateway(t)
		g := &e.Gateway
		g.Models[0], g.Models[1] = g.Models[1], g.Models[0]
		g.Budgets[0], g.Budgets[1] = g.Budgets[1], g.Budgets[0]
		g.RateLimits[0], g.RateLimits[1] = g.RateLimits[1], g.RateLimits[0]
		d := e.Export().Gateway
		if d.Models[0].Name != "gpt-4o" || d.Budgets[0].Project != "fraud" || d.RateLimits[0].Scope != "alias" {
			t.Errorf("export order: models %s…, budgets %s…, rate limits %s…", d.Models[0].Name, d.Budgets[0].Project, d.RateLimits[0].Scope)
		}
		e.Normalize()
		if g.Models[0].Name != "gpt-4o" || g.Budgets[0].Project != "fraud" || g.RateLimits[0].Scope != model.RateLimitAlias {
			t.Errorf("Normalize does not sort by key")
		}
		if r := llmconf.Alias(&e.Gateway, "chat").Rules; len(r[0].Entitlements) != 1 {
			t.Errorf("Normalize reordered an alias's rules: %+v", r)
		}
	})

	t.Run("an estate without a gateway exports no gateway section", func(t *testing.T) {
		t.Parallel()
		out, err := baseEstate().Export().Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), "gateway") {
			t.Fatalf("export:\n%s", out)
		}
	})
}

func TestGatewayValidate(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name   string
		mutate func(e *estate.Estate)
		want   []string
	}{
		{"a provider without a name", func(e *estate.Estate) { llmconf.Provider(&e.Gateway, "openai").Name = "" }, []string{`provider ""`, "name is empty"}},
		{"two routes of one name", func(e *estate.Estate) {
			e.Gateway.Routes = append(e.Gateway.Routes, &model.Route{Name: "llama-70b", Endpoints: []string{"http://a/v1"}})
		}, []string{`route "llama-70b"`, "same name"}},
		{"a provider with a relative base URL", func(e *estate.Estate) { llmconf.Provider(&e.Gateway, "openai").BaseURL = "api.openai.com/v1" }, []string{`provider "openai"`, "absolute http or https URL"}},
		{"a provider with an ftp base URL", func(e *estate.Estate) { llmconf.Provider(&e.Gateway, "openai").BaseURL = "ftp://api.openai.com/v1" }, []string{"absolute http or https URL"}},
		{"a provider with a password in its URL", func(e *estate.Estate) {
			llmconf.Provider(&e.Gateway, "openai").BaseURL = "https://u:p@api.openai.com/v1"
		}, []string{"user name or password", "keySecret"}},
		{"a provider without a base URL", func(e *estate.Estate) { llmconf.Provider(&e.Gateway, "openai").BaseURL = "" }, []string{"baseUrl is missing"}},
		{"a key secret that is no variable name", func(e *estate.Estate) { llmconf.Provider(&e.Gateway, "openai").KeySecret = "openai-key" }, []string{"keySecret", "letters, digits and '_'"}},
		{"a timeout under a second", func(e *estate.Estate) { llmconf.Provider(&e.Gateway, "openai").Timeout = 500 * time.Millisecond }, []string{"timeout 500ms", "between 1s and 1h"}},
		{"a timeout over an hour", func(e *estate.Estate) { llmconf.Route(&e.Gateway, "llama-70b").Timeout = 2 * time.Hour }, []string{`route "llama-70b"`, "timeout 2h0m0s"}},
		{"a provider that speaks an API the gateway does not know", func(e *estate.Estate) { llmconf.Provider(&e.Gateway, "openai").API = "grpc" }, []string{`provider "openai"`, `api "grpc"`, "openai-compatible", "anthropic"}},
		{"a route that speaks an API the gateway does not know", func(e *estate.Estate) { llmconf.Route(&e.Gateway, "llama-70b").API = "OpenAI" }, []string{`route "llama-70b"`, `api "OpenAI"`}},
		{"a route without endpoints or an app", func(e *estate.Estate) { r := llmconf.Route(&e.Gateway, "llama-70b"); r.Endpoints, r.App = nil, "" }, []string{"has no endpoints and no app", "1 to 64", "app: vllm"}},
		{"a route with 65 endpoints", func(e *estate.Estate) {
			r := llmconf.Route(&e.Gateway, "llama-70b")
			r.Endpoints = nil
			for i := range 65 {
				r.Endpoints = append(r.Endpoints, fmt.Sprintf("http://10.0.0.%d:8000/v1", i))
			}
		}, []string{"has 65 endpoints"}},
		{"an endpoint listed twice", func(e *estate.Estate) { r := llmconf.Route(&e.Gateway, "llama-70b"); r.Endpoints[1] = r.Endpoints[0] }, []string{"twice"}},
		{"an endpoint naming an app instance", func(e *estate.Estate) {
			llmconf.Route(&e.Gateway, "llama-70b").Endpoints[0] = "http://0192a3b4-0000-7000-8000-000000000001.app.klique.invalid/v1"
		}, []string{"names app instances", "app: vllm"}},
		{"an endpoint that is no URL", func(e *estate.Estate) { llmconf.Route(&e.Gateway, "llama-70b").Endpoints[0] = "10.0.3.17:8000" }, []string{"endpoint", "absolute http or https URL"}},
		{"a model with both a provider and a route", func(e *estate.Estate) { llmconf.Model(&e.Gateway, "gpt-4o").Route = "llama-70b" }, []string{`model "gpt-4o"`, "give one of them"}},
		{"a model with neither", func(e *estate.Estate) { llmconf.Model(&e.Gateway, "gpt-4o").Provider = "" }, []string{"give the provider or the route"}},
		{"a model of an unknown provider", func(e *estate.Estate) { llmconf.Model(&e.Gateway, "gpt-4o").Provider = "azure" }, []string{`provider "azure" is not a known provider`}},
		{"a model of an unknown route", func(e *estate.Estate) { llmconf.Model(&e.Gateway, "llama-3.1-70b").Route = "gone" }, []string{`route "gone" is not a known route`}},
		{"a negative price", func(e *estate.Estate) { llmconf.Model(&e.Gateway, "gpt-4o").OutputPriceMicros = -1 }, []string{"outputPrice must be 0 or more"}},
		{"a currency in lower case", func(e *estate.Estate) { llmconf.Model(&e.Gateway, "gpt-4o").Currency = "usd" }, []string{`currency "usd"`}},
		{"an output bound of 0", func(e *estate.Estate) { llmconf.Model(&e.Gateway, "gpt-4o").MaxOutputTokens = -1 }, []string{"maxOutputTokens -1 must be between 1 and 10000000"}},
		{"an output bound above 10 million", func(e *estate.Estate) { llmconf.Model(&e.Gateway, "gpt-4o").MaxOutputTokens = 10_000_001 }, []string{"maxOutputTokens 10000001"}},
		{"a negative image bound", func(e *estate.Estate) { llmconf.Model(&e.Gateway, "gpt-4o").MaxImageTokens = -1 }, []string{"maxImageTokens -1 must be between 1 and 1000000"}},
		{"an image bound above a million", func(e *estate.Estate) { llmconf.Model(&e.Gateway, "gpt-4o").MaxImageTokens = 1_000_001 }, []string{"maxImageTokens 1000001"}},
		{"an upstream with a newline", func(e *estate.Estate) { llmconf.Model(&e.Gateway, "gpt-4o").Upstream = "gpt\n4o" }, []string{"upstream", "control characters"}},
		{"an entitlement of an unknown group", func(e *estate.Estate) { llmconf.Entitlement(&e.Gateway, "frontier").Groups = []string{"nlp"} }, []string{`entitlement "frontier"`, `group "nlp" is not a known group`}},
		{"an entitlement with an empty user", func(e *estate.Estate) { llmconf.Entitlement(&e.Gateway, "frontier").Users = []string{""} }, []string{"user: name is empty"}},
		{"an alias without rules", func(e *estate.Estate) { llmconf.Alias(&e.Gateway, "chat").Rules = nil }, []string{`alias "chat"`, "has no rule"}},
		{"a rule without targets", func(e *estate.Estate) { llmconf.Alias(&e.Gateway, "chat").Rules[1].Targets = nil }, []string{"rule 2: give at least one target model"}},
		{"a target that is no model", func(e *estate.Estate) { llmconf.Alias(&e.Gateway, "chat").Rules[0].Targets[0].Model = "gpt-5" }, []string{`rule 1: target model "gpt-5" is not a known model`}},
		{"a fallback that is no model", func(e *estate.Estate) { llmconf.Alias(&e.Gateway, "chat").Rules[0].Fallbacks = []string{"llama-2"} }, []string{`rule 1: fallback model "llama-2" is not a known model`}},
		{"a negative weight", func(e *estate.Estate) { llmconf.Alias(&e.Gateway, "chat").Rules[1].Targets[1].Weight = -1 }, []string{"rule 2: weight -1", "between 0 and"}},
		{"a rule whose weights are all 0", func(e *estate.Estate) { llmconf.Alias(&e.Gateway, "chat").Rules[1].Targets[0].Weight = 0 }, []string{"rule 2: every target has weight 0"}},
		{"a target listed twice", func(e *estate.Estate) {
			r := &llmconf.Alias(&e.Gateway, "chat").Rules[1]
			r.Targets[1].Model = r.Targets[0].Model
		}, []string{"rule 2: lists target", "twice"}},
		{"a rule of an unknown group", func(e *estate.Estate) { llmconf.Alias(&e.Gateway, "chat").Rules[0].Groups = []string{"nlp"} }, []string{`rule 1: group "nlp" is not a known group`}},
		{"a rule of an unknown project", func(e *estate.Estate) { llmconf.Alias(&e.Gateway, "chat").Rules[0].Projects = []string{"gone"} }, []string{`rule 1: project "gone" is not a known project`}},
		{"a rule of an unknown entitlement", func(e *estate.Estate) { llmconf.Alias(&e.Gateway, "chat").Rules[0].Entitlements = []string{"vip"} }, []string{`rule 1: entitlement "vip" is not a known entitlement`}},
		{"an alias deny pattern that does not compile", func(e *estate.Estate) { llmconf.Alias(&e.Gateway, "chat").Guardrails.Deny = []string{"(unclosed"} }, []string{`alias "chat" guardrails`, `deny pattern 1 "(unclosed" is not a valid regular expression`}},
		{"an empty pattern", func(e *estate.Estate) { e.Gateway.Guardrails.Allow = []string{""} }, []string{"global guardrails", "allow pattern 1 is empty"}},
		{"an alias that guards itself", func(e *estate.Estate) { llmconf.Alias(&e.Gateway, "chat").Guardrails.GuardAlias = "chat" }, []string{`guardAlias "chat" is the alias it guards`}},
		{"a guard alias that does not exist", func(e *estate.Estate) { e.Gateway.Guardrails.GuardAlias = "guard" }, []string{"global guardrails", `guardAlias "guard" is not a known alias`}},
		{"a budget of an unknown project", func(e *estate.Estate) { llmconf.TokenBudget(&e.Gateway, "fraud", model.PeriodMonth).Project = "gone" }, []string{"token budget gone per month", `project "gone" is not a known project`}},
		{"a budget of a year", func(e *estate.Estate) { llmconf.TokenBudget(&e.Gateway, "fraud", model.PeriodMonth).Period = "year" }, []string{`period "year" must be day, week or month`}},
		{"a budget in tokens and money", func(e *estate.Estate) { llmconf.TokenBudget(&e.Gateway, "fraud", model.PeriodMonth).Micros = 1 }, []string{"give tokens or money, not both"}},
		{"a budget of nothing", func(e *estate.Estate) {
			b := llmconf.TokenBudget(&e.Gateway, "fraud", model.PeriodMonth)
			b.Tokens, b.PerUserTokens = 0, 0
		}, []string{"give tokens or money above 0"}},
		{"a money budget beside models priced in two currencies", func(e *estate.Estate) { llmconf.Model(&e.Gateway, "gpt-4o").Currency = "EUR" },
			[]string{"token budget shared per day", "is in money", "EUR", "USD", "price every model in one, or budget in tokens"}},
		{"a negative budget", func(e *estate.Estate) { llmconf.TokenBudget(&e.Gateway, "fraud", model.PeriodMonth).Tokens = -5 }, []string{"must be 0 or more"}},
		{"a per-user limit above the whole", func(e *estate.Estate) {
			llmconf.TokenBudget(&e.Gateway, "fraud", model.PeriodMonth).PerUserTokens = 60_000_000
		}, []string{"perUserTokens 60000000 is above the whole budget of 50000000 tokens"}},
		{"a per-user money limit above the whole", func(e *estate.Estate) {
			llmconf.TokenBudget(&e.Gateway, "shared", model.PeriodDay).PerUserMicros = 30_000_000
		}, []string{"perUserMoney 30 is above the whole budget of 25"}},
		{"a per-user limit in tokens of a budget in money", func(e *estate.Estate) { llmconf.TokenBudget(&e.Gateway, "shared", model.PeriodDay).PerUserTokens = 5 }, []string{"perUserTokens needs a budget in tokens"}},
		{"a rate limit of an unknown scope", func(e *estate.Estate) { llmconf.RateLimit(&e.Gateway, model.RateLimitUser, "").Scope = "tenant" }, []string{`scope "tenant" must be user, project or alias`}},
		{"a rate limit of an unknown alias", func(e *estate.Estate) { llmconf.RateLimit(&e.Gateway, model.RateLimitAlias, "chat").Name = "code" }, []string{"rate limit alias code", `alias "code" is not a known alias`}},
		{"a rate limit of an unknown project", func(e *estate.Estate) {
			e.Gateway.RateLimits = append(e.Gateway.RateLimits, &model.RateLimit{Scope: model.RateLimitProject, Name: "gone", RequestsPerMinute: 1})
		}, []string{"rate limit project gone", `project "gone" is not a known project`}},
		{"a rate limit of nothing", func(e *estate.Estate) {
			r := llmconf.RateLimit(&e.Gateway, model.RateLimitUser, "")
			r.RequestsPerMinute, r.TokensPerMinute = 0, 0
		}, []string{"give requestsPerMinute or tokensPerMinute above 0"}},
		{"a negative rate limit", func(e *estate.Estate) { llmconf.RateLimit(&e.Gateway, model.RateLimitUser, "").TokensPerMinute = -1 }, []string{"must be between 0 and"}},
		{"two rate limits of one scope and name", func(e *estate.Estate) {
			e.Gateway.RateLimits = append(e.Gateway.RateLimits, &model.RateLimit{Scope: model.RateLimitUser, RequestsPerMinute: 1})
		}, []string{"rate limit each user", "appears twice"}},
		{"two budgets of one project and period", func(e *estate.Estate) {
			e.Gateway.Budgets = append(e.Gateway.Budgets, &model.TokenBudget{Project: "fraud", Period: model.PeriodMonth, Tokens: 1})
		}, []string{"token budget fraud per month", "one budget per project and period"}},
		{"a group that gateway objects name is gone", func(e *estate.Estate) {
			e.Groups = e.Groups[:1] // research only
			llmconf.Entitlement(&e.Gateway, "frontier").Groups = []string{"vision"}
		}, []string{`entitlement "frontier"`, `group "vision" is not a known group`}},
	}
	for _, tc := range tests {
		t.Run(tc.name+" is refused", func(t *testing.T) {
			t.Parallel()
			e := withGateway(t)
			tc.mutate(e)
			ps := estatetest.Problems(t, e.Validate())
			if _, ok := estatetest.FindProblem(ps, tc.want...); !ok {
				t.Fatalf("no problem with %q in:%s", tc.want, estatetest.ProblemList(ps))
			}
		})
	}

	t.Run("every problem is listed at once", func(t *testing.T) {
		t.Parallel()
		e := withGateway(t)
		llmconf.Model(&e.Gateway, "gpt-4o").Provider = "azure"
		llmconf.Alias(&e.Gateway, "chat").Rules[1].Targets = nil
		llmconf.TokenBudget(&e.Gateway, "fraud", model.PeriodMonth).Period = "year"
		e.Gateway.Guardrails.Deny = []string{"("}
		if ps := estatetest.Problems(t, e.Validate()); len(ps) != 4 {
			t.Fatalf("%d problems, want 4:%s", len(ps), estatetest.ProblemList(ps))
		}
	})

	t.Run("a zero weight beside a positive one, a keyless provider and unset timeouts are fine", func(t *testing.T) {
		t.Parallel()
		e := withGateway(t)
		llmconf.Provider(&e.Gateway, "openai").KeySecret = ""
		llmconf.Provider(&e.Gateway, "openai").Timeout = 0
		llmconf.Route(&e.Gateway, "llama-70b").Timeout = 0
		if err := e.Validate(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("models in two currencies are fine with budgets in tokens only, or when one is free", func(t *testing.T) {
		t.Parallel()
		e := withGateway(t)
		llmconf.Model(&e.Gateway, "gpt-4o").Currency = "EUR"
		var tokens []*model.TokenBudget
		for _, b := range e.Gateway.Budgets {
			if b.Micros == 0 {
				tokens = append(tokens, b)
			}
		}
		e.Gateway.Budgets = tokens
		if err := e.Validate(); err != nil {
			t.Fatal(err)
		}
		e = withGateway(t)
		llmconf.Model(&e.Gateway, "gpt-4o").Currency = "EUR"
		llmconf.Model(&e.Gateway, "gpt-4o").InputPriceMicros, llmconf.Model(&e.Gateway, "gpt-4o").OutputPriceMicros = 0, 0
		if err := e.Validate(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestGatewayReferences(t *testing.T) {
	t.Parallel()
	e := withGateway(t)
	tests := []struct {
		kind, name string
		want       []string
	}{
		{estate.KindGroup, "research", []string{`entitlement "frontier"`}},
		{estate.KindGroup, "vision", nil},
		{estate.KindProject, "fraud", []string{"token budget fraud per month"}},
		{llmconf.KindModel, "gpt-4o", []string{`alias "chat" rule 1`, `alias "chat" rule 2`}},
		{llmconf.KindModel, "llama-3.1-70b", []string{`alias "chat" rule 1`, `alias "chat" rule 2`}},
		{llmconf.KindProvider, "openai", []string{`model "gpt-4o"`}},
		{llmconf.KindRoute, "llama-70b", []string{`model "llama-3.1-70b"`}},
		{llmconf.KindEntitlement, "frontier", []string{`alias "chat" rule 1`}},
		{llmconf.KindAlias, "chat", []string{"rate limit alias chat"}},
	}
	// Groups and projects are the estate's: they have functions of their
	// own.
	references := func(kind, name string) []string {
		switch kind {
		case estate.KindGroup:
			return llmconf.GroupReferences(&e.Gateway, name)
		case estate.KindProject:
			return llmconf.ProjectReferences(&e.Gateway, name)
		}
		return llmconf.References(&e.Gateway, kind, name)
	}
	for _, tc := range tests {
		if got := references(tc.kind, tc.name); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("references to %s %s = %q, want %q", tc.kind, tc.name, got, tc.want)
		}
	}
}

func TestFollowRenames(t *testing.T) {
	t.Parallel()
	cur := withGateway(t)
	llmconf.Alias(&cur.Gateway, "chat").Rules[1].Groups = []string{"vision", "research"}
	llmconf.Alias(&cur.Gateway, "chat").Rules[1].Projects = []string{"fraud"}
	cur.Gateway.RateLimits = append(cur.Gateway.RateLimits, &model.RateLimit{Scope: model.RateLimitProject, Name: "fraud", RequestsPerMinute: 5})
	next := cur.Clone()
	next.GroupByName("research").Name = "ml-research"
	next.ProjectByName("fraud").Name = "fraud-models"
	next.FollowRenames(cur)
	if err := next.Validate(); err != nil {
		t.Fatalf("Validate after renames: %v", err)
	}
	if got := llmconf.Alias(&next.Gateway, "chat").Rules[1].Groups; !reflect.DeepEqual(got, []string{"vision", "ml-research"}) {
		t.Errorf("rule groups = %v", got)
	}
	if got := llmconf.Entitlement(&next.Gateway, "frontier").Groups; !reflect.DeepEqual(got, []string{"ml-research"}) {
		t.Errorf("entitlement groups = %v", got)
	}
	if llmconf.TokenBudget(&next.Gateway, "fraud-models", model.PeriodMonth) == nil || llmconf.RateLimit(&next.Gateway, model.RateLimitProject, "fraud-models") == nil {
		t.Errorf("budgets and project rate limits do not follow the project: %+v %+v", next.Gateway.Budgets, next.Gateway.RateLimits)
	}
	if got := llmconf.Entitlement(&cur.Gateway, "frontier").Groups; !reflect.DeepEqual(got, []string{"research"}) {
		t.Errorf("FollowRenames changed the estate it compared with: %v", got)
	}
}
