package gateway_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/klique-ai/klique/gateway"
	"github.com/klique-ai/klique/gateway/limits"
	"github.com/klique-ai/klique/internal/eventually"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/redistest"
	"github.com/klique-ai/klique/internal/store"
)

// reconcileBudget is project detect's monthly token budget in the tests
// of Redis's reconciliation with the ledger: a call of vic's reserves
// about 30 tokens and uses about 11.
const reconcileBudget = 600

// partitioned is a gateway as the server wires it (a Failover from Redis
// to an in-process limiter that reads the ledger again every 5 s), whose
// Redis connection goes through a switch that cuts it while Redis keeps
// its keys.
type partitioned struct {
	e      *env
	sw     *redisSwitch
	direct *redis.Client
	prefix string
	reg    *prometheus.Registry
	clk    *clock
}

func newPartitioned(t *testing.T) *partitioned {
	direct, prefix := redistest.Require(t)
	p := &partitioned{sw: startSwitch(t, direct.Options().Addr), direct: direct, prefix: prefix, reg: prometheus.NewRegistry(), clk: newClock()}
	m, err := gateway.NewMetrics(p.reg)
	must(t, err)
	budget := func(g *model.Gateway, up string) {
		standard(g, up)
		g.Budgets = []*model.TokenBudget{{Project: "detect", Period: model.PeriodMonth, Tokens: reconcileBudget}}
	}
	p.e = newEnv(t, budget, withClock(p.clk), withLimiter(m, func(testing.TB) limits.Limiter { return p.failover(t, m.SetDegraded) }))
	return p
}

// failover is a limiter as the server builds one at its start, over the
// switch.
func (p *partitioned) failover(t *testing.T, onChange func(bool)) limits.Limiter {
	opts := *p.direct.Options()
	opts.Addr, opts.MaxRetries, opts.DialTimeout = p.sw.addr(), -1, 200*time.Millisecond
	opts.ReadTimeout, opts.WriteTimeout = 500*time.Millisecond, 500*time.Millisecond
	client := redis.NewClient(&opts)
	t.Cleanup(func() { _ = client.Close() })
	return &limits.Failover{Primary: limits.NewRedis(client, p.prefix), Fallback: limits.NewReseedingMemory(5 * time.Second),
		Retry: 50 * time.Millisecond, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), OnChange: onChange}
}

// restart starts another gateway over the same store and Redis (through
// the switch) with a limiter of its own, as a restarted server has, and
// returns its URL.
func (p *partitioned) restart(t *testing.T) string {
	e := p.e
	gw := gateway.New(gateway.Options{Service: e.svc, Auth: e.auth, Limiter: p.failover(t, nil), Now: p.clk.Now})
	srv := httptest.NewServer(gw)
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = gw.Close(ctx)
	})
	return srv.URL
}

// spendUntilRefused calls as vic at url until the budget refuses a call,
// and returns how many calls were let through.
func (p *partitioned) spendUntilRefused(t *testing.T, url string) int {
	t.Helper()
	for n := 0; n < 1000; n++ {
		r := postTo(t, p.e, url, "vic", "detect", chat("chat", `,"max_tokens":10`))
		switch {
		case r.status == http.StatusOK:
		case r.status == http.StatusTooManyRequests && r.json("error.code").Str == "insufficient_quota":
			return n
		default:
			t.Fatalf("call %d: %d %s", n, r.status, r.body)
		}
	}
	t.Fatal("the budget never refused a call")
	return 0
}

// spend calls as vic at url n times, each let through.
func (p *partitioned) spend(t *testing.T, url string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if r := postTo(t, p.e, url, "vic", "detect", chat("chat", `,"max_tokens":10`)); r.status != http.StatusOK {
			t.Fatalf("call %d: %d %s", i, r.status, r.body)
		}
	}
}

// spent is what the ledger says project detect spent, in tokens.
func (p *partitioned) spent(t *testing.T) int64 {
	t.Helper()
	tenant := mustPrincipal(p.e.admin).TenantID
	q := store.ModelUsageQuery{From: time.Now().Add(-48 * time.Hour), To: time.Now().Add(48 * time.Hour)}
	var total int64
	page := store.Page{Limit: 1000}
	for {
		batch, err := p.e.store.ListModelCalls(context.Background(), tenant, q, page)
		must(t, err)
		for _, c := range batch {
			if c.ProjectName == "detect" {
				total += c.InputTokens + c.OutputTokens
			}
		}
		if len(batch) < page.Limit {
			return total
		}
		page.After = batch[len(batch)-1].ID
	}
}

// postTo is env.post to another gateway's URL.
func postTo(t *testing.T, e *env, url, user, project, body string) response {
	t.Helper()
	saved := e.srv.URL
	e.srv.URL = url
	defer func() { e.srv.URL = saved }()
	return e.post(user, project, "chat/completions", body)
}

// TestABudgetHoldsAcrossARedisPartition cuts the gateway off Redis
// (which keeps its keys), spends the budget while the gateway counts on
// its own, and brings Redis back: Redis, which did not see that spend,
// is reconciled with the ledger before it is trusted, so the budget is
// not spent a second time. With one replica the documented bound (what
// the replicas spend between two ledger readings while degraded) is
// nothing: the ledger's total stays within the budget.
func TestABudgetHoldsAcrossARedisPartition(t *testing.T) {
	p := newPartitioned(t)
	url := p.e.srv.URL
	p.spend(t, url, 15) // a third or so, counted in Redis
	p.sw.set(false)
	n := p.spendUntilRefused(t, url)
	if v := gauge(t, p.reg, "klique_gateway_limits_degraded"); v != 1 {
		t.Fatalf("degraded %v with Redis cut off", v)
	}
	p.sw.set(true)
	extra := 0
	eventually.Within(t, 10*time.Second, "the limiter to leave degraded mode once Redis came back", func() bool {
		if gauge(t, p.reg, "klique_gateway_limits_degraded") == 0 {
			return true
		}
		if r := postTo(t, p.e, url, "vic", "detect", chat("chat", `,"max_tokens":10`)); r.status == http.StatusOK {
			extra++
		}
		return false
	})
	extra += p.spendUntilRefused(t, url)
	if spent := p.spent(t); spent > reconcileBudget {
		t.Fatalf("the ledger says %d tokens were spent of a budget of %d: %d calls while cut off, then %d more once Redis was back",
			spent, reconcileBudget, n, extra)
	}
}

// TestABudgetHoldsAfterARestartWithAnEmptyRedis: a gateway spends while
// cut off from Redis, stops, and a new one starts on a Redis that lost its
// keys: its budget counters are seeded from the ledger.
func TestABudgetHoldsAfterARestartWithAnEmptyRedis(t *testing.T) {
	p := newPartitioned(t)
	p.spend(t, p.e.srv.URL, 15)
	p.sw.set(false)
	p.spendUntilRefused(t, p.e.srv.URL)
	keys, err := p.direct.Keys(t.Context(), p.prefix+"*").Result()
	must(t, err)
	if len(keys) > 0 {
		must(t, p.direct.Del(t.Context(), keys...).Err())
	}
	p.sw.set(true)
	extra := p.spendUntilRefused(t, p.restart(t))
	if spent := p.spent(t); spent > reconcileBudget {
		t.Fatalf("the ledger says %d tokens were spent of a budget of %d: %d calls after the restart", spent, reconcileBudget, extra)
	}
}

// TestABudgetHoldsAfterARestartWithStaleKeys: Redis comes back with
// older counts than the ledger's (restored from a snapshot taken after a
// third of the budget was spent); a gateway that starts on it reconciles
// it with the ledger before trusting it.
func TestABudgetHoldsAfterARestartWithStaleKeys(t *testing.T) {
	p := newPartitioned(t)
	p.spend(t, p.e.srv.URL, 15)
	ctx := t.Context()
	keys, err := p.direct.Keys(ctx, p.prefix+"*").Result()
	must(t, err)
	snapshot := map[string]string{}
	for _, k := range keys {
		v, err := p.direct.Dump(ctx, k).Result()
		if err == redis.Nil {
			continue // gone meanwhile (the lapse set, emptied)
		}
		must(t, err)
		snapshot[k] = v
	}
	p.spendUntilRefused(t, p.e.srv.URL)
	keys, err = p.direct.Keys(ctx, p.prefix+"*").Result()
	must(t, err)
	must(t, p.direct.Del(ctx, keys...).Err())
	for k, v := range snapshot {
		must(t, p.direct.RestoreReplace(ctx, k, 0, v).Err())
	}
	extra := p.spendUntilRefused(t, p.restart(t))
	if spent := p.spent(t); spent > reconcileBudget {
		t.Fatalf("the ledger says %d tokens were spent of a budget of %d: %d calls after the restart on stale keys",
			spent, reconcileBudget, extra)
	}
}

// TestARestartLowersABudgetCounterAboveTheLedger (issue 39 defect 8): a
// Redis counter that counts more than the ledger says was spent (spend
// counted twice during a partition) is set back to the ledger when a
// gateway starts and reconciles: the project can spend up to its budget.
// Before, reconciliation only ever raised a counter, and the budget was
// refused early for the rest of its period, restarts or not.
func TestARestartLowersABudgetCounterAboveTheLedger(t *testing.T) {
	p := newPartitioned(t)
	p.spend(t, p.e.srv.URL, 5)
	ctx := t.Context()
	keys, err := p.direct.Keys(ctx, p.prefix+"*/budget/*/tok").Result()
	must(t, err)
	if len(keys) != 1 {
		t.Fatalf("budget counters %v, want one", keys)
	}
	// Counted twice: 90% of the budget.
	must(t, p.direct.Set(ctx, keys[0], reconcileBudget*9/10, 0).Err())
	n := p.spendUntilRefused(t, p.restart(t))
	// With nothing in flight (the last settlements land a moment after
	// their answers), the counter is the ledger's.
	var counter int64
	eventually.Poll(5*time.Second, func() bool {
		held, err := p.direct.ZCard(ctx, p.prefix+"lapse").Result()
		must(t, err)
		counter, err = p.direct.Get(ctx, keys[0]).Int64()
		must(t, err)
		return held == 0
	})
	spent := p.spent(t)
	// Refused near the budget: sooner than its last call's estimate
	// when the settlements of the calls before it had not landed yet,
	// but far past the 10% the counter left.
	if counter != spent || spent < reconcileBudget/2 {
		t.Fatalf("after a restart the counter reads %d, the ledger %d of a budget of %d (%d calls after the restart): want the counter set back to the ledger, and the budget spent",
			counter, spent, reconcileBudget, n)
	}
}
