package work

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/storetest/harness"
)

// ModelCalls checks recording, summing and listing the gateway's model
// calls.
func ModelCalls(t *testing.T, setup harness.Setup) {
	modelCallRecords(t, setup)
	modelCallSums(t, setup)
}

// modelCall is a call of alias at at, by user in project and group, with
// its tokens and cost; each gets its own id, and every other one streams.
func modelCall(b *harness.Bundle, tenantID string, at time.Time, user, project, group, alias string, in, out, cost int64) *model.ModelCall {
	n := b.Seq()
	return &model.ModelCall{ID: model.NewID(), TenantID: tenantID, At: at, UserID: "u-" + user, UserName: user,
		ProjectID: "p-" + project, ProjectName: project, GroupID: "g-" + group, GroupName: group,
		Endpoint: "chat/completions", Alias: alias, Model: alias + "-model", Target: "route-a", Stream: n%2 == 0,
		InputTokens: in, OutputTokens: out, CostMicros: cost, Currency: "USD", LatencyMicros: 1234, Status: 200,
		Outcome: model.CallOK}
}

// modelCallRecords checks that a call is recorded once per request id, and
// summed and listed per tenant.
func modelCallRecords(t *testing.T, setup harness.Setup) {
	setup.Run(t, "calls are recorded once per request id, summed and listed per tenant", func(t *testing.T, b *harness.Bundle) {
		day := b.Now.Truncate(24 * time.Hour)
		calls := []*model.ModelCall{
			modelCall(b, b.Tenant.ID, day.Add(time.Hour), "alice", "fraud", "ml", "chat", 100, 20, 3000),
			modelCall(b, b.Tenant.ID, day.Add(2*time.Hour), "alice", "fraud", "ml", "embed", 50, 0, 50),
			modelCall(b, b.Tenant.ID, day.Add(3*time.Hour), "bob", "fraud", "ml", "chat", 10, 5, 400),
			modelCall(b, b.Tenant.ID, day.Add(4*time.Hour), "vic", "detect", "vision", "chat", 7, 7, 0),
			modelCall(b, b.Tenant.ID, day.Add(30*time.Hour), "alice", "fraud", "ml", "chat", 1000, 1000, 1),
			modelCall(b, b.Other.ID, day.Add(time.Hour), "eve", "fraud", "ml", "chat", 999, 999, 999),
		}
		calls[3].Outcome, calls[3].Guardrail, calls[3].Status = model.CallBlocked, "global deny 1", 400
		harness.Must(t, b.Store.InsertModelCalls(b.Ctx, calls))
		// Recording again (a retried flush) changes nothing.
		harness.Must(t, b.Store.InsertModelCalls(b.Ctx, calls[:2]))

		q := store.ModelUsageQuery{From: day, To: day.Add(24 * time.Hour), By: []string{store.ByProject, store.ByUser}}
		rows, err := b.Store.SumModelCalls(b.Ctx, b.Tenant.ID, q)
		harness.Must(t, err)
		got := ""
		for _, r := range rows {
			got += fmt.Sprintf("%s/%s:%d,%d,%d,%d,%s ", r.Keys[0].Name, r.Keys[1].Name, r.Calls, r.InputTokens, r.OutputTokens, r.CostMicros, r.Currency)
		}
		if want := "detect/vic:1,7,7,0,USD fraud/alice:2,150,20,3050,USD fraud/bob:1,10,5,400,USD "; got != want {
			t.Fatalf("sums %q\nwant %q", got, want)
		}
		// A project's spend in a period, one user's, no grouping.
		rows, err = b.Store.SumModelCalls(b.Ctx, b.Tenant.ID, store.ModelUsageQuery{From: day, To: day.Add(48 * time.Hour), ProjectID: "p-fraud", UserID: "u-alice"})
		harness.Must(t, err)
		if len(rows) != 1 || rows[0].Calls != 3 || rows[0].InputTokens+rows[0].OutputTokens != 2170 || rows[0].CostMicros != 3051 {
			t.Fatalf("alice in fraud: %+v", rows)
		}
		rows, err = b.Store.SumModelCalls(b.Ctx, b.Tenant.ID, store.ModelUsageQuery{From: day.Add(-48 * time.Hour), To: day, ProjectID: "p-fraud"})
		harness.Must(t, err)
		if len(rows) != 0 {
			t.Fatalf("nothing in range: %+v", rows)
		}
		rows, err = b.Store.SumModelCalls(b.Ctx, b.Tenant.ID, store.ModelUsageQuery{From: day, To: day.Add(48 * time.Hour), By: []string{store.ByAlias}, GroupIDs: []string{"g-ml"}})
		harness.Must(t, err)
		if len(rows) != 2 || rows[0].Keys[0].Name != "chat" || rows[0].Calls != 3 || rows[1].Keys[0].Name != "embed" {
			t.Fatalf("by alias in ml: %+v", rows)
		}
		_, err = b.Store.SumModelCalls(b.Ctx, b.Tenant.ID, store.ModelUsageQuery{From: day, To: day, By: []string{store.ByAlias}})
		if err == nil {
			t.Fatal("an empty range was accepted")
		}
		_, err = b.Store.SumModelCalls(b.Ctx, b.Tenant.ID, store.ModelUsageQuery{From: day, To: day.Add(time.Hour), By: []string{"planet"}})
		if err == nil {
			t.Fatal("an unknown dimension was accepted")
		}

		// Newest first, paged, every field round-tripped.
		page1, err := b.Store.ListModelCalls(b.Ctx, b.Tenant.ID, store.ModelUsageQuery{From: day, To: day.Add(48 * time.Hour)}, store.Page{Limit: 3})
		harness.Must(t, err)
		if len(page1) != 3 || page1[0].ID != calls[4].ID || page1[2].ID != calls[2].ID {
			t.Fatalf("page 1: %s", harness.Show(page1))
		}
		page2, err := b.Store.ListModelCalls(b.Ctx, b.Tenant.ID, store.ModelUsageQuery{From: day, To: day.Add(48 * time.Hour)}, store.Page{After: page1[2].ID, Limit: 3})
		harness.Must(t, err)
		if len(page2) != 2 || page2[1].ID != calls[0].ID {
			t.Fatalf("page 2: %s", harness.Show(page2))
		}
		blocked := page1[1]
		want := *calls[3]
		want.At = want.At.UTC().Truncate(time.Microsecond)
		if *blocked != want {
			t.Fatalf("round trip:\n got %+v\nwant %+v", *blocked, want)
		}
	})
}

// modelCallSums checks the sums a refused call, a grouping that calls do
// not have, and a large batch could get wrong.
func modelCallSums(t *testing.T, setup harness.Setup) {
	setup.Run(t, "a refused call counts without a currency and never makes the total mixed", func(t *testing.T, b *harness.Bundle) {
		day := b.Now.Truncate(24 * time.Hour)
		refused := modelCall(b, b.Tenant.ID, day.Add(3*time.Hour), "alice", "fraud", "ml", "chat", 0, 0, 0)
		refused.Model, refused.Target, refused.Currency, refused.Status, refused.Outcome = "", "", "", 429, model.CallRateLimited
		harness.Must(t, b.Store.InsertModelCalls(b.Ctx, []*model.ModelCall{
			modelCall(b, b.Tenant.ID, day.Add(time.Hour), "alice", "fraud", "ml", "chat", 100, 20, 3000),
			refused,
			modelCall(b, b.Tenant.ID, day.Add(4*time.Hour), "bob", "fraud", "ml", "embed", 50, 0, 50),
		}))
		show := func(by ...string) string {
			rows, err := b.Store.SumModelCalls(b.Ctx, b.Tenant.ID, store.ModelUsageQuery{From: day, To: day.Add(24 * time.Hour), By: by})
			harness.Must(t, err)
			got := ""
			for _, r := range rows {
				for _, k := range r.Keys {
					got += fmt.Sprintf("%q/%q ", k.ID, k.Name)
				}
				got += fmt.Sprintf("%d,%d,%s; ", r.Calls, r.CostMicros, r.Currency)
			}
			return got
		}
		harness.CheckEqual(t, "total", show(), "3,3050,USD; ")
		harness.CheckEqual(t, "by alias", show(store.ByAlias), `"chat"/"chat" 2,3000,USD; "embed"/"embed" 1,50,USD; `)
		// The store leaves the refused call's model empty; the platform
		// names it.
		harness.CheckEqual(t, "by model", show(store.ByModel), `""/"" 1,0,; "chat-model"/"chat-model" 1,3000,USD; "embed-model"/"embed-model" 1,50,USD; `)
	})

	setup.Run(t, "grouped by a dimension of GPU work only, calls fall under an empty key, never dropped", func(t *testing.T, b *harness.Bundle) {
		day := b.Now.Truncate(24 * time.Hour)
		harness.Must(t, b.Store.InsertModelCalls(b.Ctx, []*model.ModelCall{
			modelCall(b, b.Tenant.ID, day.Add(time.Hour), "alice", "fraud", "ml", "chat", 100, 20, 3000),
			modelCall(b, b.Tenant.ID, day.Add(2*time.Hour), "vic", "detect", "vision", "chat", 7, 7, 40),
			modelCall(b, b.Tenant.ID, day.Add(3*time.Hour), "bob", "fraud", "ml", "embed", 50, 0, 50),
		}))
		for _, by := range [][]string{
			{store.ByGroup, store.ByPool}, {store.ByGPUClass, store.ByGroup}, {store.ByGroup, store.ByComputeResource, store.ByProfile},
		} {
			rows, err := b.Store.SumModelCalls(b.Ctx, b.Tenant.ID, store.ModelUsageQuery{From: day, To: day.Add(24 * time.Hour), By: by})
			harness.Must(t, err)
			got := ""
			for _, r := range rows {
				for _, k := range r.Keys {
					got += fmt.Sprintf("%s=%q/%q ", k.Dimension, k.ID, k.Name)
				}
				got += fmt.Sprintf("%d,%d,%d; ", r.Calls, r.InputTokens, r.OutputTokens)
			}
			var want string
			for _, g := range []struct{ group, sums string }{{"ml", "2,150,20"}, {"vision", "1,7,7"}} {
				for _, d := range by {
					if d == store.ByGroup {
						want += fmt.Sprintf("group=%q/%q ", "g-"+g.group, g.group)
					} else {
						want += d + `=""/"" `
					}
				}
				want += g.sums + "; "
			}
			harness.CheckEqual(t, fmt.Sprint("by ", by), got, want)
		}
	})

	setup.Run(t, "a large batch is recorded whole, and again changes nothing", func(t *testing.T, b *harness.Bundle) {
		day := b.Now.Truncate(24 * time.Hour)
		// 301 rows: every statement size the store cuts batches into, and
		// a remainder.
		calls := make([]*model.ModelCall, 301)
		for i := range calls {
			calls[i] = modelCall(b, b.Tenant.ID, day.Add(time.Duration(i)*time.Second), "alice", "fraud", "ml", "chat", 1, 2, 3)
		}
		harness.Must(t, b.Store.InsertModelCalls(b.Ctx, calls[:150]))
		// A retried flush that overlaps the first, as the gateway's meter
		// sends after a failure.
		harness.Must(t, b.Store.InsertModelCalls(b.Ctx, calls))
		harness.Must(t, b.Store.InsertModelCalls(b.Ctx, calls[7:9]))
		rows, err := b.Store.SumModelCalls(b.Ctx, b.Tenant.ID, store.ModelUsageQuery{From: day, To: day.Add(24 * time.Hour)})
		harness.Must(t, err)
		if len(rows) != 1 || rows[0].Calls != 301 || rows[0].InputTokens != 301 || rows[0].OutputTokens != 602 || rows[0].CostMicros != 903 {
			t.Fatalf("sums %+v, want 301 calls", rows)
		}
	})
}

// Gateway checks a tenant's gateway configuration.
func Gateway(t *testing.T, setup harness.Setup) {
	setup.Run(t, "a tenant's gateway configuration is stored whole and read back per tenant", func(t *testing.T, b *harness.Bundle) {
		g, err := b.Store.GetGateway(b.Ctx, b.Tenant.ID)
		harness.Must(t, err)
		if g == nil || len(g.Aliases) != 0 {
			t.Fatalf("empty configuration %+v", g)
		}
		g = &model.Gateway{
			Providers: []*model.Provider{{Name: "openai", BaseURL: "https://api.openai.com/v1", KeySecret: "OPENAI_API_KEY", Timeout: 30 * time.Second}},
			Routes:    []*model.Route{{Name: "llama", Endpoints: []string{"http://10.0.0.1:8000/v1", "http://10.0.0.2:8000/v1"}}},
			Models:    []*model.LLMModel{{Name: "llama-70b", Route: "llama", Upstream: "meta/llama", InputPriceMicros: 200000, OutputPriceMicros: 200000, Currency: "USD"}},
			Aliases: []*model.Alias{{Name: "chat", Rules: []model.AliasRule{{Groups: []string{"ml"}, Targets: []model.Target{{Model: "llama-70b", Weight: 1}}}},
				Guardrails: model.Guardrails{Deny: []string{"x"}}}},
			Budgets:      []*model.TokenBudget{{Project: "fraud", Period: model.PeriodMonth, Tokens: 1000, PerUserTokens: 100}},
			RateLimits:   []*model.RateLimit{{Scope: model.RateLimitUser, RequestsPerMinute: 60}},
			Entitlements: []*model.Entitlement{{Name: "frontier", Groups: []string{"ml"}}},
			Guardrails:   model.Guardrails{Deny: []string{"password"}, GuardAlias: "guard"},
		}
		harness.Must(t, b.Store.PutGateway(b.Ctx, b.Tenant.ID, g, b.Now))
		got, err := b.Store.GetGateway(b.Ctx, b.Tenant.ID)
		harness.Must(t, err)
		if !reflect.DeepEqual(got, g) {
			t.Fatalf("read back %s\nwant %s", harness.Show(got), harness.Show(g))
		}
		other, err := b.Store.GetGateway(b.Ctx, b.Other.ID)
		harness.Must(t, err)
		if len(other.Providers) != 0 {
			t.Fatalf("another tenant reads %s", harness.Show(other))
		}
		g.Aliases = nil
		harness.Must(t, b.Store.PutGateway(b.Ctx, b.Tenant.ID, g, b.Now))
		got, err = b.Store.GetGateway(b.Ctx, b.Tenant.ID)
		harness.Must(t, err)
		if len(got.Aliases) != 0 || len(got.Providers) != 1 {
			t.Fatalf("replaced %s", harness.Show(got))
		}
	})
}
