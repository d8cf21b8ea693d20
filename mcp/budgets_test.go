package mcp_test

import (
	"context"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
)

type budgetsView struct {
	TokenBudgets []struct {
		Project, User, Period, Unit, RunsOutAt, ResetsAt string
		Limit, Used, Reserved, Left, BurnRate            float64
	}
}

// TestGetUsageShowsTokenBudgets reads the example estate's token budget of
// fraud-models (50M tokens a month, 5M per user) through get_usage: a call
// on the ledger moves used, a reservation the gateway's limiter holds
// shows under reserved, and a member of another group sees none of it.
func TestGetUsageShowsTokenBudgets(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, b *testBundle) {
		alice, vic := b.client(t, "alice"), b.client(t, "vic")
		u, err := b.Svc.User(b.Admin, "alice")
		platformtest.Must(t, err)
		e, err := b.Svc.Estate(b.Admin)
		platformtest.Must(t, err)
		fraud := e.ProjectByName("fraud-models")

		// The limiter holds 700 tokens of a call in flight in every window
		// it is asked about, on top of the ledger's count (as a Redis or
		// in-process limiter that was seeded would).
		var inFlight int64
		b.Svc.SetBudgetReader(func(ctx context.Context, ws []platform.LimitWindow, now time.Time) ([]platform.HeldBudget, error) {
			out := make([]platform.HeldBudget, len(ws))
			for i, w := range ws {
				tok, _, err := b.Svc.ModelSpend(ctx, w.Spend)
				if err != nil {
					return nil, err
				}
				out[i] = platform.HeldBudget{Count: tok + inFlight, Reserved: inFlight, Counted: true}
			}
			return out, nil
		})
		read := func(what string) budgetsView {
			t.Helper()
			v := ok[budgetsView](t, alice, "get_usage", map[string]any{"project": "fraud-models"})
			if len(v.TokenBudgets) != 2 {
				t.Fatalf("%s: %+v", what, v)
			}
			return v
		}
		v := read("before any call")
		if w := v.TokenBudgets[0]; w.Project != "fraud-models" || w.User != "" || w.Unit != "tokens" || w.Limit != 50_000_000 || w.Used != 0 || w.Left != 50_000_000 {
			t.Fatalf("the project's budget before any call: %+v", w)
		}
		platformtest.Must(t, b.Store.InsertModelCalls(context.Background(), []*model.ModelCall{{ID: "c1", TenantID: b.Tenant, At: b.Svc.Now(),
			UserID: u.ID, UserName: "alice", ProjectID: fraud.ID, ProjectName: fraud.Name, Endpoint: "chat/completions",
			Alias: "chat", Model: "gpt-4o", InputTokens: 1000, OutputTokens: 500, Status: 200, Outcome: model.CallOK}}))
		inFlight = 700
		v = read("after a call and with one in flight")
		for _, w := range v.TokenBudgets {
			if w.Used != 1500 || w.Reserved != 700 || w.Left != w.Limit-2200 || w.BurnRate <= 0 {
				t.Errorf("%s/%s: %+v", w.Project, w.User, w)
			}
		}
		if v.TokenBudgets[1].User != "alice" || v.TokenBudgets[1].Limit != 5_000_000 {
			t.Errorf("alice's part: %+v", v.TokenBudgets[1])
		}
		if got := ok[budgetsView](t, vic, "get_usage", map[string]any{}); len(got.TokenBudgets) != 0 {
			t.Errorf("vic sees %+v", got.TokenBudgets)
		}
	})
}
