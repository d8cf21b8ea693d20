package loop

import "github.com/prometheus/client_golang/prometheus"

// loopMetrics are the engine's Prometheus metrics.
type loopMetrics struct {
	passSeconds prometheus.Histogram
	placed      prometheus.Counter
	preempted   prometheus.Counter
	waiting     prometheus.Gauge
}

func newLoopMetrics() *loopMetrics {
	return &loopMetrics{
		passSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "klique_engine_pass_duration_seconds",
			Help: "Duration of one engine pass over one tenant, store reads and writes included.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		placed:    prometheus.NewCounter(prometheus.CounterOpts{Name: "klique_engine_placements_total", Help: "Tasks placed on pools."}),
		preempted: prometheus.NewCounter(prometheus.CounterOpts{Name: "klique_engine_preemptions_total", Help: "Tasks preempted and requeued."}),
		waiting:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "klique_engine_waiting_tasks", Help: "Waiting tasks the last pass read (first tasks of each queue)."}),
	}
}

func (m *loopMetrics) observe(r Report) {
	m.passSeconds.Observe(r.Duration.Seconds())
	m.placed.Add(float64(r.Placed))
	m.preempted.Add(float64(r.Preempted))
	m.waiting.Set(float64(r.Waiting))
}

// Register adds the loop's metrics to a registry.
func (l *Loop) Register(reg prometheus.Registerer) error {
	l.init()
	for _, c := range []prometheus.Collector{l.metrics.passSeconds, l.metrics.placed, l.metrics.preempted, l.metrics.waiting} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
