package server

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the server's Prometheus metrics, on a registry of its own so
// that several servers in one test process do not collide.
type metrics struct {
	registry       *prometheus.Registry
	httpRequests   *prometheus.CounterVec
	httpSeconds    *prometheus.HistogramVec
	graphqlOps     *prometheus.CounterVec
	graphqlSeconds *prometheus.HistogramVec
	authFailures   *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "klique_http_requests_total", Help: "HTTP requests by route and status code.",
		}, []string{"route", "code"}),
		httpSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "klique_http_request_duration_seconds", Help: "HTTP request latency by route.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"route"}),
		graphqlOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "klique_graphql_operations_total", Help: "GraphQL operations by type and outcome.",
		}, []string{"operation", "outcome"}),
		graphqlSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "klique_graphql_operation_duration_seconds", Help: "GraphQL operation latency by type.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"operation"}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "klique_auth_failures_total", Help: "Refused credentials by reason.",
		}, []string{"reason"}),
	}
	m.registry.MustRegister(m.httpRequests, m.httpSeconds, m.graphqlOps, m.graphqlSeconds, m.authFailures,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
