package gateway

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/klique-ai/klique/internal/model"
)

// Metrics are the gateway's Prometheus series.
type Metrics struct {
	calls    *prometheus.CounterVec
	tokens   *prometheus.CounterVec
	degraded prometheus.Gauge
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
	}
	for _, c := range []prometheus.Collector{m.calls, m.tokens, m.degraded} {
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

func (m *Metrics) call(c *model.ModelCall) {
	if m == nil {
		return
	}
	m.calls.WithLabelValues(c.Alias, c.Outcome).Inc()
	if c.InputTokens > 0 {
		m.tokens.WithLabelValues(c.Alias, "input").Add(float64(c.InputTokens))
	}
	if c.OutputTokens > 0 {
		m.tokens.WithLabelValues(c.Alias, "output").Add(float64(c.OutputTokens))
	}
}
