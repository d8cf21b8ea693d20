package estatecmd

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/engine/loop"
	"github.com/klique-ai/klique/internal/client"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
	"github.com/klique-ai/klique/internal/server"
)

// ledgerEstate is one group, V, with a weekly time budget, one 1-GPU
// profile of weight 1 on one pool (no price set: cost 0 USD), and a project.
const ledgerEstate = `apiVersion: klique/v1
kind: Estate
gpuClasses:
  - {name: h100, memoryGb: 80}
pools:
  - {name: p1, kind: kubernetes, capacity: 8, gpuClass: h100}
profiles:
  - {name: one-gpu, size: 1, timeWeight: 1, pools: [p1]}
groups:
  - {name: V}
policies:
  - group: V
    limit: 8
    timeBudget: {hours: 4, period: week}
    computeResources: [{name: 1 GPU, profile: one-gpu}]
projects:
  - {name: research}
`

// ledgerWorld is a control plane on a fake clock, served over HTTP for the
// CLI, whose ledger holds what the usage readers are checked against: a
// task of group V held for two minutes, the engine disabled for the middle
// one of them, and three model calls of V's project, two of them answered
// (USD) and one refused by a rate limit (no model, no cost, no currency).
type ledgerWorld struct {
	b   *platformtest.Bundle
	url string
	// Monday is the start of the budget's week; now is the clock's time.
	monday, now time.Time
}

// forEachLedgerStore runs fn over a ledgerWorld on SQLite and then on
// PostgreSQL. The runs are not parallel: the CLI reads its credential from
// the environment.
func forEachLedgerStore(t *testing.T, fn func(t *testing.T, w *ledgerWorld)) {
	t.Setenv("KLIQUE_CONFIG", filepath.Join(t.TempDir(), "none.json"))
	t.Setenv("KLIQUE_SERVER", "")
	t.Setenv("KLIQUE_TOKEN", "")
	for _, s := range []struct {
		name string
		open func(testing.TB, ...platformtest.Option) *platformtest.Bundle
	}{{"sqlite", platformtest.SQLite}, {"postgres", platformtest.Postgres}} {
		t.Run(s.name, func(t *testing.T) {
			start := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC) // a Wednesday
			b := s.open(t, platformtest.WithClock(start))
			w := &ledgerWorld{b: b, monday: time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)}
			b.Apply(t, []byte(ledgerEstate))
			vic := b.User(t, "vic", model.RoleMember, "V")
			if _, err := b.Svc.EnqueueTask(vic, platform.EnqueueInput{Name: "train", Project: "research", ComputeResource: "1 GPU",
				Spec: model.TaskSpec{Command: []string{"python", "train.py"}}}); err != nil {
				t.Fatal(err)
			}
			eng := &loop.Loop{State: platform.EngineState{Store: b.Store}, Planner: b.Svc, Now: b.Clock.Now, Holder: "test"}
			if reps, err := eng.PassAll(context.Background()); err != nil || len(reps) != 1 || reps[0].Placed != 1 {
				t.Fatalf("engine pass: %+v, %v", reps, err)
			}
			b.Clock.Add(30 * time.Second)
			platformtest.Must(t, setEngine(b, false))
			b.Clock.Add(time.Minute)
			platformtest.Must(t, setEngine(b, true))
			b.Clock.Add(30 * time.Second)
			w.now = b.Clock.Now()

			e, err := b.Svc.Estate(b.Admin)
			platformtest.Must(t, err)
			g, pr := e.GroupByName("V"), e.ProjectByName("research")
			call := func(id, mdl string, in, out, cost int64) *model.ModelCall {
				c := &model.ModelCall{ID: id, TenantID: b.Tenant, At: start.Add(time.Minute), UserID: userOf(vic), UserName: "vic",
					ProjectID: pr.ID, ProjectName: pr.Name, GroupID: g.ID, GroupName: g.Name, Endpoint: "chat/completions",
					Alias: "chat", Model: mdl, InputTokens: in, OutputTokens: out, CostMicros: cost, Currency: "USD", Status: 200, Outcome: model.CallOK}
				if mdl == "" {
					c.Currency, c.Status, c.Outcome = "", 429, model.CallRateLimited
				}
				return c
			}
			platformtest.Must(t, b.Store.InsertModelCalls(context.Background(), []*model.ModelCall{
				call("call-1", "gpt-4o", 1200, 300, 6000), call("call-2", "gpt-4o-mini", 500, 100, 100), call("call-refused", "", 0, 0, 0),
			}))

			srv := httptest.NewServer(server.NewHandler(server.Deps{Platform: server.ServicePlatforms(b.Svc), Auth: b.Auth, Logger: b.Logger, MaxBodyBytes: 1 << 20}))
			t.Cleanup(srv.Close)
			w.url = srv.URL
			t.Setenv("KLIQUE_API_KEY", b.AdminSecret)
			fn(t, w)
		})
	}
}

func setEngine(b *platformtest.Bundle, on bool) error {
	_, err := b.Svc.SetEngineEnabled(b.Admin, on)
	return err
}

func userOf(ctx context.Context) string {
	p, _ := identity.PrincipalFrom(ctx)
	return p.UserID
}

// klique runs the CLI against the world's server and returns its output.
func (w *ledgerWorld) klique(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	args = append(args, "--server", w.url)
	if code := run(context.Background(), args, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("klique %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
	}
	return out.String()
}

// usage runs `klique usage` over the budget's week up to now.
func (w *ledgerWorld) usage(t *testing.T, args ...string) string {
	t.Helper()
	return w.klique(t, append([]string{"usage", "--from", w.monday.Format(time.RFC3339), "--to", w.now.Format(time.RFC3339)}, args...)...)
}

// rows reads `klique usage`'s table: one line of fields per row, the
// header first.
func rows(out string) []string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	return lines
}

// A task held two minutes, one of them with the engine disabled, has used
// one minute of budget and two of GPU time, and every reader says so: the
// policy view and usage over GraphQL, `klique policy` and `klique usage`,
// and the CSV export.
func TestUsageReadersAgreeOnBudgetHours(t *testing.T) {
	forEachLedgerStore(t, func(t *testing.T, w *ledgerWorld) {
		const budget, gpu = "0.016666", "0.033333" // 1 and 2 minutes, in hours to the microhour
		six := func(v any) string { f, _ := v.(float64); return fmt.Sprintf("%.6f", f) }
		from, to := w.monday.Format(time.RFC3339), w.now.Format(time.RFC3339)

		var gql struct {
			PolicyView []struct{ Budget struct{ UsedHours float64 } }
			Usage      struct {
				Rows []struct{ GpuHours, BudgetHours float64 }
			}
		}
		if err := client.New(w.url, w.b.AdminSecret).Do(context.Background(), `query($from: Time!, $to: Time!) {
			policyView(group: "V") { budget { usedHours } } usage(input: {from: $from, to: $to}) { rows { gpuHours budgetHours } } }`,
			map[string]any{"from": from, "to": to}, &gql); err != nil {
			t.Fatal(err)
		}
		if len(gql.PolicyView) != 1 || len(gql.Usage.Rows) != 1 {
			t.Fatalf("GraphQL: %+v", gql)
		}
		got := map[string]string{
			"GraphQL policyView.usedHours": six(gql.PolicyView[0].Budget.UsedHours),
			"GraphQL usage.budgetHours":    six(gql.Usage.Rows[0].BudgetHours),
			"GraphQL usage.gpuHours":       six(gql.Usage.Rows[0].GpuHours),
		}

		var policy []struct{ Budget struct{ UsedHours float64 } }
		if err := json.Unmarshal([]byte(w.klique(t, "policy", "V", "-o", "json")), &policy); err != nil || len(policy) != 1 {
			t.Fatalf("klique policy -o json: %v %+v", err, policy)
		}
		got["klique policy usedHours"] = six(policy[0].Budget.UsedHours)
		var usage []map[string]any
		if err := json.Unmarshal([]byte(w.usage(t, "-o", "json")), &usage); err != nil || len(usage) != 1 {
			t.Fatalf("klique usage -o json: %v %+v", err, usage)
		}
		got["klique usage budgetHours"], got["klique usage gpuHours"] = six(usage[0]["budgetHours"]), six(usage[0]["gpuHours"])
		if table := rows(w.usage(t)); len(table) != 2 || !strings.HasPrefix(table[1], "0.03 0.02 ") {
			t.Errorf("klique usage: %q, want GPU-hours 0.03 and budget hours 0.02", table)
		}

		req, err := http.NewRequest(http.MethodGet, w.url+"/api/v1/usage.csv?from="+url.QueryEscape(from)+"&to="+url.QueryEscape(to), nil)
		platformtest.Must(t, err)
		req.Header.Set("Authorization", "Bearer "+w.b.AdminSecret)
		resp, err := http.DefaultClient.Do(req)
		platformtest.Must(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		recs, err := csv.NewReader(bytes.NewReader(body)).ReadAll()
		if err != nil || resp.StatusCode != http.StatusOK || len(recs) != 2 || recs[0][2] != "gpu_hours" || recs[0][3] != "budget_hours" {
			t.Fatalf("CSV %d: %v\n%s", resp.StatusCode, err, body)
		}
		got["CSV budget_hours"], got["CSV gpu_hours"] = recs[1][3], recs[1][2]

		for reader, v := range got {
			want := budget
			if strings.Contains(strings.ToLower(reader), "gpu") {
				want = gpu
			}
			if v != want {
				t.Errorf("%s = %s, want %s", reader, v, want)
			}
		}
	})
}

// Refused calls count as calls but cost nothing and have no currency: the
// total's token cost stays in USD, and by model they are "(no model)",
// never a blank row.
func TestUsageCommandKeepsTheCurrencyOfTokensWithRefusedCalls(t *testing.T) {
	forEachLedgerStore(t, func(t *testing.T, w *ledgerWorld) {
		if got := rows(w.usage(t)); len(got) != 2 || !strings.HasSuffix(got[1], " 3 1700 400 0.006100 USD") {
			t.Errorf("klique usage:\n%s", strings.Join(got, "\n"))
		}
		got := rows(w.usage(t, "--by", "model"))
		want := []string{
			"MODEL GPU-HOURS BUDGET HOURS COST CALLS INPUT TOKENS OUTPUT TOKENS TOKEN COST",
			"gpt-4o 0.00 0.00 - 1 1200 300 0.006000 USD",
			"gpt-4o-mini 0.00 0.00 - 1 500 100 0.000100 USD",
			"(no model) 0.00 0.00 - 1 0 0 -",
			"— 0.03 0.02 0.00 USD 0 0 0 -",
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("klique usage --by model:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

// Grouped by group and pool, model calls have no pool: they appear under
// pool "—" beside the group's GPU work, as many as grouped by group alone.
func TestUsageCommandByGroupAndPoolKeepsModelCalls(t *testing.T) {
	forEachLedgerStore(t, func(t *testing.T, w *ledgerWorld) {
		byGroup := rows(w.usage(t, "--by", "group"))
		if len(byGroup) != 2 || byGroup[1] != "V 0.03 0.02 0.00 USD 3 1700 400 0.006100 USD" {
			t.Errorf("klique usage --by group:\n%s", strings.Join(byGroup, "\n"))
		}
		got := rows(w.usage(t, "--by", "group,pool"))
		want := []string{
			"GROUP POOL GPU-HOURS BUDGET HOURS COST CALLS INPUT TOKENS OUTPUT TOKENS TOKEN COST",
			"V p1 0.03 0.02 0.00 USD 0 0 0 -",
			"V — 0.00 0.00 - 3 1700 400 0.006100 USD",
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("klique usage --by group,pool:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}
