package gateway

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/klique-ai/klique/internal/model"
)

// Metrics are the gateway's Prometheus series.
type Metrics struct {
	calls    *prometheus.CounterVec
	tokens   *prometheus.CounterVec
	degraded prometheus.Gauge
	overhead prometheus.Histogram
	// series keeps each counter once resolved: WithLabelValues hashes its
	// labels and takes a lock on every call. Aliases, outcomes and
	// directions are few (an alias must exist for a call to be counted),
	// so it stays small.
	series sync.Map // seriesKey → prometheus.Counter
}

type seriesKey struct {
	vec          *prometheus.CounterVec
	alias, label string
}

func (m *Metrics) counter(vec *prometheus.CounterVec, alias, label string) prometheus.Counter {
	k := seriesKey{vec, alias, label}
	if c, ok := m.series.Load(k); ok {
		return c.(prometheus.Counter)
	}
	c, _ := m.series.LoadOrStore(k, vec.WithLabelValues(alias, label))
	return c.(prometheus.Counter)
}

// NewMetrics registers the gateway's series with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "klique_gateway_calls_total",
			Help: "Model calls through the gateway, by alias and outcome."}, []string{"alias", "outcome"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "klique_gateway_tokens_total",
			Help: "Tokens of model calls, by alias and direction (input, output)."}, []string{"alias", "direction"}),
		degraded: prometheus.NewGauge(prometheus.GaugeOpts{Name: "klique_gateway_limits_degraded",
			Help: "1 while rate limits and budgets are kept in this process because Redis cannot be reached."}),
		overhead: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "klique_gateway_overhead_seconds",
			Help:    "Time a model call spends in the gateway before and after its exchange with the model server (which includes passing the answer on): authentication, limits, guardrails, routing, metering.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 14)}), // 50 µs to 410 ms
	}
	for _, c := range []prometheus.Collector{m.calls, m.tokens, m.degraded, m.overhead} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// SetDegraded records whether the limiter fell back to this process.
func (m *Metrics) SetDegraded(d bool) {
	if m == nil {
		return
	}
	if d {
		m.degraded.Set(1)
	} else {
		m.degraded.Set(0)
	}
}

// call counts a call, and the time it spent in the gateway outside the
// upstream.
func (m *Metrics) call(c *model.ModelCall, overhead time.Duration) {
	if m == nil {
		return
	}
	m.overhead.Observe(overhead.Seconds())
	m.counter(m.calls, c.Alias, c.Outcome).Inc()
	if c.InputTokens > 0 {
		m.counter(m.tokens, c.Alias, "input").Add(float64(c.InputTokens))
	}
	if c.OutputTokens > 0 {
		m.counter(m.tokens, c.Alias, "output").Add(float64(c.OutputTokens))
	}
}

// SetAside lists the static-route endpoints this gateway has set aside
// after a failure, each with when it is tried first again: the only
// health the gateway knows of its routes (it learns it from the calls
// themselves, passively). Endpoints not listed take calls in turn. The
// dashboard's Models page shows it; it is this replica's view.
func (g *Gateway) SetAside() map[string]time.Time {
	b := g.proxy.balance
	now := b.now()
	out := map[string]time.Time{}
	b.mu.Lock()
	for e, until := range b.down {
		if now.Before(until) {
			out[e] = until
		}
	}
	b.mu.Unlock()
	return out
}
