package gateway_test

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/klique-ai/klique/gateway"
	"github.com/klique-ai/klique/gateway/limits"
	"github.com/klique-ai/klique/internal/eventually"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/redistest"
)

// Budgets in money, and what the gateway does when the shared limiter
// (Redis) cannot be reached.

// TestAMoneyBudgetHoldsInMicros pins budgets in money
// (model.TokenBudget.Micros): each call reserves what it may cost on the
// dearest of its models, in millionths, and settles to what it did cost;
// a call that would go past the budget is refused with 429
// insufficient_quota and X-Should-Retry: false, saying the budget and the
// call's estimate. The budget starts from what the ledger already holds
// of the period, in money; 20 concurrent callers never make the ledger's
// summed CostMicros pass the budget, and they stop only when no call's
// estimate fits what is left. In memory and in Redis.
func TestAMoneyBudgetHoldsInMicros(t *testing.T) {
	backends(t, func(t *testing.T, opts ...envOption) {
		const budget, estimate, earlier = 20_000, 1090, 12_000
		var settled settleCounter
		opts = append(opts[:len(opts):len(opts)], countSettlements(&settled))
		e := newEnv(t, func(g *model.Gateway, up string) {
			standard(g, up)
			for _, m := range g.Models {
				if m.Name == "llama" {
					// 10 and 30 per million: 10 and 30 micros a token.
					m.InputPriceMicros, m.OutputPriceMicros = 10_000_000, 30_000_000
				}
			}
			g.Budgets = []*model.TokenBudget{{Project: "detect", Period: model.PeriodMonth, Micros: budget}}
		}, opts...)
		// What the ledger holds of the month already counts: 300 and 300
		// tokens on llama, 12000 micros of the 20000.
		ctx := e.admin
		tenant := mustPrincipal(ctx).TenantID
		detect, err := e.store.GetProjectByName(ctx, tenant, "detect")
		must(t, err)
		vic := e.signIn(e.keys["vic"])
		must(t, e.store.InsertModelCalls(ctx, []*model.ModelCall{{ID: model.NewID(), TenantID: tenant, At: time.Now(),
			UserID: mustPrincipal(vic).UserID, UserName: "vic", ProjectID: detect.ID, ProjectName: "detect", GroupID: detect.GroupID,
			GroupName: "vision", Endpoint: "chat/completions", Alias: "chat", Model: "llama", Target: "local",
			InputTokens: 300, OutputTokens: 300, CostMicros: earlier, Currency: "USD", Status: 200, Outcome: model.CallOK}}))
		// vic's "chat" is llama, falling back to the cheaper backup: a
		// call reserves 19 prompt tokens at 10 and 30 output tokens at
		// 30, on llama: 1090 micros.
		body := chat("chat", `,"max_tokens":30`)
		var answered, refusedN atomic.Int64
		var mu sync.Mutex
		var refusals []response
		var wg sync.WaitGroup
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for answered.Load() < 300 {
					r, err := e.postErr("vic", "detect", "chat/completions", body)
					if err != nil {
						t.Error(err)
						return
					}
					if r.status == 200 {
						answered.Add(1)
						continue
					}
					refusedN.Add(1)
					mu.Lock()
					refusals = append(refusals, r)
					mu.Unlock()
					return
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		if n := answered.Load(); n < (budget-earlier)/estimate || n >= 300 {
			t.Fatalf("%d calls answered; want at least %d (what is left of the budget holds that many estimates) and the budget to end them",
				n, (budget-earlier)/estimate)
		}
		// Then calls go on one at a time, each once every answered call
		// is settled, until none fits: with no reservation held for more
		// than a call used, a refusal is final.
		for {
			settled.wait(t, answered.Load())
			r, err := e.postErr("vic", "detect", "chat/completions", body)
			must(t, err)
			if r.status == 200 {
				if answered.Add(1) >= 300 {
					t.Fatalf("%d calls answered: the budget never ended them", answered.Load())
				}
				continue
			}
			refusedN.Add(1)
			refusals = append(refusals, r)
			break
		}
		for _, r := range refusals {
			msg := r.json("error.message").Str
			if r.status != 429 || r.json("error.code").Str != "insufficient_quota" || r.json("error.type").Str != "insufficient_quota" ||
				r.header.Get("X-Should-Retry") != "false" || !strings.Contains(msg, "the monthly budget of project detect (0.02)") ||
				!strings.Contains(msg, fmt.Sprintf("may use up to %d;", estimate)) {
				t.Fatalf("a refusal: %d %v %s", r.status, r.header, r.body)
			}
		}
		calls := e.ledger(int(answered.Load() + refusedN.Load() + 1))
		var spent, ok, over int64
		for _, c := range calls {
			switch c.Outcome {
			case model.CallOK:
				ok++
				spent += c.CostMicros
				if c.Model != "llama" || c.CostMicros != 10*c.InputTokens+30*c.OutputTokens || c.CostMicros <= 0 {
					t.Fatalf("an answered call on the ledger: %s; want llama's price", dump(c))
				}
			case model.CallOverBudget:
				over++
				if c.Status != 429 || c.CostMicros != 0 || c.Model != "" {
					t.Fatalf("a refused call on the ledger: %s", dump(c))
				}
			default:
				t.Fatalf("a call on the ledger: %s", dump(c))
			}
		}
		if ok != answered.Load()+1 || over != refusedN.Load() {
			t.Fatalf("ledger has %d answered and %d refused, want %d (and the earlier one) and %d", ok, over, answered.Load(), refusedN.Load())
		}
		t.Logf("%d calls answered, %d refused, %d micros spent of %d", ok, over, spent, budget)
		if spent > budget || budget-spent >= estimate {
			t.Fatalf("%d calls spent %d micros of a budget of %d; want at most the budget, and less than one estimate (%d) left",
				ok, spent, budget, estimate)
		}
		// The budget is detect's alone.
		if r := e.post("alice", "fraud", "chat/completions", body); r.status != 200 {
			t.Fatalf("another project's call: %d %s", r.status, r.body)
		}
	})
}

// withLimiter gives the gateway the limiter newLimiter makes, and
// metrics m.
func withLimiter(m *gateway.Metrics, newLimiter func(t testing.TB) limits.Limiter) envOption {
	return func(c *envConfig) {
		c.limiter = newLimiter
		c.metrics = m
	}
}

// gauge reads an unlabelled gauge of reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	must(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

// TestAGatewayFallsBackWhenRedisIsUnreachable pins the gateway's side of
// limits.Failover, as the server wires it (internal/server/gateway.go): a
// gateway whose Redis cannot be reached keeps answering calls, keeps its
// rate limits and budgets in the process (a limit still refuses, with its
// own 429, not a 503, until its minute ends), and reports
// klique_gateway_limits_degraded 1; once Redis is back it shares its
// limits there again and the gauge returns to 0. The gateway's clock
// stands still, so that the minute the calls are counted in does not end
// under the test.
func TestAGatewayFallsBackWhenRedisIsUnreachable(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	limited := func(g *model.Gateway, up string) {
		standard(g, up)
		g.RateLimits = []*model.RateLimit{{Scope: model.RateLimitUser, RequestsPerMinute: 3}}
		g.Budgets = []*model.TokenBudget{{Project: "detect", Period: model.PeriodMonth, Tokens: 1_000_000}}
	}
	const degraded = "klique_gateway_limits_degraded"

	t.Run("unreachable", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		m, err := gateway.NewMetrics(reg)
		must(t, err)
		clk := newClock()
		e := newEnv(t, limited, withClock(clk), withLimiter(m, func(testing.TB) limits.Limiter {
			addr := strings.TrimSuffix(strings.TrimPrefix(closedURL(t), "http://"), "/v1")
			client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
			t.Cleanup(func() { _ = client.Close() })
			return &limits.Failover{Primary: limits.NewRedis(client, "x:"), Fallback: limits.NewMemory(), Retry: time.Hour,
				Log: quiet, OnChange: m.SetDegraded}
		}))
		if v := gauge(t, reg, degraded); v != 0 {
			t.Fatalf("degraded %v before any call", v)
		}
		for i := 0; i < 3; i++ {
			if r := e.post("vic", "detect", "chat/completions", chat("chat", `,"max_tokens":10`)); r.status != 200 || r.header.Get("X-Ratelimit-Remaining-Requests") != fmt.Sprint(2-i) {
				t.Fatalf("call %d with Redis unreachable: %d %v %s", i, r.status, r.header, r.body)
			}
		}
		if v := gauge(t, reg, degraded); v != 1 {
			t.Fatalf("degraded %v with Redis unreachable, want 1", v)
		}
		r := e.post("vic", "detect", "chat/completions", chat("chat", `,"max_tokens":10`))
		if r.status != 429 || r.json("error.code").Str != "rate_limit_exceeded" || !strings.Contains(r.json("error.message").Str, "3 requests per minute for user vic") {
			t.Fatalf("the fourth call in a minute, limits in the process: %d %s", r.status, r.body)
		}
		if r := e.post("alice", "fraud", "chat/completions", chat("chat", "")); r.status != 200 {
			t.Fatalf("another user: %d %s", r.status, r.body)
		}
		outcomes := map[string]int{}
		for _, c := range e.ledger(5) {
			outcomes[c.Outcome]++
		}
		if outcomes[model.CallOK] != 4 || outcomes[model.CallRateLimited] != 1 {
			t.Fatalf("ledger outcomes %v", outcomes)
		}
		// The next minute has room again.
		clk.Add(time.Minute)
		if r := e.post("vic", "detect", "chat/completions", chat("chat", `,"max_tokens":10`)); r.status != 200 || r.header.Get("X-Ratelimit-Remaining-Requests") != "2" {
			t.Fatalf("a call in the next minute: %d %v %s", r.status, r.header, r.body)
		}
	})

	t.Run("recovers", func(t *testing.T) {
		direct, prefix := redistest.Require(t)
		proxy := startSwitch(t, direct.Options().Addr)
		reg := prometheus.NewRegistry()
		m, err := gateway.NewMetrics(reg)
		must(t, err)
		e := newEnv(t, limited, withClock(newClock()), withLimiter(m, func(testing.TB) limits.Limiter {
			opts := *direct.Options()
			opts.Addr, opts.MaxRetries, opts.DialTimeout = proxy.addr(), -1, 200*time.Millisecond
			opts.ReadTimeout, opts.WriteTimeout = 500*time.Millisecond, 500*time.Millisecond
			client := redis.NewClient(&opts)
			t.Cleanup(func() { _ = client.Close() })
			return &limits.Failover{Primary: limits.NewRedis(client, prefix), Fallback: limits.NewMemory(), Retry: 50 * time.Millisecond,
				Log: quiet, OnChange: m.SetDegraded}
		}))
		post := func() response { return e.post("vic", "detect", "chat/completions", chat("chat", `,"max_tokens":10`)) }
		if r := post(); r.status != 200 || gauge(t, reg, degraded) != 0 {
			t.Fatalf("with Redis: %d %s, degraded %v", r.status, r.body, gauge(t, reg, degraded))
		}
		keys, err := direct.Keys(t.Context(), prefix+"*").Result()
		must(t, err)
		if len(keys) == 0 {
			t.Fatal("the limits are not in Redis")
		}
		proxy.set(false)
		// The process counts on its own: three calls, then the limit.
		for i := 0; i < 3; i++ {
			if r := post(); r.status != 200 {
				t.Fatalf("call %d with Redis down: %d %s", i, r.status, r.body)
			}
		}
		if v := gauge(t, reg, degraded); v != 1 {
			t.Fatalf("degraded %v with Redis down, want 1", v)
		}
		if r := post(); r.status != 429 || r.json("error.code").Str != "rate_limit_exceeded" {
			t.Fatalf("the fourth call with Redis down: %d %s", r.status, r.body)
		}
		proxy.set(true)
		// Within a few retries the primary answers again: Redis held one
		// call of this minute, so the next is let through.
		eventually.Within(t, 10*time.Second, "the limiter to leave degraded mode once Redis came back", func() bool {
			if gauge(t, reg, degraded) == 0 {
				return true
			}
			post()
			return false
		})
		if r := post(); r.status != 200 {
			t.Fatalf("a call with Redis back: %d %s", r.status, r.body)
		}
	})
}

// redisSwitch forwards connections to a TCP address while on; while off it
// drops the connections it holds and every new one.
type redisSwitch struct {
	ln     net.Listener
	target string
	on     atomic.Bool
	mu     sync.Mutex
	conns  map[net.Conn]bool
}

func startSwitch(t *testing.T, target string) *redisSwitch {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	s := &redisSwitch{ln: ln, target: target, conns: map[net.Conn]bool{}}
	s.on.Store(true)
	go s.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		s.set(false)
	})
	return s
}

func (s *redisSwitch) addr() string { return s.ln.Addr().String() }

func (s *redisSwitch) serve() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		if !s.on.Load() {
			_ = c.Close()
			continue
		}
		up, err := net.Dial("tcp", s.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		// A connection accepted while on but dialled through after set
		// turned it off would escape set's closing: set stores off before
		// it takes the lock, so checking again under the lock closes it.
		s.mu.Lock()
		if !s.on.Load() {
			s.mu.Unlock()
			_ = up.Close()
			_ = c.Close()
			continue
		}
		s.conns[c], s.conns[up] = true, true
		s.mu.Unlock()
		go func() { _, _ = io.Copy(up, c); _ = up.Close(); _ = c.Close() }()
		go func() { _, _ = io.Copy(c, up); _ = up.Close(); _ = c.Close() }()
	}
}

// set turns the switch on or off; off closes every connection it holds.
func (s *redisSwitch) set(on bool) {
	s.on.Store(on)
	if on {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		_ = c.Close()
	}
	clear(s.conns)
}
